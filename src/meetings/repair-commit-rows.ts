import { sql } from 'kysely';
import type { MeetingRow, Tx, WindowRow, WindowsTable } from '../db/schema.ts';
import type { Insertable } from 'kysely';
import { WindowStatus, WindowTransitions } from '../domain/status.ts';
import { SAMPLE_RATE, samplesToMs, type PlannedWindow } from '../domain/timeline.ts';
import { newTranscriptRevision } from './late-window-store.ts';
import type { SegmentRow } from './window-rows.ts';

/**
 * The writes of a repair's commit (src/meetings/repair-commit.ts decides them): windows replaced,
 * the timeline shifted, chunks placed, the new windows with their segments, the cut.
 */

/** Samples per millisecond, for positions turned into milliseconds in SQL. */
const PER_MS = SAMPLE_RATE / 1000;

export async function windowsById(trx: Tx, ids: string[]): Promise<WindowRow[]> {
  if (ids.length === 0) return [];
  return trx.selectFrom('windows').selectAll().where('id', 'in', ids).execute();
}

/** L19: a window the repair re-cut leaves the live timeline. */
export async function supersedeWindow(trx: Tx, windowId: string): Promise<void> {
  const t = WindowTransitions.supersedeWindow;
  await trx
    .updateTable('windows')
    .set({ status: t.to, superseded_at: sql<Date>`now()` })
    .where('id', '=', windowId)
    .where('status', 'in', t.from)
    .execute();
}

/** The decoded copy a chunk had before a new decode replaces it. */
export async function chunkPcmBlob(trx: Tx, meetingId: string, seq: number): Promise<string | null> {
  const row = await trx
    .selectFrom('chunks')
    .select('pcm_blob_id')
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .executeTakeFirstOrThrow();
  return row.pcm_blob_id;
}

/** A chain's chunk takes its new place; the gap it filled, if any, goes. */
export async function placeRepairedChunk(
  trx: Tx,
  meetingId: string,
  seq: number,
  start: number,
  gapId: string | null,
): Promise<void> {
  await trx
    .updateTable('chunks')
    .set({ start_samples: start })
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .execute();
  if (gapId) await trx.deleteFrom('timeline_gaps').where('id', '=', gapId).execute();
}

/** A repair's new window, in the status decided for it. */
export async function insertRepairWindow(
  trx: Tx,
  row: Omit<Insertable<WindowsTable>, 'transcribed_at' | 'missing_at' | 'failed_at'> & {
    status: WindowStatus;
  },
): Promise<void> {
  await trx
    .insertInto('windows')
    .values({
      ...row,
      transcribed_at: row.status === WindowStatus.transcribed ? sql<Date>`now()` : null,
      missing_at: row.status === WindowStatus.missing ? sql<Date>`now()` : null,
      failed_at: row.status === WindowStatus.failed ? sql<Date>`now()` : null,
    })
    .execute();
}

/** A new window's segments, from times relative to its start. Returns how many. */
export async function insertWindowSegments(
  trx: Tx,
  window: { id: string; workspace_id: string; meeting_id: string; start_ms: number },
  segments: SegmentRow[],
): Promise<number> {
  const rows = segments.map((seg) => ({
    workspace_id: window.workspace_id,
    meeting_id: window.meeting_id,
    window_id: window.id,
    seq: seg.seq,
    start_ms: window.start_ms + seg.start_ms,
    end_ms: window.start_ms + seg.end_ms,
    text: seg.text,
    speaker_key: seg.speaker_key ?? null,
    words: seg.words ? JSON.stringify(seg.words) : null,
  }));
  if (rows.length > 0) await trx.insertInto('segments').values(rows).execute();
  return rows.length;
}

/**
 * The segments of a replaced window inside a kept piece move to the piece's new window, by the
 * piece's own shift, kept inside it. Returns how many.
 */
export async function moveKeptSegments(
  trx: Tx,
  window: { id: string; start_ms: number; end_ms: number },
  keep: NonNullable<PlannedWindow['keep']>,
): Promise<number> {
  const fromMs = samplesToMs(keep.from);
  const toMs = samplesToMs(keep.to);
  const shiftMs = window.start_ms - fromMs;
  const moved = await trx
    .updateTable('segments')
    .set({
      window_id: window.id,
      start_ms: sql<number>`greatest(${window.start_ms}::int, least(${window.end_ms}::int, start_ms + ${shiftMs}::int))`,
      end_ms: sql<number>`least(${window.end_ms}::int, greatest(${window.start_ms}::int, end_ms + ${shiftMs}::int))`,
    })
    .where('window_id', '=', keep.windowId)
    .where((eb) => {
      const inPiece = eb.and([eb('start_ms', '>=', fromMs), eb('start_ms', '<', toMs)]);
      if (keep.straddleFrom === null) return inPiece;
      // A segment from the spliced stretch running on into this piece keeps its words here.
      return eb.or([
        inPiece,
        eb.and([
          eb('start_ms', '>=', samplesToMs(keep.straddleFrom)),
          eb('start_ms', '<', fromMs),
          eb('end_ms', '>', fromMs),
        ]),
      ]);
    })
    .executeTakeFirst();
  return Number(moved.numUpdatedRows);
}

