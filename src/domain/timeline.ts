/**
 * A live meeting's timeline, as pure rules (docs/live-meetings.md). Positions are 16 kHz samples.
 *
 * The timeline is the meeting's chunks in sequence order, each as long as its audio. A sequence
 * number that has not arrived when the timeline goes on past it is a reserved gap: silence of the
 * nominal chunk length. Windows tile the timeline from 0 to the cut. When a reserved chunk arrives
 * (or a WebM piece is decoded again), its stretch is *resized* to its real length: every position
 * after it moves by the difference, and the windows around it are re-cut and transcribed again.
 */
import { MeetingStatus, WindowStatus } from './status.ts';

export const SAMPLE_RATE = 16_000;
/** Energy is kept per 10 ms step of each chunk. */
export const ENERGY_STEP = 160;

/** One stretch of the timeline: a chunk's audio, or silence (a reserved gap, audio that is gone). */
export interface Span {
  start: number;
  length: number;
  /** True when this stretch has audio that can be read and transcribed. */
  audio: boolean;
  /** Mean square per ENERGY_STEP from `start`; null with `audio` means unknown (treated as level). */
  energy: Float32Array | null;
  /** Which row this stretch comes from: a chunk, or a reserved gap (by its first sequence number). */
  ref?: { kind: 'chunk' | 'gap'; seq: number };
}

export interface CutOptions {
  /** The window slot (samples). */
  slot: number;
  /** How far before a slot's end a boundary may move to a quiet stretch (samples). */
  search: number;
  /** The frame compared by energy (samples), 100 ms. */
  frame: number;
  /** A final stretch shorter than this joins the window before it (samples). */
  minTail: number;
}

/** The cut options of a meeting's timeline: its window slot and the boundary search, in ms. */
export function cutOptions(windowMs: number, boundarySearchMs: number): CutOptions {
  return {
    slot: Math.round((windowMs / 1000) * SAMPLE_RATE),
    search: Math.round((boundarySearchMs / 1000) * SAMPLE_RATE),
    frame: SAMPLE_RATE / 10,
    minTail: SAMPLE_RATE,
  };
}

/** A chunk's nominal length in samples. */
export function nominalChunkSamples(chunkMs: number): number {
  return Math.round((chunkMs / 1000) * SAMPLE_RATE);
}

export function samplesToMs(samples: number): number {
  return Math.round((samples * 1000) / SAMPLE_RATE);
}

/**
 * A meeting that ended, or whose close-out cut the last stretch: new audio is placed as it comes
 * and cut by its repair job, never by the request that stored it.
 */
export function closedTimeline(m: {
  timeline_closed_at: Date | null;
  audio_deleted_at: Date | null;
  status: string;
}): boolean {
  return (
    m.timeline_closed_at !== null ||
    m.audio_deleted_at !== null ||
    m.status === MeetingStatus.complete ||
    m.status === MeetingStatus.failed
  );
}

export interface CutWindow {
  start: number;
  end: number;
  /** False for a window with no audio at all: it settles as missing, with no job. */
  audio: boolean;
}

/** Mean square of each 10 ms step of `samples` (the last step may be shorter). */
export function energyProfile(samples: Int16Array): Float32Array {
  const steps = Math.ceil(samples.length / ENERGY_STEP);
  const out = new Float32Array(steps);
  for (let k = 0; k < steps; k++) {
    const from = k * ENERGY_STEP;
    const to = Math.min(samples.length, from + ENERGY_STEP);
    let sum = 0;
    for (let i = from; i < to; i++) sum += samples[i]! * samples[i]!;
    out[k] = sum / (to - from);
  }
  return out;
}

export function encodeEnergy(energy: Float32Array): Buffer {
  return Buffer.from(energy.buffer, energy.byteOffset, energy.byteLength);
}

export function decodeEnergy(data: Buffer | null): Float32Array | null {
  if (!data || data.length % 4 !== 0) return null;
  const copy = new Uint8Array(data);
  return new Float32Array(copy.buffer, 0, data.length / 4);
}

/**
 * The energy of [from, to): each 10 ms step counts wholly where its middle falls. Silence counts
 * nothing; audio of unknown energy counts as a constant level, so no place in it is preferred.
 */
