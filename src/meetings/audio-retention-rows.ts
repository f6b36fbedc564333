import { sql, type RawBuilder } from 'kysely';
import type { Executor, Tx } from '../db/schema.ts';
import { MeetingStatus } from '../domain/status.ts';

/**
 * The rows behind audio retention (src/meetings/audio-lifecycle.ts has the steps): which stored
 * audio an ended meeting still needs, and which ended meetings still hold audio to hand off.
 */

/**
 * L16, L19: the audio a meeting keeps after it ended: chunks not yet in the transcript (they arrived
 * late, or wait for a repair to cut them) and the original bytes of WebM pieces read without the
 * piece before them (so that piece, when it comes, lets them be read in full), and the audio of
 * windows still being attempted. Kept until their repair commits or their window settles, or until
 * the late-audio bound has passed.
 */
export async function pinnedBlobIds(trx: Tx, meetingId: string): Promise<string[]> {
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
 * Ended meetings that still hold audio to hand off: never handed off, past the late-audio bound
 * (`expired`: nothing is kept), or holding audio that no late chunk or window in flight needs any
 * more; never one whose repair is queued or running.
 */
export async function meetingsWithAudioToHandOff(
  db: Executor,
  lateAudioMs: number,
  limit: number,
): Promise<Array<{ meeting_id: string; expired: boolean }>> {
  const rows = await sql<{ meeting_id: string; expired: boolean }>`
    select distinct b.meeting_id,
           coalesce(m.completed_at, m.failed_at) < now() - ${lateAudioMs} * interval '1 millisecond' as expired
      from blobs b join meetings m on m.id = b.meeting_id
     where b.deleted_at is null and m.status in (${MeetingStatus.complete}, ${MeetingStatus.failed})
       and (m.audio_deleted_at is null
            or coalesce(m.completed_at, m.failed_at) < now() - ${lateAudioMs} * interval '1 millisecond'
            or not (exists (
              select 1 from chunks c
               where c.meeting_id = m.id and (c.blob_id = b.id or c.pcm_blob_id = b.id)
                 and (c.start_samples is null or c.decoded_after_gap
                      or c.start_samples + coalesce(c.samples, 0) > m.cut_samples))
              or ${heardByWindowInFlight(sql`b.id`, sql`m.id`)}))
       and not exists (select 1 from jobs j where j.meeting_id = m.id and j.kind = 'repair-timeline'
                        and j.status in ('pending', 'running'))
     limit ${limit}`.execute(db);
  return rows.rows;
}
