import { sql, type RawBuilder } from 'kysely';
import type { Executor, Tx } from '../db/schema.ts';
import { MeetingStatus } from '../domain/status.ts';
import { SAMPLE_RATE } from '../domain/timeline.ts';
import { failedWithAudioKept } from './pg-meeting-store.ts';

/**
 * The rows behind audio retention (src/meetings/audio-lifecycle.ts has the steps): which stored
 * audio an ended meeting still needs, and which ended meetings still hold audio to hand off.
 */

/** Which of an ended meeting's kept audio is still kept: each kind has its own retention bound. */
export interface KeptAudio {
  /** L19: chunks not yet in the transcript (late, or waiting for a repair to cut them). */
  late: boolean;
  /** J20: the audio of windows with no transcript that may still get one (held stretches). */
  held: boolean;
  /** E4: the audio of the whole timeline, for playback (the workspace keeps it for some days). */
  playback?: boolean;
}

/**
 * L16, L19, J20: the audio a meeting keeps after it ended: chunks not yet in the transcript (they
 * arrived late, or wait for a repair to cut them) and the original bytes of WebM pieces read
 * without the piece before them (so that piece, when it comes, lets them be read in full), until
 * their repair commits or the late-audio bound has passed; and the audio under windows with no
 * transcript that may still get one (held stretches), until they are transcribed, released, or the
 * held-audio bound has passed.
 */
export async function pinnedBlobIds(trx: Tx, meetingId: string, keep: KeptAudio): Promise<string[]> {
  if (!keep.late && !keep.held && !keep.playback) return [];
  const rows = await sql<{ id: string }>`
    select c.blob_id as id from chunks c join meetings m on m.id = c.meeting_id
     where ${keep.late} and c.meeting_id = ${meetingId}::uuid
       and (c.start_samples is null or c.decoded_after_gap
            or c.start_samples + coalesce(c.samples, 0) > m.cut_samples)
    union all
    select c.pcm_blob_id from chunks c join meetings m on m.id = c.meeting_id
     where ${keep.late} and c.meeting_id = ${meetingId}::uuid and c.pcm_blob_id is not null
       and c.start_samples + coalesce(c.samples, 0) > m.cut_samples
    union all
    select b.id from blobs b
     where ${keep.held} and b.meeting_id = ${meetingId}::uuid and b.deleted_at is null
       and ${heardByHeldWindow(sql`b.id`, sql`${meetingId}::uuid`)}
    union all
    select b.id from blobs b
     where ${keep.playback === true} and b.meeting_id = ${meetingId}::uuid and b.deleted_at is null
       and ${playbackAudio(sql`b.id`, sql`${meetingId}::uuid`)}`.execute(trx);
  return rows.rows.map((r) => r.id);
}

/**
 * E4: the audio a meeting plays back from: a live meeting's chunks as its timeline holds them (a
 * WebM piece's decoded copy), an upload's windows (not those a repair replaced).
 */
function playbackAudio(blobId: RawBuilder<unknown>, meetingId: RawBuilder<unknown>) {
  return sql<boolean>`(exists (select 1 from chunks c
                       where c.meeting_id = ${meetingId} and c.start_samples is not null
                         and (case when c.format = 'webm' then c.pcm_blob_id else c.blob_id end) = ${blobId})
            or exists (select 1 from windows w
                        where w.meeting_id = ${meetingId} and w.blob_id = ${blobId}
                          and w.status <> 'superseded'))`;
}

/**
 * L4, L16, J20: the audio of a window with no transcript that may still get one: its own job is
 * still at it (queued behind a backlog, waiting out a speech outage, or isolated on its slow
 * backoff), or it failed on the way (poison, an error that did not pass) and its audio was not
 * released. That window's stretch of the chunks (or the decoded stream), or an upload window's
 * own object. Deleted with the rest, the window's words would be lost.
 */
