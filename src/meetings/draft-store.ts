import { sql } from 'kysely';
import type { Executor, Tx } from '../db/schema.ts';

/** The rows behind draft captions (L22; src/meetings/drafts.ts has the rules). */

/** The transport task of a draft: one delivery, no job row of ours (drafts are best effort). */
export const DRAFT_TASK = 'draft-chunk';

/** In the transaction that placed chunk `seq`: its draft task, stamped with the database's clock. */
export async function enqueueDraftTask(trx: Tx, meetingId: string, seq: number): Promise<void> {
  await sql`select verbatim_enqueue(
      ${DRAFT_TASK}::text,
      json_build_object('meetingId', ${meetingId}::text, 'seq', ${seq}::int, 'placedAt', now()),
      now(),
      1,
      null::text
    )`.execute(trx);
}

/**
 * How long ago (by the database's clock) the chunk was placed, and whether a window job of the
 * meeting has been due for longer than `lagMs` (its finals wait for a worker).
 */
export async function draftLag(
  db: Executor,
  meetingId: string,
  placedAt: string,
  lagMs: number,
): Promise<{ ms: number; finalsWaiting: boolean }> {
  const lag = await sql<{ ms: number; finalsWaiting: boolean }>`
    select extract(epoch from now() - ${placedAt}::timestamptz) * 1000 as ms,
           exists (select 1 from jobs
                    where meeting_id = ${meetingId}::uuid and kind = 'transcribe-window'
                      and status = 'pending'
                      and run_after < now() - ${lagMs} * interval '1 millisecond') as "finalsWaiting"`.execute(
    db,
  );
  const row = lag.rows[0]!;
  return { ms: Number(row.ms), finalsWaiting: row.finalsWaiting };
}

/** A draft given up for lag, counted on its meeting. */
export async function countShedDraft(db: Executor, meetingId: string): Promise<void> {
  await db
    .updateTable('meetings')
    .set({ drafts_shed: sql<number>`drafts_shed + 1` })
    .where('id', '=', meetingId)
    .execute();
}

/** The placed chunk a draft reads, and its meeting's language; undefined when either is gone. */
export async function draftSubject(db: Executor, meetingId: string, seq: number) {
  const chunk = await db
    .selectFrom('chunks')
    .innerJoin('meetings', 'meetings.id', 'chunks.meeting_id')
    .select(['chunks.workspace_id', 'chunks.start_samples', 'chunks.samples', 'meetings.language'])
    .where('chunks.meeting_id', '=', meetingId)
    .where('chunks.seq', '=', seq)
    .executeTakeFirst();
  return chunk;
}

/** Stores a draft; false when the chunk already has one. */
export async function insertDraft(
  trx: Tx,
  draft: {
    workspaceId: string;
    meetingId: string;
    seq: number;
    startMs: number;
    endMs: number;
    text: string;
  },
): Promise<boolean> {
  const row = await trx
    .insertInto('drafts')
    .values({
      workspace_id: draft.workspaceId,
      meeting_id: draft.meetingId,
      chunk_seq: draft.seq,
      start_ms: draft.startMs,
      end_ms: draft.endMs,
      text: draft.text,
    })
    .onConflict((oc) => oc.columns(['meeting_id', 'chunk_seq']).doNothing())
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Whether a transcribed window already holds the middle of this stretch. With `lock`, the windows
 * found are held shared until the transaction ends, so a window commit racing it comes after.
 */
export async function coveredByFinal(
  db: Executor,
  meetingId: string,
  startMs: number,
  endMs: number,
  lock = false,
): Promise<boolean> {
  const middle = Math.floor((startMs + endMs) / 2);
  const query = db
    .selectFrom('windows')
    .select('status')
    .where('meeting_id', '=', meetingId)
    .where('status', '<>', 'superseded')
    .where('start_ms', '<=', middle)
    .where('end_ms', '>', middle);
  const rows = await (lock ? query.forShare() : query).execute();
  return rows.some((r) => r.status === 'transcribed');
}
