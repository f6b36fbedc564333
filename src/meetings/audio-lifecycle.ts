import { sql } from 'kysely';
import type { Tx } from '../db/schema.ts';
import type { ErrorRecord } from '../domain/errors.ts';
import { MeetingStatus } from '../domain/status.ts';
import type { MeetingDeps } from './deps.ts';
import { deleteNow, handOffMeetingObjects } from '../storage/objects.ts';

export const STOPPED_BEFORE_FINISHED = 'This meeting stopped before it finished';

/**
 * L11: marks the meeting failed with a reason a person can read. Returns false when the meeting had
 * already ended (a late failure must not overwrite a completed meeting).
 */
export async function failMeetingInTx(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  error: ErrorRecord,
  actor: string,
): Promise<boolean> {
  const meeting = await deps.meetings.lock(trx, meetingId);
  if (meeting.status === MeetingStatus.complete || meeting.status === MeetingStatus.failed) return false;
  await deps.meetings.transition(trx, meeting, 'failMeeting', actor, `${error.code}: ${error.message}`, {
    failure_code: error.code,
    failure_message: `${STOPPED_BEFORE_FINISHED}: ${error.message}`,
  });
  deps.log.error({ meetingId, code: error.code }, 'meeting failed');
  return true;
}

/**
 * L16: hands every stored audio object of a meeting to the cleanup outbox and records when, in one
 * transaction, then deletes them at once. A delete that fails stays in the outbox and is retried by
 * the cleanup pass until it succeeds (B5); until then its bytes still count (B6). Idempotent.
 */
export async function deleteMeetingAudio(deps: MeetingDeps, meetingId: string): Promise<void> {
  const keys = await deps.db.transaction().execute(async (trx) => {
    // The meeting row before its blobs, as in deleteMeeting: the same order everywhere.
    const meeting = await trx
      .selectFrom('meetings')
      .select('id')
      .where('id', '=', meetingId)
      .forNoKeyUpdate()
      .executeTakeFirst();
    if (!meeting) return [];
    const handed = await handOffMeetingObjects(trx, meetingId, 'meeting audio deleted');
    await trx
      .updateTable('meetings')
      .set({ audio_deleted_at: sql<Date>`coalesce(audio_deleted_at, now())` })
      .where('id', '=', meetingId)
      .execute();
    return handed;
  });
  await deleteNow(deps, keys);
}

/**
 * The audio sweep: hands off the audio that an ended meeting still has (its close-out or failure
 * path stopped before the hand-off). The deletes themselves are the cleanup pass's.
 */
export async function deleteEndedMeetingsAudio(deps: MeetingDeps, limit = 20): Promise<number> {
  const rows = await deps.db
    .selectFrom('blobs')
    .innerJoin('meetings', 'meetings.id', 'blobs.meeting_id')
    .select('blobs.meeting_id')
    .distinct()
    .where('blobs.deleted_at', 'is', null)
    .where('meetings.status', 'in', [MeetingStatus.complete, MeetingStatus.failed])
    .limit(limit)
    .execute();
  let cleaned = 0;
  for (const { meeting_id } of rows) {
    try {
      await deleteMeetingAudio(deps, meeting_id);
      cleaned++;
    } catch (err) {
      deps.log.warn({ meetingId: meeting_id, err: String(err) }, 'audio deletion failed again; will retry');
    }
  }
  return cleaned;
}
