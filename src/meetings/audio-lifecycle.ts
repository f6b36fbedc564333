import { sql, type RawBuilder } from 'kysely';
import type { Tx } from '../db/schema.ts';
import type { ErrorRecord } from '../domain/errors.ts';
import { ACTIVE_JOB_STATUSES, MeetingStatus } from '../domain/status.ts';
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
 * L16, L19: the audio a meeting keeps after it ended: chunks not yet in the transcript (they arrived
 * late, or wait for a repair to cut them) and the original bytes of WebM pieces read without the
 * piece before them (so that piece, when it comes, lets them be read in full), and the audio of
 * windows still being attempted. Kept until their repair commits or their window settles, or until
 * the late-audio bound has passed.
 */
async function pinnedBlobIds(trx: Tx, meetingId: string): Promise<string[]> {
  const rows = await sql<{ id: string }>`
    select c.blob_id as id from chunks c join meetings m on m.id = c.meeting_id
     where c.meeting_id = ${meetingId}::uuid
       and (c.start_samples is null or c.decoded_after_gap
            or c.start_samples + coalesce(c.samples, 0) > m.cut_samples)
    union all
    select c.pcm_blob_id from chunks c join meetings m on m.id = c.meeting_id
     where c.meeting_id = ${meetingId}::uuid and c.pcm_blob_id is not null
       and c.start_samples + coalesce(c.samples, 0) > m.cut_samples
    union all
    select b.id from blobs b
     where b.meeting_id = ${meetingId}::uuid and b.deleted_at is null
       and ${heardByWindowInFlight(sql`b.id`, sql`${meetingId}::uuid`)}`.execute(trx);
  return rows.rows.map((r) => r.id);
}

/**
 * L4, L16: the audio of a window whose own job is still at it (queued behind a backlog, or
 * waiting out a speech outage) when the close-out stopped waiting at its cap: that window's
 * stretch of the chunks (or the decoded stream), or an upload window's own object. Kept until the
 * window settles, so its words still reach the transcript. Before, it was deleted with the rest
 * and the window failed `audio.deleted` (found by the 30-minute simulation).
 */
function heardByWindowInFlight(blobId: RawBuilder<unknown>, meetingId: RawBuilder<unknown>) {
  return sql<boolean>`exists (
    select 1 from windows w
     where w.meeting_id = ${meetingId} and w.status = 'pending'
       and exists (select 1 from jobs j where j.subject_id = w.id and j.status in ('pending', 'running'))
       and (w.blob_id = ${blobId}
            or exists (select 1 from chunks c
                        where c.meeting_id = w.meeting_id and (c.blob_id = ${blobId} or c.pcm_blob_id = ${blobId})
                          and c.start_samples is not null and w.start_samples is not null
                          and c.start_samples < w.end_samples
                          and c.start_samples + coalesce(c.samples, 0) > w.start_samples)))`;
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
    const meeting = await trx
      .selectFrom('meetings')
      .select(['id', 'workspace_id', 'audio_deleted_at'])
      .where('id', '=', meetingId)
      .forNoKeyUpdate()
      .executeTakeFirst();
    if (!meeting) return [];
    // Past the late-audio bound nothing is kept, unless a late chunk taken just before it is being
    // repaired right now (checked under the meeting lock, which a chunk's store takes too).
    const repairing =
      opts.keepNothing &&
      (await trx
        .selectFrom('jobs')
        .select('id')
        .where('subject_id', '=', meetingId)
        .where('kind', '=', 'repair-timeline')
        .where('status', 'in', ACTIVE_JOB_STATUSES)
        .executeTakeFirst()) !== undefined;
    const keep = opts.keepNothing && !repairing ? [] : await pinnedBlobIds(trx, meetingId);
    const handed = await handOffMeetingObjects(trx, meetingId, 'meeting audio deleted', keep);
    await trx
      .updateTable('meetings')
      .set({ audio_deleted_at: sql<Date>`coalesce(audio_deleted_at, now())` })
      .where('id', '=', meetingId)
      .execute();
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
  const rows = await sql<{ meeting_id: string; expired: boolean }>`
    select distinct b.meeting_id,
           coalesce(m.completed_at, m.failed_at) < now() - ${deps.config.lateAudioMs} * interval '1 millisecond' as expired
      from blobs b join meetings m on m.id = b.meeting_id
     where b.deleted_at is null and m.status in (${MeetingStatus.complete}, ${MeetingStatus.failed})
       and (m.audio_deleted_at is null
            or coalesce(m.completed_at, m.failed_at) < now() - ${deps.config.lateAudioMs} * interval '1 millisecond'
            or not (exists (
              select 1 from chunks c
               where c.meeting_id = m.id and (c.blob_id = b.id or c.pcm_blob_id = b.id)
                 and (c.start_samples is null or c.decoded_after_gap
                      or c.start_samples + coalesce(c.samples, 0) > m.cut_samples))
              or ${heardByWindowInFlight(sql`b.id`, sql`m.id`)}))
       and not exists (select 1 from jobs j where j.meeting_id = m.id and j.kind = 'repair-timeline'
                        and j.status in ('pending', 'running'))
     limit ${limit}`.execute(deps.db);
  let cleaned = 0;
  for (const { meeting_id, expired } of rows.rows) {
    try {
      await deleteMeetingAudio(deps, meeting_id, { keepNothing: expired });
      cleaned++;
    } catch (err) {
      deps.log.warn({ meetingId: meeting_id, err: String(err) }, 'audio deletion failed again; will retry');
    }
  }
  return cleaned;
}
