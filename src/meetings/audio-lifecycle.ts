import type { Tx } from '../db/schema.ts';
import type { ErrorRecord } from '../domain/errors.ts';
import { JobKind, MeetingStatus } from '../domain/status.ts';
import { meetingsWithAudioToHandOff, pinnedBlobIds } from './audio-retention-rows.ts';
import { recordAudit } from '../jobs/audit-store.ts';
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
 * Audio not yet in the transcript is kept (pinnedBlobIds) unless `keepNothing` (the late-audio
 * bound has passed); a repair that commits it calls this again.
 */
export async function deleteMeetingAudio(
  deps: MeetingDeps,
  meetingId: string,
  opts: { keepNothing?: boolean } = {},
): Promise<void> {
  const keys = await deps.db.transaction().execute(async (trx) => {
    // The meeting row before its blobs, as in deleteMeeting: the same order everywhere.
    const meeting = await deps.meetings.lockIfExists(trx, meetingId);
    if (!meeting) return [];
    // Past the late-audio bound nothing is kept, unless a late chunk taken just before it is being
    // repaired right now (checked under the meeting lock, which a chunk's store takes too).
    const repairing =
      opts.keepNothing && (await deps.jobs.hasActiveJob(trx, meetingId, JobKind.repairTimeline));
    const keep = opts.keepNothing && !repairing ? [] : await pinnedBlobIds(trx, meetingId);
    const handed = await handOffMeetingObjects(trx, meetingId, 'meeting audio deleted', keep);
    await deps.meetings.markAudioDeleted(trx, meetingId);
    if (handed.length > 0 || !meeting.audio_deleted_at) {
      await recordAudit(trx, {
        workspaceId: meeting.workspace_id,
        subjectType: 'meeting',
        subjectId: meetingId,
        from: null,
        to: 'audio:deleted',
        actor: 'worker',
        reason: `${handed.length} audio objects handed to cleanup${keep.length > 0 ? `; ${keep.length} kept for late audio` : ''}`,
      });
    }
    return handed;
  });
  await deleteNow(deps, keys);
}

/**
 * The audio sweep: hands off the audio that an ended meeting still has (its close-out or failure
 * path stopped before the hand-off, or it kept audio for late chunks whose bound has now passed).
 * The deletes themselves are the cleanup pass's.
 */
export async function deleteEndedMeetingsAudio(deps: MeetingDeps, limit = 20): Promise<number> {
  const rows = await meetingsWithAudioToHandOff(deps.db, deps.config.lateAudioMs, limit);
  let cleaned = 0;
  for (const { meeting_id, expired } of rows) {
    try {
      await deleteMeetingAudio(deps, meeting_id, { keepNothing: expired });
      cleaned++;
    } catch (err) {
      deps.log.warn({ meetingId: meeting_id, err: String(err) }, 'audio deletion failed again; will retry');
    }
  }
  return cleaned;
}