function heardByHeldWindow(blobId: RawBuilder<unknown>, meetingId: RawBuilder<unknown>) {
  return sql<boolean>`exists (
    select 1 from windows w
     where w.meeting_id = ${meetingId} and ${heldWindow(sql`w`)}
       and (w.blob_id = ${blobId}
            or exists (select 1 from chunks c
                        where c.meeting_id = w.meeting_id and (c.blob_id = ${blobId} or c.pcm_blob_id = ${blobId})
                          and c.start_samples is not null and w.start_samples is not null
                          and c.start_samples < w.end_samples
                          and c.start_samples + coalesce(c.samples, 0) > w.start_samples)))`;
}

/** J20: a window with no transcript that may still get one (see heardByHeldWindow). */
function heldWindow(w: RawBuilder<unknown>) {
  return sql<boolean>`((${w}.status = 'pending'
             and exists (select 1 from jobs j where j.subject_id = ${w}.id and j.status in ('pending', 'running')))
            or ${failedWithAudioKept(w)})`;
}

/**
 * Ended meetings that still hold audio to hand off: never handed off, holding audio that neither
 * a late chunk nor a held window needs any more, or past a retention bound (`lateExpired`: late
 * chunks are kept no longer; `heldExpired`: held stretches are given up; `playbackExpired`: the
 * workspace's playback days have passed, E4); never one whose repair is queued or running.
 */
export async function meetingsWithAudioToHandOff(
  db: Executor,
  bounds: { lateAudioMs: number; heldAudioMs: number },
  limit: number,
): Promise<
  Array<{ meeting_id: string; late_expired: boolean; held_expired: boolean; playback_expired: boolean }>
> {
  const rows = await sql<{
    meeting_id: string;
    late_expired: boolean;
    held_expired: boolean;
    playback_expired: boolean;
  }>`
    select q.meeting_id, bool_or(q.late_expired) as late_expired, bool_or(q.held_expired) as held_expired,
           bool_or(q.playback_expired) as playback_expired
      from (
        select b.meeting_id,
               coalesce(m.playback_until <= now(), false) as playback_expired,
               m.playback_until is null or m.playback_until <= now()
                 or not ${playbackAudio(sql`b.id`, sql`m.id`)} as playback_free,
               coalesce(m.completed_at, m.failed_at) < now() - ${bounds.lateAudioMs} * interval '1 millisecond' as late_expired,
               coalesce(m.completed_at, m.failed_at) < now() - ${bounds.heldAudioMs} * interval '1 millisecond' as held_expired,
               m.audio_deleted_at is null
                 or not exists (
                   select 1 from chunks c
                    where c.meeting_id = m.id and (c.blob_id = b.id or c.pcm_blob_id = b.id)
                      and (c.start_samples is null or c.decoded_after_gap
                           or c.start_samples + coalesce(c.samples, 0) > m.cut_samples)) as late_free,
               m.audio_deleted_at is null or not ${heardByHeldWindow(sql`b.id`, sql`m.id`)} as held_free
          from blobs b join meetings m on m.id = b.meeting_id
         where b.deleted_at is null and m.status in (${MeetingStatus.complete}, ${MeetingStatus.failed})
           -- E4: a meeting whose audio is kept for playback is passed over (its blobs are not
           -- looked at each sweep) unless held stretches of it are past their bound (J20).
           and (m.playback_until is null or m.playback_until <= now()
                or (coalesce(m.completed_at, m.failed_at) < now() - ${bounds.heldAudioMs} * interval '1 millisecond'
                    and exists (select 1 from windows hw where hw.meeting_id = m.id and ${heldWindow(sql`hw`)})))
           and not exists (select 1 from jobs j where j.meeting_id = m.id and j.kind = 'repair-timeline'
                            and j.status in ('pending', 'running'))
      ) q
     where (q.late_free or q.late_expired) and (q.held_free or q.held_expired) and (q.playback_free or q.held_expired)
     group by q.meeting_id
     limit ${limit}`.execute(db);
  return rows.rows;
}

/**
 * J20: the meeting's windows with no transcript whose audio is held, and the active jobs of those
 * still being tried, for an operator's release or the retention bound.
 */
