import { closedTimeline } from '../domain/timeline.ts';
import { sql } from 'kysely';
import type { Executor } from '../db/schema.ts';
import { MeetingSource, WindowStatus } from '../domain/status.ts';

/**
 * The rows a repair of late audio reads (src/meetings/repair-plan.ts makes the plan from them):
 * arrived gaps, the WebM pieces read without them, the chunks after a closed timeline's cut and the
 * windows around each stretch.
 */

/**
 * Work for the repair job: chunks that arrived for reserved stretches, audio after the cut of a
 * closed timeline, or chunks stored on a closed timeline and not placed yet (WebM pieces to read).
 */
export async function hasRepairWork(db: Executor, meetingId: string): Promise<boolean> {
  const arrived = await db
    .selectFrom('timeline_gaps')
    .select('id')
    .where('meeting_id', '=', meetingId)
    .where('arrived_at', 'is not', null)
    .limit(1)
    .executeTakeFirst();
  if (arrived) return true;
  const m = await db.selectFrom('meetings').selectAll().where('id', '=', meetingId).executeTakeFirst();
  if (!m || m.source !== MeetingSource.live || !closedTimeline(m)) return false;
  if (Number(m.placed_samples) > Number(m.cut_samples)) return true;
  const waiting = await db
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .where('start_samples', 'is', null)
    .limit(1)
    .executeTakeFirst();
  return waiting !== undefined;
}

/** Gaps whose chunk arrived, in sequence order, up to `limit`; with `gapIds`, only those. */
export async function arrivedGaps(db: Executor, meetingId: string, gapIds: string[] | null, limit: number) {
  let q = db
    .selectFrom('timeline_gaps as g')
    .innerJoin('chunks as c', (j) =>
      j.onRef('c.meeting_id', '=', 'g.meeting_id').onRef('c.seq', '=', 'g.first_seq'),
    )
    .select([
      'g.id',
      'g.first_seq',
      'g.start_samples',
      'g.samples as reserved',
      'c.samples',
      'c.format',
      'c.energy',
    ])
    .where('g.meeting_id', '=', meetingId)
    .where('g.arrived_at', 'is not', null)
    .orderBy('g.first_seq')
    .limit(limit);
  if (gapIds) q = gapIds.length > 0 ? q.where('g.id', 'in', gapIds) : q.where(sql<boolean>`false`);
  return q.execute();
}

/** A WebM piece's placement, how it was read and whether its bytes are gone; undefined if it has not arrived. */
export async function pieceReading(db: Executor, meetingId: string, seq: number) {
  return db
    .selectFrom('chunks as c')
    .innerJoin('blobs as b', 'b.id', 'c.blob_id')
    .select(['c.start_samples', 'c.samples', 'c.decoded_after_gap', 'b.deleted_at'])
    .where('c.meeting_id', '=', meetingId)
    .where('c.seq', '=', seq)
    .executeTakeFirst();
}

/** Sequence numbers of the chunks placed at or after `from`, in order. */
export async function seqsPlacedFrom(db: Executor, meetingId: string, from: number): Promise<number[]> {
  const rows = await db
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .where('start_samples', '>=', from)
    .orderBy('seq')
    .execute();
  return rows.map((c) => c.seq);
}

/**
 * The live windows (not superseded) that could touch [from, to]: the last one starting before
 * `from` and every one starting inside; the caller drops those that end before `from`.
 */
export async function windowsNear(db: Executor, meetingId: string, from: number, to: number) {
  const base = () =>
    db
      .selectFrom('windows')
      .select(['id', 'start_samples', 'end_samples', 'status'])
      .where('meeting_id', '=', meetingId)
      .where('status', '<>', WindowStatus.superseded)
      .where('start_samples', 'is not', null);
  return [
    ...(await base().where('start_samples', '<', from).orderBy('start_samples', 'desc').limit(1).execute()),
    ...(await base().where('start_samples', '>=', from).where('start_samples', '<=', to).execute()),
  ];
}

/** The stored object holding a chunk's original bytes, or null when it has none or it was deleted. */
export async function chunkObjectKey(db: Executor, meetingId: string, seq: number): Promise<string | null> {
  const row = await db
    .selectFrom('chunks as c')
    .innerJoin('blobs as b', 'b.id', 'c.blob_id')
    .select(['b.object_key', 'b.deleted_at'])
    .where('c.meeting_id', '=', meetingId)
    .where('c.seq', '=', seq)
    .executeTakeFirst();
  return row && !row.deleted_at ? row.object_key : null;
}
