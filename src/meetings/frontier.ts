import { createTranscribeJob } from './transcribe-job.ts';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { JobKind, MeetingSource } from '../domain/status.ts';
import {
  SAMPLE_RATE,
  cutStretch,
  frontierStep,
  splitForRecognisers,
  type CutOptions,
  type CutWindow,
  type Span,
  closedTimeline,
  cutOptions,
  nominalChunkSamples,
} from '../domain/timeline.ts';
import { compensate } from '../storage/objects.ts';
import type { MeetingDeps } from './deps.ts';
import { draftsWanted, enqueueDraft } from './drafts.ts';
import { applyDecoded, basisOf, decodePieces, readPieces, stagedOf, type DecodedPiece } from './live-webm.ts';
import {
  chunkAt,
  closeTimeline,
  firstStoredAfter,
  highestSeq,
  msSince,
  placeChunk,
  saveCut,
  saveFrontier,
  undecodedSeqs,
  insertGap,
  insertLiveWindows,
  loadStretch,
} from './timeline-rows.ts';
import { createJob } from '../jobs/catalog.ts';

/**
 * The frontier of a live meeting's timeline (docs/live-meetings.md): placing chunks as the ones
 * before them are placed, reserving the ones that do not come in time, and cutting the windows the
 * placed audio fills. The rules are src/domain/timeline.ts; this is their transactions.
 */

/** WebM pieces read in one go when the frontier reaches pieces not yet decoded. */
const DECODE_BATCH = 20;

/**
 * L19: one repair job per meeting at a time does all its repairs; it looks for more work before it
 * finishes, under the same meeting lock as this check, so new work is never left without a job.
 */
export async function ensureRepairJob(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  actor: string,
): Promise<void> {
  if (await deps.jobs.hasActiveJob(trx, meeting.id, JobKind.repairTimeline)) return;
  await createJob(
    deps,
    trx,
    JobKind.repairTimeline,
    { meetingId: meeting.id },
    { workspaceId: meeting.workspace_id },
    actor,
  );
}

export type TxRunner = <T>(fn: (trx: Tx) => Promise<T>) => Promise<T>;

/**
 * Moves the frontier as far as it can go and, on an open timeline, cuts every window slot the
 * placed audio fills (with `final`, the close-out: everything, the last stretch without jobs, and
 * the timeline is closed). On a closed timeline new audio is left to the repair job. Each pass is
 * one short transaction under the meeting lock with no blob I/O; WebM pieces the frontier reaches
 * are decoded between passes, outside it.
 */
export async function advanceTimeline(
  deps: MeetingDeps,
  meetingId: string,
  actor: string,
  opts: { final: boolean; runTx?: TxRunner; onlyClosed?: boolean; untilDone?: boolean; signal?: AbortSignal },
): Promise<MeetingRow | null> {
  const runTx: TxRunner = opts.runTx ?? ((fn) => deps.db.transaction().execute(fn));
  if (opts.onlyClosed) {
    const m = await deps.meetings.findById(meetingId);
    if (!m || m.source !== MeetingSource.live || !closedTimeline(m)) return null;
  }
  let decoded = new Map<number, DecodedPiece>();
  for (let pass = 0; ; pass++) {
    opts.signal?.throwIfAborted();
    let result: FrontierResult;
    try {
      result = await runTx((trx) => advanceInTx(deps, trx, meetingId, actor, opts.final, decoded));
    } catch (err) {
      await compensate(deps, stagedOf([...decoded.values()]), err);
      throw err;
    }
    const unused = [...decoded.values()].filter((d) => !result.applied.has(d.seq));
    if (unused.length > 0) await compensate(deps, stagedOf(unused), new Error('decoded piece not applied'));
    // Another request may be decoding the same pieces; the close-out and the repair job keep going
    // until it is done, a request gives up after a few passes (the repair job takes over).
    if (!result.needs || (!opts.final && !opts.untilDone && pass >= 3)) return result.meeting;
    const basis = await basisOf(deps.db, meetingId, result.needs.seq);
    const pieces = await readPieces(deps, meetingId, result.needs.seqs);
    decoded = new Map((await decodePieces(deps, result.meeting, basis, pieces)).map((d) => [d.seq, d]));
  }
}

/** One pass of advanceTimeline, in the caller's transaction. */
export async function advanceInTx(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
  final: boolean,
  decoded: Map<number, DecodedPiece> = new Map(),
): Promise<FrontierResult> {
  const locked = await deps.meetings.lock(trx, meetingId);
  const result = await advanceFrontier(deps, trx, locked, final, decoded);
  let meeting = result.meeting;
  if (!closedTimeline(meeting)) {
    meeting = await cutOpenTimeline(deps, trx, meeting, actor, final);
    if (final && !result.needs) {
      meeting = await closeTimeline(trx, meetingId);
    }
  } else if (Number(meeting.placed_samples) > Number(meeting.cut_samples) || result.needs) {
    // New audio after the close-out (or WebM pieces still to decode): the repair job takes it.
    await ensureRepairJob(deps, trx, meeting, actor);
  }
  return { ...result, meeting };
}

interface FrontierResult {
  meeting: MeetingRow;
  /** WebM pieces at the frontier that must be decoded before it can move on. */
  needs: { seq: number; seqs: number[] } | null;
  applied: Set<number>;
}