export async function heldWindowsOf(
  trx: Tx,
  meetingId: string,
): Promise<Array<{ id: string; status: string; job_ids: string[] }>> {
  const rows = await sql<{ id: string; status: string; job_ids: string[] | null }>`
    select w.id, w.status,
           (select array_agg(j.id order by j.id) from jobs j
             where j.subject_id = w.id and j.status in ('pending', 'running')) as job_ids
      from windows w
     where w.meeting_id = ${meetingId}::uuid and w.audio_released_at is null
       and (w.status = 'pending' or ${failedWithAudioKept(sql`w`)})
     order by w.index`.execute(trx);
  return rows.rows.map((r) => ({ id: r.id, status: r.status, job_ids: r.job_ids ?? [] }));
}

/** J20: the held audio of these windows is released: no longer kept for them. */
export async function markAudioReleased(trx: Tx, windowIds: string[]): Promise<void> {
  if (windowIds.length === 0) return;
  await trx
    .updateTable('windows')
    .set({ audio_released_at: sql<Date>`now()` })
    .where('id', 'in', windowIds)
    .where('audio_released_at', 'is', null)
    .execute();
}

/**
 * E4: a completed meeting of a workspace that keeps audio for playback is kept until its
 * completion plus the workspace's playback days; null when the workspace keeps none. Not (yet) a
 * meeting recorded as several tracks, nor an upload whose channels are its speakers: their audio
 * would have to be mixed to be heard as it was, so none of it is kept for a playback that would
 * play one voice (docs/storage.md).
 */
export async function startPlayback(trx: Tx, meetingId: string): Promise<Date | null> {
  const rows = await sql<{ until: Date }>`
    update meetings m
       set playback_until = coalesce(m.completed_at, now()) + w.playback_days * interval '1 day'
      from workspaces w
     where m.id = ${meetingId}::uuid and w.id = m.workspace_id and w.playback_days > 0
       and m.playback_until is null and m.parent_id is null and m.channels is null
       and not exists (select 1 from meetings t where t.parent_id = m.id)
    returning m.playback_until as until`.execute(trx);
  const until = rows.rows[0]?.until ?? null;
  return until && until > new Date() ? until : null;
}

const SAMPLES_PER_MS = SAMPLE_RATE / 1000;

/** E4: an upload's windows as the audio it plays back from, over [from, to) samples. */
export async function uploadPlaybackSources(
  db: Executor,
  meetingId: string,
  from: number,
  to: number,
): Promise<
  Array<{ seq: number; start: number; length: number; objectKey: string | null; deleted: boolean }>
> {
  const rows = await sql<{
    index: number;
    start_ms: number;
    end_ms: number;
    object_key: string;
    deleted: boolean;
  }>`
    select w.index, w.start_ms, w.end_ms, b.object_key, b.deleted_at is not null as deleted
      from windows w join blobs b on b.id = w.blob_id
     where w.meeting_id = ${meetingId}::uuid and w.status <> 'superseded'
       and w.end_ms * ${SAMPLES_PER_MS} > ${from} and w.start_ms * ${SAMPLES_PER_MS} < ${to}
     order by w.start_ms`.execute(db);
  return rows.rows.map((r) => ({
    seq: r.index,
    start: r.start_ms * SAMPLES_PER_MS,
    length: (r.end_ms - r.start_ms) * SAMPLES_PER_MS,
    objectKey: r.object_key,
    deleted: r.deleted,
  }));
}

/** E4: how many days a workspace keeps audio for playback (0: none). */
export async function playbackDaysOf(db: Executor, workspaceId: string): Promise<number> {
  const row = await db
    .selectFrom('workspaces')
    .select('playback_days')
    .where('id', '=', workspaceId)
    .executeTakeFirst();
  return row?.playback_days ?? 0;
}

/**
 * E4: a new number of days. Fewer days also shorten what is kept already (the promise the app
 * states is then true of every meeting; the sweep deletes what is past it, audited); more days
 * apply to meetings completed from now on.
 */
export async function setPlaybackDays(db: Executor, workspaceId: string, days: number): Promise<void> {
  await db.updateTable('workspaces').set({ playback_days: days }).where('id', '=', workspaceId).execute();
  await sql`update meetings
               set playback_until = least(playback_until, coalesce(completed_at, now()) + ${days} * interval '1 day')
             where workspace_id = ${workspaceId}::uuid and playback_until is not null
               and playback_until > coalesce(completed_at, now()) + ${days} * interval '1 day'`.execute(db);
}