export function stretchEnergy(spans: readonly Span[], from: number, to: number): number {
  let sum = 0;
  for (const s of spans) {
    if (!s.audio || s.start >= to || s.start + s.length <= from) continue;
    if (!s.energy) {
      sum += Math.min(to, s.start + s.length) - Math.max(from, s.start);
      continue;
    }
    const first = Math.max(0, Math.floor((from - s.start - ENERGY_STEP / 2) / ENERGY_STEP));
    for (let k = first; k < s.energy.length; k++) {
      const mid = s.start + k * ENERGY_STEP + ENERGY_STEP / 2;
      if (mid >= to) break;
      if (mid >= from) sum += s.energy[k]! * Math.min(ENERGY_STEP, s.length - k * ENERGY_STEP);
    }
  }
  return sum;
}

/** True when any audio of `spans` falls in [from, to). */
export function hasAudio(spans: readonly Span[], from: number, to: number): boolean {
  return spans.some((s) => s.audio && s.length > 0 && s.start < to && s.start + s.length > from);
}

/**
 * L18: the boundary for a slot ending at `nominal`: the middle of the quietest frame among those
 * ending in the last `search` samples before it (ties go to the latest), strictly after `floor`.
 */
export function quietBoundary(spans: readonly Span[], nominal: number, floor: number, o: CutOptions): number {
  const room = Math.max(0, nominal - floor - 1);
  const frames = Math.min(Math.floor(o.search / o.frame), Math.floor(room / o.frame));
  if (frames === 0) return nominal;
  let best = Infinity;
  let bestEnd = nominal;
  for (let j = 0; j < frames; j++) {
    const end = nominal - j * o.frame;
    const energy = stretchEnergy(spans, end - o.frame, end);
    if (energy < best) {
      best = energy;
      bestEnd = end;
    }
  }
  return bestEnd - o.frame + Math.floor(o.frame / 2);
}

/**
 * Cuts [from, to) into windows. A whole slot of silence becomes one window reaching to the next
 * audio, however long (a long gap costs one row, not one per slot). Otherwise each window ends at
 * the quiet boundary of its slot. Without `final`, cutting stops at the first slot not yet filled
 * and `cut` says where the next window will start; with it, the rest becomes a last window, a
 * short tail joining the window before it.
 */
export function cutStretch(
  spans: readonly Span[],
  from: number,
  to: number,
  o: CutOptions,
  final: boolean,
): { windows: CutWindow[]; cut: number } {
  const windows: CutWindow[] = [];
  let at = from;
  while (at < to) {
    const silentTo = Math.min(to, nextAudioStart(spans, at) ?? to);
    if (silentTo - at >= o.slot) {
      windows.push({ start: at, end: silentTo, audio: false });
      at = silentTo;
      continue;
    }
    if (at + o.slot < to || (at + o.slot === to && !final)) {
      const boundary = quietBoundary(spans, at + o.slot, at, o);
      if (!(final && to - boundary < o.minTail)) {
        windows.push({ start: at, end: boundary, audio: hasAudio(spans, at, boundary) });
        at = boundary;
        continue;
      }
    }
    if (!final) break;
    windows.push({ start: at, end: to, audio: hasAudio(spans, at, to) });
    at = to;
  }
  return { windows, cut: at };
}

/**
 * L24: a window of the close-out's last stretch cut into up to `parts` pieces of at least
 * `minPiece` samples, each boundary at the quietest frame near an even share, so that the workers'
 * recognisers share the stretch instead of one recogniser reading it all after End. A piece shorter
 * than `minPiece` is not worth a recogniser's start-up; a window without audio stays whole.
 */
export function splitForRecognisers(
  spans: readonly Span[],
  w: CutWindow,
  o: CutOptions,
  parts: number,
  minPiece: number,
): CutWindow[] {
  const length = w.end - w.start;
  const n = Math.min(parts, Math.floor(length / minPiece));
  if (!w.audio || n <= 1) return [w];
  const share = length / n;
  // The search is centred on each even share and never reaches the boundary before it.
  const search = Math.min(o.search, Math.floor(share / 2));
  const pieces: CutWindow[] = [];
  let at = w.start;
  for (let k = 1; k < n; k++) {
    const nominal = Math.round(w.start + k * share + search / 2);
    const boundary = quietBoundary(spans, nominal, at, { ...o, search });
    pieces.push({ start: at, end: boundary, audio: hasAudio(spans, at, boundary) });
    at = boundary;
  }
  pieces.push({ start: at, end: w.end, audio: hasAudio(spans, at, w.end) });
  return pieces;
}