/**
 * L19: places every chunk it can: the one at the frontier when stored (and decoded), and a missing
 * one as a reserved gap once the patience ran out, or at close-out (`final`), or after the meeting
 * ended (a closed timeline reserves at once: nothing more is coming in order).
 */
async function advanceFrontier(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  final: boolean,
  decoded: Map<number, DecodedPiece>,
): Promise<FrontierResult> {
  let next = meeting.next_seq;
  let placed = Number(meeting.placed_samples);
  const applied = new Set<number>();
  let needs: FrontierResult['needs'] = null;
  const closing = final || closedTimeline(meeting);
  const waitedMs = await msSince(trx, meeting.frontier_blocked_at);
  let blockedAt = meeting.frontier_blocked_at;
  const nominal = nominalChunkSamples(deps.config.chunkMs);
  let nextStored: number | null = null;
  for (;;) {
    const row = await chunkAt(trx, meeting.id, next);
    nextStored = row ? null : await firstStoredAfter(trx, meeting.id, next);
    let state: 'ready' | 'undecoded' | 'absent' = row
      ? row.samples === null
        ? 'undecoded'
        : 'ready'
      : 'absent';
    if (state === 'undecoded') {
      const piece = decoded.get(next);
      if (piece && piece.basis === (await basisOf(trx, meeting.id, next)).key) {
        await applyDecoded(trx, meeting, piece);
        applied.add(next);
        row!.samples = piece.samples;
        state = 'ready';
      } else {
        const seqs = await undecodedSeqs(trx, meeting.id, next, next + DECODE_BATCH);
        const run: number[] = [];
        for (const s of seqs) if (s === next + run.length) run.push(s);
        needs = { seq: next, seqs: run };
        break;
      }
    }
    const expectedEnd =
      meeting.declared_chunks ??
      (closing && state === 'absent' ? (await highestSeq(trx, meeting.id)) + 1 : null);
    const step = frontierStep({
      nextSeq: next,
      atFrontier: state,
      nextStored,
      expectedEnd,
      final: closing,
      waitedMs: next === meeting.next_seq && blockedAt ? (waitedMs ?? 0) : null,
      patienceMs: deps.config.gapPatienceMs,
    });
    if (step.kind === 'wait') break;
    if (step.kind === 'place') {
      await placeChunk(trx, meeting.id, next, placed);
      if (!closing && draftsWanted(meeting.status)) await enqueueDraft(deps, trx, meeting.id, next);
      placed += row!.samples ?? 0;
      next++;
    } else {
      const samples = (step.endSeq - next) * nominal;
      await insertGap(trx, meeting, { firstSeq: next, endSeq: step.endSeq, start: placed, samples }, false);
      placed += samples;
      next = step.endSeq;
    }
  }
  // The patience clock runs while a later chunk waits for the one at the frontier.
  if (next !== meeting.next_seq) blockedAt = null;
  const blocked = needs === null && nextStored !== null;
  const updated = await saveFrontier(trx, meeting.id, {
    nextSeq: next,
    placedSamples: placed,
    blocked: blocked ? (blockedAt ?? 'now') : null,
  });
  return { meeting: updated, needs, applied };
}

/**
 * L2/L18: cuts the placed audio after the cut into windows, each slot as it fills (with `final`,
 * all of it, the last stretch as windows the close-out transcribes itself).
 */
async function cutOpenTimeline(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  actor: string,
  final: boolean,
): Promise<MeetingRow> {
  const cut = Number(meeting.cut_samples);
  const placed = Number(meeting.placed_samples);
  if (placed <= cut) return meeting;
  const options = cutOptions(meeting.window_ms, deps.config.boundarySearchMs);
  if (!final && placed - cut < options.slot) return meeting;
  const { spans } = await loadStretch(trx, meeting.id, cut, placed);
  const { windows: cuts, cut: next } = cutStretch(spans, cut, placed, options, final);
  // L24: the close-out transcribes its last stretch itself, as soon as End; a stretch that would
  // keep one recogniser busy is shared between as many as the worker runs.
  const windows = final ? shareLastStretch(deps, spans, cuts, options) : cuts;
  const pending = await insertLiveWindows(trx, meeting, windows, actor);
  // The close-out transcribes the last stretch itself; every other window gets its job.
  if (!final) {
    for (const w of pending) {
      await createTranscribeJob(deps, trx, meeting.workspace_id, meeting.id, w.id, w.index, actor);
    }
  }
  if (next === cut) return meeting;
  return saveCut(trx, meeting.id, next);
}

/** A last stretch piece shorter than this is not worth another recogniser's start (samples). */
const MIN_SHARED_PIECE = 8 * SAMPLE_RATE;

/** The close-out's windows, split so that they are at least as many as the worker's recognisers. */
function shareLastStretch(
  deps: MeetingDeps,
  spans: Span[],
  cuts: CutWindow[],
  options: CutOptions,
): CutWindow[] {
  const recognisers = deps.config.concurrency.transcription;
  const withAudio = cuts.filter((w) => w.audio).length;
  if (withAudio === 0 || withAudio >= recognisers) return cuts;
  const parts = Math.ceil(recognisers / withAudio);
  return cuts.flatMap((w) => splitForRecognisers(spans, w, options, parts, MIN_SHARED_PIECE));
}
