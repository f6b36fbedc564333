import { sql } from 'kysely';
import type { Executor, Tx } from '../db/schema.ts';
import { JobStatus, MinutesStatus, WindowStatus } from '../domain/status.ts';

/**
 * A published transcript changed (L19): its revision goes up and its minutes are to be written
 * again. One set of columns for a late chunk's repair and a late window.
 */
export function newTranscriptRevision() {
  return {
    transcript_revision: sql<number>`transcript_revision + 1`,
    // L25: a track has no minutes of its own (its meeting's are rewritten).
    minutes_status: sql<MinutesStatus>`case when parent_id is null then ${MinutesStatus.pending} else minutes_status end`,
    minutes_code: null,
    minutes_message: null,
  };
}

/** A marked window that has settled, or is pending with no job left to settle it. */
const SETTLED_OR_ORPHANED = sql<boolean>`(w.status <> ${WindowStatus.pending} or not exists (
  select 1 from jobs j where j.subject_id = w.id and j.status in (${JobStatus.pending}, ${JobStatus.running})))`;

/**
 * Clears the mark of every window of the meeting marked at publication that has settled, or is
 * pending with no job left to settle it (its jobs were canceled with the meeting's batch: nothing
 * will come of it any more). Returns those windows.
 */
export async function clearSettledLateMarks(
  trx: Tx,
  meetingId: string,
): Promise<Array<{ index: number; status: string; segment_count: number | null }>> {
  return trx
    .updateTable('windows as w')
    .set({ pending_at_publication: false })
    .where('w.meeting_id', '=', meetingId)
    .where('w.pending_at_publication', '=', true)
    .where(SETTLED_OR_ORPHANED)
    .returning(['w.index', 'w.status', 'w.segment_count'])
    .execute();
}

/**
 * Writes the meeting's counts of untranscribed windows as they now stand and, when `revise`, a new
 * transcript revision (newTranscriptRevision). Returns the transcript's revision.
 */
export async function saveLateWindowCounts(trx: Tx, meetingId: string, revise: boolean): Promise<number> {
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
  return updated.transcript_revision;
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
 * Meetings with a marked window that has settled or has no job left, a few in random order (one
 * meeting that keeps failing does not hold back the others).
 */
export async function meetingsWithSettledLateWindows(db: Executor, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('windows as w')
    .select('w.meeting_id')
    .where('w.pending_at_publication', '=', true)
    .where(SETTLED_OR_ORPHANED)
    .groupBy('w.meeting_id')
    .orderBy(sql`random()`)
    .limit(limit)
    .execute();
  return rows.map((r) => r.meeting_id);
}
