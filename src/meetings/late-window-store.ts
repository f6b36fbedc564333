import { sql } from 'kysely';
import type { Tx } from '../db/schema.ts';
import { EventType, JobStatus, MinutesStatus, WindowStatus } from '../domain/status.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { MeetingDeps } from './deps.ts';

/**
 * A published transcript changed (L19): its revision goes up and its minutes are to be written
 * again. One set of columns for a late chunk's repair and a late window.
 */
export function newTranscriptRevision() {
  return {
    transcript_revision: sql<number>`transcript_revision + 1`,
    minutes_status: MinutesStatus.pending,
    minutes_code: null,
    minutes_message: null,
  };
}

/** A marked window that has settled, or is pending with no job left to settle it. */
const SETTLED_OR_ORPHANED = sql<boolean>`(w.status <> ${WindowStatus.pending} or not exists (
  select 1 from jobs j where j.subject_id = w.id and j.status in (${JobStatus.pending}, ${JobStatus.running})))`;

/**
 * L19 for windows that settle after publication. The close-out stops waiting for windows in
 * retry at its cap (L4) and publishes the transcript; such a window keeps its audio and its job
 * (L16) and may still be transcribed minutes later. The publication marks every window still
 * pending (`pending_at_publication`, under the meeting lock and each window's row lock, so a
 * window's commit either lands before the mark or sees it). When a marked window has settled,
 * this, under the meeting lock: clears its mark, takes the counts of untranscribed windows again,
 * and, if the window added words, gives the transcript a new revision, sends
 * `meeting.transcript_revised` and asks for the minutes to be rewritten, as a late chunk's repair
 * does. A second run finds nothing to do. True when the transcript was revised.
 */
export async function publishSettledLateWindows(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
): Promise<boolean> {
  const meeting = await deps.meetings.lockIfExists(trx, meetingId);
  if (!meeting || !meeting.transcript_completed_at) return false;
  // Settled, or pending with no job left to settle it (its jobs were canceled with the meeting's
  // batch): nothing will come of it any more.
  const settled = await trx
    .updateTable('windows as w')
    .set({ pending_at_publication: false })
    .where('w.meeting_id', '=', meetingId)
    .where('w.pending_at_publication', '=', true)
    .where(SETTLED_OR_ORPHANED)
    .returning(['w.index', 'w.status', 'w.segment_count'])
    .execute();
  if (settled.length === 0) return false;
  const added = settled
    .filter((w) => w.status === WindowStatus.transcribed && (w.segment_count ?? 0) > 0)
    .map((w) => w.index)
    .sort((a, b) => a - b);
  const revise = added.length > 0;
  const counts = await untranscribedNow(trx, meetingId);
  const updated = await trx
    .updateTable('meetings')
    .set({
      untranscribed_in_flight: counts.inFlight,
      untranscribed_exhausted: counts.exhausted,
      ...(revise ? newTranscriptRevision() : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', meetingId)
    .returning(['transcript_revision'])
    .executeTakeFirstOrThrow();
  await recordAudit(trx, {
    workspaceId: meeting.workspace_id,
    subjectType: 'meeting',
    subjectId: meetingId,
    from: meeting.status,
    to: meeting.status,
    actor,
    reason: revise
      ? `${added.length} window(s) transcribed after the transcript was published: revision ${updated.transcript_revision}`
      : `${settled.length} window(s) settled after the transcript was published without adding words`,
    details: {
      lateWindows: added,
      settled: settled.map((w) => ({ index: w.index, status: w.status })),
      revision: updated.transcript_revision,
    },
  });
  if (revise) {
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.meetingTranscriptRevised,
      subjectId: meetingId,
      payload: { meetingId, revision: updated.transcript_revision, lateChunks: [], lateWindows: added },
    });
  }
  return revise;
}

/**
 * The meeting's untranscribed windows as they stand in this transaction. Not from window_tallies:
 * its trigger runs at commit, so a window this transaction just failed would not be counted yet.
 */
async function untranscribedNow(
  trx: Tx,
  meetingId: string,
): Promise<{ inFlight: number; exhausted: number }> {
  const r = await sql<{ in_flight: number; exhausted: number }>`
    select count(*) filter (where w.status = 'pending' and exists (
                 select 1 from jobs j where j.subject_id = w.id and j.status in (${JobStatus.pending}, ${JobStatus.running})
               ))::int as in_flight,
           count(*) filter (where w.status in ('failed', 'missing') or (w.status = 'pending' and not exists (
                 select 1 from jobs j where j.subject_id = w.id and j.status in (${JobStatus.pending}, ${JobStatus.running})
               )))::int as exhausted
      from windows w where w.meeting_id = ${meetingId}::uuid`.execute(trx);
  const row = r.rows[0]!;
  return { inFlight: row.in_flight, exhausted: row.exhausted };
}

/** The publication's half: every window still pending is marked, under the meeting lock. */
export async function markPendingAtPublication(trx: Tx, meetingId: string): Promise<void> {
  await trx
    .updateTable('windows')
    .set({ pending_at_publication: true })
    .where('meeting_id', '=', meetingId)
    .where('status', '=', WindowStatus.pending)
    .execute();
}

/**
 * A window's job after its commit: if its window was marked at publication, publish it now (the
 * sweep does it otherwise, for a process that died in between).
 */
export async function publishIfLate(deps: MeetingDeps, windowId: string, actor: string): Promise<boolean> {
  const w = await deps.db
    .selectFrom('windows')
    .select(['meeting_id', 'status', 'pending_at_publication'])
    .where('id', '=', windowId)
    .executeTakeFirst();
  if (!w || !w.pending_at_publication || w.status === WindowStatus.pending) return false;
  return deps.db.transaction().execute((trx) => publishSettledLateWindows(deps, trx, w.meeting_id, actor));
}

/**
 * The sweep's half: meetings with a marked window that has settled or has no job left, a few per
 * pass in random order (one meeting that keeps failing does not hold back the others).
 */
export async function publishLateWindowsSweep(
  deps: MeetingDeps,
  actor: string,
  log: { warn: (o: object, msg: string) => void },
  limit = 20,
): Promise<number> {
  const rows = await deps.db
    .selectFrom('windows as w')
    .select('w.meeting_id')
    .where('w.pending_at_publication', '=', true)
    .where(SETTLED_OR_ORPHANED)
    .groupBy('w.meeting_id')
    .orderBy(sql`random()`)
    .limit(limit)
    .execute();
  let revised = 0;
  for (const { meeting_id } of rows) {
    try {
      if (
        await deps.db.transaction().execute((trx) => publishSettledLateWindows(deps, trx, meeting_id, actor))
      )
        revised++;
    } catch (err) {
      log.warn({ meetingId: meeting_id, err: String(err) }, 'late windows not published yet');
    }
  }
  return revised;
}
