import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Executor, MeetingRow, Tx, WindowRow } from '../db/schema.ts';
import { JobKind, JobStatus, WindowStatus } from '../domain/status.ts';
import { decodeEnergy, samplesToMs, type CutWindow, type GapRun, type Span } from '../domain/timeline.ts';
import { recordAudit } from '../jobs/audit-store.ts';

/**
 * The rows behind a live meeting's timeline (src/domain/timeline.ts has the rules): placed chunks
 * with their positions, reserved gaps, and windows that read their audio from the chunks.
 */

/** A placed chunk's audio: where it sits and which stored object holds its 16 kHz samples. */
export interface ChunkSource {
  seq: number;
  start: number;
  length: number;
  /** The WAV holding the samples (the chunk itself, or a WebM piece's decoded copy); null if none. */
  objectKey: string | null;
  /** The chunk had audio, but it was deleted (the meeting ended). */
  deleted: boolean;
}

export interface TimelineStretch {
  spans: Span[];
  sources: ChunkSource[];
}

/**
 * The placed chunks and reserved gaps over [from, to): the one that starts at or before `from`,
 * and those starting inside. Index range reads, so the cost follows the stretch, not the meeting.
 */
export async function loadStretch(
  db: Executor,
  meetingId: string,
  from: number,
  to: number,
): Promise<TimelineStretch> {
  const chunkColumns = [
    'c.seq',
    'c.start_samples',
    'c.samples',
    'c.energy',
    'c.undecodable',
    'c.format',
    sql<string | null>`case when c.format = 'webm' then p.object_key else w.object_key end`.as('object_key'),
    sql<boolean>`case when c.format = 'webm' then p.deleted_at is null else w.deleted_at is null end`.as(
      'alive',
    ),
  ] as const;
  const chunkBase = () =>
    db
      .selectFrom('chunks as c')
      .leftJoin('blobs as w', 'w.id', 'c.blob_id')
      .leftJoin('blobs as p', 'p.id', 'c.pcm_blob_id')
      .select(chunkColumns)
      .where('c.meeting_id', '=', meetingId)
      .where('c.start_samples', 'is not', null);
  const [before, inside, gapBefore, gapsInside] = await Promise.all([
    chunkBase()
      .where('c.start_samples', '<=', from)
      .orderBy('c.start_samples', 'desc')
      .orderBy('c.seq', 'desc')
      .limit(1)
      .execute(),
    chunkBase()
      .where('c.start_samples', '>', from)
      .where('c.start_samples', '<', to)
      .orderBy('c.start_samples')
      .execute(),
    db
      .selectFrom('timeline_gaps')
      .select(['first_seq', 'start_samples', 'samples'])
      .where('meeting_id', '=', meetingId)
      .where('start_samples', '<=', from)
      .orderBy('start_samples', 'desc')
      .limit(1)
      .execute(),
    db
      .selectFrom('timeline_gaps')
      .select(['first_seq', 'start_samples', 'samples'])
      .where('meeting_id', '=', meetingId)
      .where('start_samples', '>', from)
      .where('start_samples', '<', to)
      .execute(),
  ]);
  const spans: Span[] = [];
  const sources: ChunkSource[] = [];
  for (const c of [...before, ...inside]) {
    const start = Number(c.start_samples);
    const length = c.samples ?? 0;
    if (start + length <= from && start < from) continue;
    const heard = length > 0 && !c.undecodable && c.object_key !== null;
    const audio = heard && c.alive;
    spans.push({
      start,
      length,
      audio,
      energy: audio ? decodeEnergy(c.energy) : null,
      ref: { kind: 'chunk', seq: c.seq },
    });
    sources.push({
      seq: c.seq,
      start,
      length,
      objectKey: audio ? c.object_key : null,
      deleted: heard && !c.alive,
    });
  }
  for (const g of [...gapBefore, ...gapsInside]) {
    spans.push({
      start: Number(g.start_samples),
      length: Number(g.samples),
      audio: false,
      energy: null,
      ref: { kind: 'gap', seq: g.first_seq },
    });
  }
  spans.sort((a, b) => a.start - b.start);
  sources.sort((a, b) => a.start - b.start);
  return { spans, sources };
}

/** The next free window index of a meeting (indexes identify windows; positions order them). */
export async function nextWindowIndex(trx: Executor, meetingId: string): Promise<number> {
  const row = await trx
    .selectFrom('windows')
    .select(sql<number | null>`max(index)`.as('max'))
    .where('meeting_id', '=', meetingId)
    .executeTakeFirstOrThrow();
  return (row.max ?? -1) + 1;
}

/**
 * Records cut windows of a live meeting: a window with audio is pending, one with none settles as
 * missing at once (audited). Returns the pending ones, for the caller to give them jobs.
 */