export async function setSegmentCount(trx: Tx, windowId: string, count: number): Promise<void> {
  await trx.updateTable('windows').set({ segment_count: count }).where('id', '=', windowId).execute();
}

/** A replaced window's segments go. Returns how many. */
export async function dropSegments(trx: Tx, windowId: string): Promise<number> {
  const dropped = await trx.deleteFrom('segments').where('window_id', '=', windowId).executeTakeFirst();
  return Number(dropped.numDeletedRows);
}

/** The meeting's cut: `cut`, or when `atLeast` the greater of it and the cut as it stands. */
export async function saveRepairCut(
  trx: Tx,
  meetingId: string,
  decision: { cut: number; atLeast: boolean },
): Promise<void> {
  await sql`update meetings set cut_samples = case when ${!decision.atLeast} then ${decision.cut}::bigint
              else greatest(cut_samples, ${decision.cut}::bigint) end
             where id = ${meetingId}::uuid`.execute(trx);
}

/**
 * The repair committed: its time, no repair failure, and, for a published transcript, a new
 * revision with its minutes to be written again (L19). Returns the meeting as it now is.
 */
export async function markRepairCommitted(
  trx: Tx,
  meetingId: string,
  published: boolean,
): Promise<MeetingRow> {
  return trx
    .updateTable('meetings')
    .set({
      last_repair_at: sql<Date>`now()`,
      repair_failure_code: null,
      repair_failure_message: null,
      ...(published ? newTranscriptRevision() : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Everything after a chain moves by `delta`: chunks and gaps after its last sequence number (by
 * seq, so a piece that read to nothing at the chain's end moves with what follows it), live
 * windows from `at` on, with their segments, and the cut and the frontier's end.
 */
export async function shiftAfter(
  trx: Tx,
  meetingId: string,
  afterSeq: number,
  at: number,
  delta: number,
): Promise<void> {
  await sql`update chunks set start_samples = start_samples + ${delta}::bigint
             where meeting_id = ${meetingId}::uuid and seq > ${afterSeq}::int and start_samples is not null`.execute(
    trx,
  );
  await sql`update timeline_gaps set start_samples = start_samples + ${delta}::bigint
             where meeting_id = ${meetingId}::uuid and first_seq > ${afterSeq}::int`.execute(trx);
  // Windows first (a window's commit in flight is waited for), then their segments, by each
  // window's own move in milliseconds, in a statement that sees that commit.
  const moved = await sql<{ id: string; delta_ms: number; start_ms: number; end_ms: number }>`
    with w as (
      update windows set start_samples = start_samples + ${delta}::bigint, end_samples = end_samples + ${delta}::bigint,
        start_ms = round((start_samples + ${delta}::bigint) / ${PER_MS}::numeric), end_ms = round((end_samples + ${delta}::bigint) / ${PER_MS}::numeric)
       where meeting_id = ${meetingId}::uuid and status <> 'superseded' and start_samples >= ${at}::bigint
      returning id, start_ms, end_ms, start_samples
    )
    select id, start_ms, end_ms, (start_ms - round((start_samples - ${delta}::bigint) / ${PER_MS}::numeric))::int as delta_ms from w`.execute(
    trx,
  );
  // Each segment moves with its window, and stays inside it (rounding to milliseconds may differ
  // by one between a window's start and end).
  if (moved.rows.length > 0) {
    await sql`update segments s
                 set start_ms = least(greatest(s.start_ms + m.delta_ms, m.start_ms), m.end_ms),
                     end_ms = least(greatest(s.end_ms + m.delta_ms, m.start_ms), m.end_ms)
                from jsonb_to_recordset(${JSON.stringify(moved.rows)}::jsonb)
                     as m(id uuid, delta_ms int, start_ms int, end_ms int)
               where s.window_id = m.id`.execute(trx);
  }
  await sql`update meetings set
      cut_samples = case when cut_samples >= ${at}::bigint then cut_samples + ${delta}::bigint else cut_samples end,
      placed_samples = case when placed_samples >= ${at}::bigint then placed_samples + ${delta}::bigint else placed_samples end
    where id = ${meetingId}::uuid`.execute(trx);
}