/** Where audio next begins at or after `at`, or null if none of `spans` has audio there. */
function nextAudioStart(spans: readonly Span[], at: number): number | null {
  let best: number | null = null;
  for (const s of spans) {
    if (!s.audio || s.length === 0 || s.start + s.length <= at) continue;
    const start = Math.max(at, s.start);
    if (best === null || start < best) best = start;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// The frontier: every sequence number below it is placed (stored, or reserved as a gap).

export type FrontierStep =
  /** The chunk at the frontier is stored and its length known: place it. */
  | { kind: 'place' }
  /** Reserve the missing sequence numbers [frontier, endSeq) as one gap. */
  | { kind: 'reserve'; endSeq: number }
  /** Nothing more can be placed now. */
  | { kind: 'wait' };

/**
 * What the frontier does next. A missing chunk is waited for while later ones are stored, until it
 * has been waited on for the patience (wall-clock time since a later chunk was first stored while
 * it was missing), or the meeting is being closed (`final`), or it is at or beyond the declared end.
 */
export function frontierStep(input: {
  nextSeq: number;
  /** Whether the chunk at the frontier is stored, and its length known (a WebM piece decoded). */
  atFrontier: 'ready' | 'undecoded' | 'absent';
  /** The lowest stored sequence number above the frontier, if any. */
  nextStored: number | null;
  /** Every sequence number below this is expected (End's count, or at close-out the highest + 1). */
  expectedEnd: number | null;
  final: boolean;
  waitedMs: number | null;
  patienceMs: number;
}): FrontierStep {
  if (input.atFrontier === 'ready') return { kind: 'place' };
  if (input.atFrontier === 'undecoded') return { kind: 'wait' };
  const end = input.nextStored ?? (input.final ? input.expectedEnd : null);
  if (end === null || end <= input.nextSeq) return { kind: 'wait' };
  if (input.final) return { kind: 'reserve', endSeq: end };
  if (input.nextStored !== null && input.waitedMs !== null && input.waitedMs >= input.patienceMs) {
    return { kind: 'reserve', endSeq: input.nextStored };
  }
  return { kind: 'wait' };
}

export interface GapRun {
  firstSeq: number;
  endSeq: number;
  start: number;
  samples: number;
}

/** A reserved run split where its chunk `seq` arrived: what is before it, its own gap, what is after. */
export function splitGap(
  run: GapRun,
  seq: number,
): { before: GapRun | null; own: GapRun; after: GapRun | null } {
  if (seq < run.firstSeq || seq >= run.endSeq) throw new RangeError(`seq ${seq} is not in the gap`);
  const per = run.samples / (run.endSeq - run.firstSeq);
  const at = (s: number) => run.start + Math.round((s - run.firstSeq) * per);
  return {
    before:
      seq > run.firstSeq
        ? { firstSeq: run.firstSeq, endSeq: seq, start: run.start, samples: at(seq) - run.start }
        : null,
    own: { firstSeq: seq, endSeq: seq + 1, start: at(seq), samples: at(seq + 1) - at(seq) },
    after:
      seq + 1 < run.endSeq
        ? {
            firstSeq: seq + 1,
            endSeq: run.endSeq,
            start: at(seq + 1),
            samples: run.start + run.samples - at(seq + 1),
          }
        : null,
  };
}

// ---------------------------------------------------------------------------------------------
// Repairs.

/** A stretch whose length changes: a reserved chunk that arrived, or a WebM piece decoded again. */
export interface Resize {
  seq: number;
  start: number;
  oldLength: number;
  newLength: number;
}

/** Maps a position before the resizes to one after them; null inside a resized stretch. */
export function mapPosition(resizes: readonly Resize[], p: number): number | null {
  let shift = 0;
  for (const r of resizes) {
    if (p >= r.start + r.oldLength) shift += r.newLength - r.oldLength;
    else if (p > r.start) return null;
  }
  return p + shift;
}

export interface RegionWindow {
  id: string;
  start: number;
  end: number;
  status: string;
}

export interface RepairInput {
  /** recut while the meeting's audio is stored; splice once it was deleted. */
  mode: 'recut' | 'splice';
  /** The close-out cut the last stretch: nobody but a repair cuts new audio after the cut. */
  closed: boolean;
  resizes: readonly Resize[];
  /** Live windows overlapping or touching each resized stretch and the cut (old positions). */
  windows: readonly RegionWindow[];
  cut: number;
  placed: number;
}

export interface RepairRegion {
  /** Old positions. */
  from: number;
  to: number;
  /** recut: cut again from the audio; splice: the resized audio alone; tail: new audio after the cut. */
  kind: 'recut' | 'splice' | 'tail';
}

export interface PlannedWindow {
  start: number;
  end: number;
  /** transcribe: recognise its audio; silent: no audio, settles missing; keep: segments moved. */
  kind: 'transcribe' | 'silent' | 'keep';
  /** For keep: the old window and the stretch of it (old positions) whose segments move here. */
  keep?: {
    windowId: string;
    status: string;
    from: number;
    to: number;
    /**
     * Where the spliced stretch before this piece began: a segment that starts in it and ends
     * after it holds words of this piece too (word times are not known), so it is kept here
     * rather than lost.
     */
    straddleFrom: number | null;
  };
}

export interface RepairPlan {
  /** Live windows replaced by this repair (their active jobs are superseded, J13). */
  supersede: string[];
  create: PlannedWindow[];
  /** Where the cut ends after the repair (new positions). */
  cut: number;
}

/**
 * Which stretches a repair rewrites (old positions). In `recut` mode (the meeting's audio is still
 * stored) every live window that overlaps or touches a resized stretch is replaced, and all they
 * covered is cut again from the audio, so boundaries stay in quiet places (L18). In `splice` mode
 * (the audio was deleted when the meeting ended) only the resized chunks' own stretches are
 * transcribed, and the windows around them keep their segments; a window still pending (its audio
 * kept until it settles) is transcribed whole with them. On a closed timeline (and always
 * in splice mode, where nothing else will) the audio after the cut is cut here too: the tail.
 * A stretch not yet reached by the cut of an open timeline needs no windows: the cutter gets there.
 */
export function repairRegions(input: RepairInput): RepairRegion[] {
  const { resizes, windows, cut } = input;
  const cutsTail = input.closed || input.mode === 'splice';
  const regions: RepairRegion[] = [];
  let tailFrom = cut;
  if (input.mode === 'recut') {
    for (const r of resizes) {
      if (r.start >= cut && !cutsTail) continue;
      const end = r.start + r.oldLength;
      let from = r.start;
      let to = end;
      for (const w of windows) {
        if (w.end >= r.start && w.start <= end) {
          from = Math.min(from, w.start);
          to = Math.max(to, w.end);
        }
      }
      regions.push({ from, to, kind: 'recut' });
      if (end > tailFrom) tailFrom = end;
    }
    if (cutsTail && input.placed > cut) {
      // Everything from the cut on (with the last window, to cut it again with what follows it);
      // chains beyond the cut fall inside and merge with it.
      let from = cut;
      for (const w of windows) if (w.end === cut) from = Math.min(from, w.start);
      regions.push({ from, to: input.placed, kind: 'recut' });
    }
  } else {
    for (const r of resizes) {
      // Beyond the cut, the resized chunk is cut with the rest of the tail.
      if (r.start >= cut) continue;
      const end = r.start + r.oldLength;
      const last = regions.at(-1);
      if (last && last.to === r.start) last.to = end;
      else regions.push({ from: r.start, to: end, kind: 'splice' });
      if (end > tailFrom) tailFrom = end;
    }
    // A window still being transcribed keeps its audio (L16), so it is spliced whole, never split:
    // a piece of it kept without words would settle as failed while its audio is there. Found by
    // the soak: a late chunk spliced into a window in retry lost the stretch around it.
    for (const reg of regions) {
      for (const w of windows) {
        if (w.status !== 'pending' || w.start >= reg.to || w.end <= reg.from) continue;
        reg.from = Math.min(reg.from, w.start);
        reg.to = Math.max(reg.to, w.end);
      }
    }
    regions.sort((a, b) => a.from - b.from);
    for (let i = regions.length - 1; i > 0; i--) {
      const before = regions[i - 1]!;
      if (regions[i]!.from > before.to) continue;
      before.to = Math.max(before.to, regions[i]!.to);
      regions.splice(i, 1);
    }
    if (input.placed > tailFrom) regions.push({ from: tailFrom, to: input.placed, kind: 'tail' });
  }
  regions.sort((a, b) => a.from - b.from);
  if (input.mode === 'splice') return regions;
  const merged: RepairRegion[] = [];
  for (const r of regions) {
    const last = merged.at(-1);
    if (last && r.from <= last.to) last.to = Math.max(last.to, r.to);
    else merged.push({ ...r });
  }
  return merged;
}

/**
 * Plans a repair over `repairRegions(input)`. `spans` describe the timeline after the resizes
 * (new positions) over those regions: which stretches have audio, and their energy.
 */
export function planRepair(input: RepairInput, spans: readonly Span[], options: CutOptions): RepairPlan {
  const { resizes, windows } = input;
  const map = (p: number) => mapPosition(resizes, p);
  const regions = repairRegions(input);
  const supersede = new Set<string>();
  const create: PlannedWindow[] = [];
  let cut = input.cut;
  let cutEnd: number | null = map(cut);
  for (const region of regions) {
    const from = map(region.from);
    const to = map(region.to);
    if (from === null || to === null) throw new Error('a repair region ends inside a resized stretch');
    if (region.to >= cut) {
      cut = region.to;
      cutEnd = to;
    }
    if (region.kind === 'splice') {
      // Cut like any stretch: a long spliced stretch (a gap of missing chunks that arrived late)
      // becomes windows of the usual length, each one recognition a recogniser can answer within
      // its timeout, not one request for the whole gap.
      for (const w of cutStretch(spans, from, to, options, true).windows)
        create.push({ start: w.start, end: w.end, kind: w.audio ? 'transcribe' : 'silent' });
      continue;
    }
    if (region.kind === 'recut') {
      for (const w of windows) if (w.start < region.to && w.end > region.from) supersede.add(w.id);
    }
    for (const w of cutStretch(spans, from, to, options, true).windows)
      create.push({ start: w.start, end: w.end, kind: w.audio ? 'transcribe' : 'silent' });
  }
  // Splice: each window a spliced stretch falls into keeps its segments outside the stretches.
  const spliced = regions.filter((r) => r.kind === 'splice');
  for (const w of windows) {
    const inside = spliced.filter((r) => r.from < w.end && r.to > w.start);
    if (inside.length === 0) continue;
    supersede.add(w.id);
    let at = w.start;
    let straddleFrom: number | null = null;
    for (const r of inside) {
      if (r.from > at) keepPiece(create, map, w, at, r.from, straddleFrom);
      at = Math.max(at, r.to);
      straddleFrom = r.from;
    }
    if (at < w.end) keepPiece(create, map, w, at, w.end, straddleFrom);
  }
  if (cutEnd === null) throw new Error('the cut ends inside a resized stretch');
  return { supersede: [...supersede].sort(), create: create.sort((a, b) => a.start - b.start), cut: cutEnd };
}

function keepPiece(
  create: PlannedWindow[],
  map: (p: number) => number | null,
  w: RegionWindow,
  from: number,
  to: number,
  straddleFrom: number | null,
): void {
  const start = map(from);
  const end = map(to);
  if (start === null || end === null || end <= start) return;
  create.push({
    start,
    end,
    kind: 'keep',
    keep: { windowId: w.id, status: w.status, from, to, straddleFrom },
  });
}

/**
 * L19: the status a repair's new window takes: transcribed when the repair recognised it, missing
 * when it has no audio, and for a piece kept from a window it replaces, that window's settled
 * status (a failed one keeps its reason); a piece of a window still pending, whose audio is gone
 * by the time of the repair, fails as deleted.
 */
export function repairedWindowStatus(
  kind: PlannedWindow['kind'],
  old: { status: WindowStatus; failure_code: string | null; failure_message: string | null } | undefined,
): { status: WindowStatus; failureCode: string | null; failureMessage: string | null } {
  const status =
    kind === 'transcribe'
      ? WindowStatus.transcribed
      : kind === 'silent'
        ? WindowStatus.missing
        : old && old.status !== WindowStatus.pending
          ? old.status
          : WindowStatus.failed;
  if (status !== WindowStatus.failed) return { status, failureCode: null, failureMessage: null };
  return {
    status,
    failureCode: old?.failure_code ?? 'audio.deleted',
    failureMessage: old?.failure_message ?? 'its audio was deleted before it was transcribed',
  };
}

/**
 * Where a repair leaves the meeting's cut: where the plan says when it cut through or past the old
 * cut — also when the old cut lay inside a chain's reserved stretch (the shifts leave such a cut
 * where it was, and a chain shorter than reserved ends before it); otherwise the cut as shifted,
 * which any window the cutter added meanwhile also moved (`atLeast`: the greater of the two).
 */
export function repairCut(
  chains: ReadonlyArray<{ start: number; oldLength: number }>,
  oldCut: number,
  planCut: number,
): { cut: number; atLeast: boolean } {
  const inside = chains.some((c) => oldCut > c.start && oldCut < c.start + c.oldLength);
  return { cut: planCut, atLeast: !inside };
}