export async function insertLiveWindows(
  trx: Tx,
  meeting: MeetingRow,
  windows: CutWindow[],
  actor: string,
): Promise<Array<{ id: string; index: number }>> {
  if (windows.length === 0) return [];
  let index = await nextWindowIndex(trx, meeting.id);
  const pending: Array<{ id: string; index: number }> = [];
  for (const w of windows) {
    const id = randomUUID();
    const status = w.audio ? WindowStatus.pending : WindowStatus.missing;
    await trx
      .insertInto('windows')
      .values({
        id,
        workspace_id: meeting.workspace_id,
        meeting_id: meeting.id,
        index,
        start_ms: samplesToMs(w.start),
        end_ms: samplesToMs(w.end),
        start_samples: w.start,
        end_samples: w.end,
        blob_id: null,
        status,
        missing_at: w.audio ? null : sql<Date>`now()`,
      })
      .execute();
    if (!w.audio) {
      await recordAudit(trx, {
        workspaceId: meeting.workspace_id,
        subjectType: 'window',
        subjectId: id,
        from: null,
        to: WindowStatus.missing,
        actor,
        reason: 'no audio arrived for this stretch',
      });
    } else {
      pending.push({ id, index });
    }
    index++;
  }
  return pending;
}

/** Records a reserved run; one not arrived counts in the meeting's missing seqs. */
export async function insertGap(trx: Tx, meeting: MeetingRow, run: GapRun, arrived: boolean): Promise<void> {
  await trx
    .insertInto('timeline_gaps')
    .values({
      id: randomUUID(),
      workspace_id: meeting.workspace_id,
      meeting_id: meeting.id,
      first_seq: run.firstSeq,
      end_seq: run.endSeq,
      start_samples: run.start,
      samples: run.samples,
      arrived_at: arrived ? sql<Date>`now()` : null,
    })
    .execute();
  if (!arrived) {
    await trx
      .updateTable('meetings')
      .set({ missing_count: sql<number>`missing_count + ${run.endSeq - run.firstSeq}::int` })
      .where('id', '=', meeting.id)
      .execute();
  }
}

/** The reserved run holding `seq`, locked, or undefined. */
export async function gapHolding(trx: Tx, meetingId: string, seq: number) {
  return trx
    .selectFrom('timeline_gaps')
    .selectAll()
    .where('meeting_id', '=', meetingId)
    .where('first_seq', '<=', seq)
    .orderBy('first_seq', 'desc')
    .limit(1)
    .forUpdate()
    .executeTakeFirst()
    .then((g) => (g && g.end_seq > seq ? g : undefined));
}

/**
 * Sequence numbers still reserved as missing (not arrived), at most `limit` of them (reading at
 * most that many runs), and how many there are (kept on the meeting row).
 */
export async function missingChunks(
  db: Executor,
  meeting: MeetingRow,
  limit = 1000,
): Promise<{ seqs: number[]; count: number }> {
  if (meeting.missing_count === 0) return { seqs: [], count: 0 };
  const runs = await db
    .selectFrom('timeline_gaps')
    .select(['first_seq', 'end_seq'])
    .where('meeting_id', '=', meeting.id)
    .where('arrived_at', 'is', null)
    .orderBy('first_seq')
    .limit(limit)
    .execute();
  const seqs: number[] = [];
  for (const r of runs) {
    for (let s = r.first_seq; s < r.end_seq && seqs.length < limit; s++) seqs.push(s);
  }
  return { seqs, count: meeting.missing_count };
}

/** The highest seq stored for a meeting (-1 with none): one read of the (meeting, seq) index. */
export async function highestSeq(db: Executor, meetingId: string): Promise<number> {
  const row = await db
    .selectFrom('chunks')
    .select(sql<number | null>`max(seq)`.as('max'))
    .where('meeting_id', '=', meetingId)
    .executeTakeFirstOrThrow();
  return row.max ?? -1;
}

/**
 * A live window's row and the chunks under it, read in one snapshot: a repair may move both at
 * once, never one without the other.
 */
export async function loadWindowStretch(
  db: Db,
  windowId: string,
): Promise<{ window: WindowRow; sources: ChunkSource[] }> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const row = await trx
        .selectFrom('windows')
        .selectAll()
        .where('id', '=', windowId)
        .executeTakeFirstOrThrow();
      const stretch = await loadStretch(
        trx,
        row.meeting_id,
        Number(row.start_samples),
        Number(row.end_samples),
      );
      return { window: row, sources: stretch.sources };
    });
}

/**
 * What src/meetings/live-state.ts counts of a live meeting, by index reads only: chunks waiting
 * ahead of a missing one, gaps whose chunk arrived late, chunks past a closed timeline's cut, and
 * whether a timeline repair is queued or running.
 */
export async function liveStateCounts(
  db: Executor,
  m: MeetingRow,
  closed: boolean,
): Promise<{ waiting: number; arrived: number; tail: number; repairing: boolean }> {
  const row = await sql<{ waiting: number; arrived: number; tail: number; repairing: boolean }>`
    select
      (select count(*) from chunks c where c.meeting_id = ${m.id}::uuid and c.start_samples is null
          and c.seq >= ${m.next_seq}::int)::int as waiting,
      (select count(*) from timeline_gaps g where g.meeting_id = ${m.id}::uuid and g.arrived_at is not null)::int as arrived,
      (case when ${closed} then (select count(*) from chunks c where c.meeting_id = ${m.id}::uuid
          and c.start_samples >= ${m.cut_samples}::bigint) else 0 end)::int as tail,
      exists (select 1 from jobs j where j.subject_id = ${m.id}::uuid and j.kind = ${JobKind.repairTimeline}
          and j.status in (${JobStatus.pending}, ${JobStatus.running})) as repairing`.execute(db);
  return row.rows[0]!;
}

/** The chunk stored at `seq`, as the frontier sees it; undefined when it has not arrived. */
export async function chunkAt(trx: Tx, meetingId: string, seq: number) {
  return trx
    .selectFrom('chunks')
    .select(['seq', 'samples', 'format', 'start_samples'])
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .executeTakeFirst();
}

/** The lowest sequence number stored after `seq`, or null when none is. */
export async function firstStoredAfter(trx: Tx, meetingId: string, seq: number): Promise<number | null> {
  const after = await trx
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .where('seq', '>', seq)
    .orderBy('seq')
    .limit(1)
    .executeTakeFirst();
  return after?.seq ?? null;
}

/** Stored WebM pieces in [from, to) not read yet, in order. */
export async function undecodedSeqs(trx: Tx, meetingId: string, from: number, to: number): Promise<number[]> {
  const rows = await trx
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .where('seq', '>=', from)
    .where('seq', '<', to)
    .where('samples', 'is', null)
    .orderBy('seq')
    .execute();
  return rows.map((r) => r.seq);
}

/** Milliseconds since `at` by the database's clock (null for null). */
export async function msSince(trx: Tx, at: Date | null): Promise<number | null> {
  if (at === null) return null;
  const row = await sql<{
    ms: number | null;
  }>`select extract(epoch from now() - ${at}::timestamptz) * 1000 as ms`.execute(trx);
  const ms = row.rows[0]?.ms;
  return ms === null || ms === undefined ? null : Number(ms);
}

/** L19: the chunk takes its place on the timeline. */
export async function placeChunk(trx: Tx, meetingId: string, seq: number, start: number): Promise<void> {
  await trx
    .updateTable('chunks')
    .set({ start_samples: start })
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .execute();
}

/**
 * Where the frontier stopped: the next sequence number, the samples placed, and since when a later
 * chunk has waited for the one at the frontier (`now` starts that clock, null stops it).
 */
export async function saveFrontier(
  trx: Tx,
  meetingId: string,
  frontier: { nextSeq: number; placedSamples: number; blocked: Date | 'now' | null },
): Promise<MeetingRow> {
  return trx
    .updateTable('meetings')
    .set({
      next_seq: frontier.nextSeq,
      placed_samples: frontier.placedSamples,
      frontier_blocked_at: frontier.blocked === 'now' ? sql<Date>`now()` : frontier.blocked,
    })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The windows are cut up to `cut` (samples). */
export async function saveCut(trx: Tx, meetingId: string, cut: number): Promise<MeetingRow> {
  return trx
    .updateTable('meetings')
    .set({ cut_samples: cut })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** L4: the close-out closed the timeline; audio after the cut is the repair job's from now on. */
export async function closeTimeline(trx: Tx, meetingId: string): Promise<MeetingRow> {
  return trx
    .updateTable('meetings')
    .set({ timeline_closed_at: sql<Date>`now()` })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Stores a chunk row; false when the meeting already has one under this seq (a racing twin). */
export async function insertChunk(
  trx: Tx,
  c: {
    workspaceId: string;
    meetingId: string;
    seq: number;
    blobId: string;
    sha256: string;
    samples: number | null;
    energy: Buffer | null;
    format: 'wav' | 'webm';
  },
): Promise<boolean> {
  const inserted = await trx
    .insertInto('chunks')
    .values({
      id: randomUUID(),
      workspace_id: c.workspaceId,
      meeting_id: c.meetingId,
      seq: c.seq,
      blob_id: c.blobId,
      sha256: c.sha256,
      samples: c.samples,
      energy: c.energy,
      format: c.format,
    })
    .onConflict((oc) => oc.columns(['meeting_id', 'seq']).doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted !== undefined;
}

/** The chunk stored under this seq: its digest and whether it is placed; undefined if none. */
export async function storedChunk(db: Executor, meetingId: string, seq: number) {
  return db
    .selectFrom('chunks')
    .select(['sha256', 'start_samples'])
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .executeTakeFirst();
}

/** How many chunks the meeting has stored. */
export async function countChunks(db: Executor, meetingId: string): Promise<number> {
  const row = await db
    .selectFrom('chunks')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('meeting_id', '=', meetingId)
    .executeTakeFirstOrThrow();
  return row.n;
}

/** A reserved run leaves the timeline (to be split) and its numbers leave the meeting's missing count. */
export async function removeGapRun(
  trx: Tx,
  meetingId: string,
  run: { id: string; first_seq: number; end_seq: number },
): Promise<void> {
  await trx
    .updateTable('meetings')
    .set({ missing_count: sql<number>`missing_count - ${run.end_seq - run.first_seq}::int` })
    .where('id', '=', meetingId)
    .execute();
  await trx.deleteFrom('timeline_gaps').where('id', '=', run.id).execute();
}
