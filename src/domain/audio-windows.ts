export interface AudioWindow {
  index: number;
  /** Inclusive. */
  startSample: number;
  /** Exclusive; equals the next window's `startSample`. */
  endSample: number;
}

export interface PlanWindowsOptions {
  /** How far before each nominal boundary to look for a quiet stretch. Default 3 s. */
  searchSeconds?: number;
  /** Length of the stretches compared by energy. Default 100 ms. */
  frameMs?: number;
  /** A final stretch shorter than this is merged into the previous window. Default 1 s. */
  minTailSeconds?: number;
}

/**
 * Splits audio into contiguous windows of at most about `windowSeconds` (L18). Each boundary sits in
 * the middle of the quietest frame among those in the last `searchSeconds` of its slot, so words are
 * not cut; the windows cover [0, samples.length) exactly once.
 */
export function planWindows(
  samples: Int16Array,
  sampleRate: number,
  windowSeconds: number,
  opts: PlanWindowsOptions = {},
): AudioWindow[] {
  if (!(sampleRate > 0) || !(windowSeconds > 0)) {
    throw new RangeError('planWindows: sampleRate and windowSeconds must be positive');
  }
  const total = samples.length;
  if (total === 0) return [];

  const slot = Math.max(1, Math.round(windowSeconds * sampleRate));
  const frame = Math.min(slot, Math.max(1, Math.round(((opts.frameMs ?? 100) / 1000) * sampleRate)));
  const search = Math.max(0, Math.round((opts.searchSeconds ?? 3) * sampleRate));
  // Keeping the searched span strictly inside the slot guarantees boundaries strictly increase.
  const frameCount = Math.min(Math.floor(search / frame), Math.floor((slot - 1) / frame));
  const minTail = Math.max(0, Math.round((opts.minTailSeconds ?? 1) * sampleRate));

  const boundaries: number[] = [];
  for (let nominal = slot; nominal < total; nominal += slot) {
    const boundary = quietestBoundary(samples, nominal, frame, frameCount);
    if (total - boundary < minTail) break;
    boundaries.push(boundary);
  }

  const windows: AudioWindow[] = [];
  let start = 0;
  for (const end of [...boundaries, total]) {
    windows.push({ index: windows.length, startSample: start, endSample: end });
    start = end;
  }
  return windows;
}

function quietestBoundary(samples: Int16Array, nominal: number, frame: number, frameCount: number): number {
  if (frameCount === 0) return nominal;
  let bestEnergy = Infinity;
  let bestEnd = nominal;
  // Walk from the latest frame backwards and only replace on strictly lower energy: ties go latest.
  for (let j = 0; j < frameCount; j++) {
    const end = nominal - j * frame;
    const energy = sumOfSquares(samples, end - frame, end);
    if (energy < bestEnergy) {
      bestEnergy = energy;
      bestEnd = end;
    }
  }
  return bestEnd - frame + Math.floor(frame / 2);
}

function sumOfSquares(samples: Int16Array, from: number, to: number): number {
  let sum = 0;
  for (let i = from; i < to; i++) {
    const s = samples[i] ?? 0;
    sum += s * s;
  }
  return sum;
}

/**
 * L18 for audio that arrives over time: the boundary for a slot ending at `nominal` (a sample index
 * into `samples`), placed in the quietest `frameMs` stretch of the last `searchSeconds` before it.
 * Always in (nominal - searchSeconds, nominal], and strictly after `floor`.
 */
export function quietBoundary(
  samples: Int16Array,
  nominal: number,
  sampleRate: number,
  searchSeconds: number,
  floor: number,
  frameMs = 100,
): number {
  const frame = Math.max(1, Math.round((frameMs / 1000) * sampleRate));
  const room = Math.max(0, nominal - floor - 1);
  const frameCount = Math.min(
    Math.floor(Math.round(searchSeconds * sampleRate) / frame),
    Math.floor(room / frame),
  );
  return quietestBoundary(samples, nominal, frame, frameCount);
}

/** A window cut by WindowCutter, with its audio. */
export interface CutWindow extends AudioWindow {
  samples: Int16Array;
}

/**
 * J19, L18: planWindows for audio that is decoded as a stream. Samples are pushed in pieces of any
 * size; each window comes out as soon as its boundary is decided (the slot's audio and `minTail`
 * after the boundary have arrived), so no more than about one window of audio is held, whatever the
 * recording's length. The boundaries are those planWindows places on the whole recording: a
 * boundary depends only on the audio of its own slot. A cutter resumed after `resume.index`
 * windows that ended at `resume.startSample` skips the audio before that sample and goes on with the
 * same boundaries.
 */
export class WindowCutter {
  private readonly slot: number;
  private readonly frame: number;
  private readonly frameCount: number;
  private readonly minTail: number;
  /** Audio from `bufStart` (the next window's start) up to `pos`. */
  private buf: Int16Array;
  private used = 0;
  private bufStart: number;
  private pos = 0;
  private index: number;
  private finished = false;

  constructor(
    sampleRate: number,
    windowSeconds: number,
    opts: PlanWindowsOptions = {},
    resume: { index: number; startSample: number } = { index: 0, startSample: 0 },
  ) {
    if (!(sampleRate > 0) || !(windowSeconds > 0)) {
      throw new RangeError('WindowCutter: sampleRate and windowSeconds must be positive');
    }
    this.slot = Math.max(1, Math.round(windowSeconds * sampleRate));
    this.frame = Math.min(this.slot, Math.max(1, Math.round(((opts.frameMs ?? 100) / 1000) * sampleRate)));
    const search = Math.max(0, Math.round((opts.searchSeconds ?? 3) * sampleRate));
    this.frameCount = Math.min(Math.floor(search / this.frame), Math.floor((this.slot - 1) / this.frame));
    this.minTail = Math.max(0, Math.round((opts.minTailSeconds ?? 1) * sampleRate));
    this.index = resume.index;
    this.bufStart = resume.startSample;
    this.buf = new Int16Array(this.slot + this.minTail + sampleRate);
  }

  /** Samples decoded so far, the skipped ones included. */
  get decodedSamples(): number {
    return this.pos;
  }

  /** Adds the next decoded samples; returns the windows this decided, in order. */
  push(samples: Int16Array): CutWindow[] {
    if (this.finished) throw new Error('WindowCutter: push after finish');
    // Audio before a resumed cutter's start was cut into windows already.
    const skip = Math.min(samples.length, Math.max(0, this.bufStart - this.pos));
    this.append(samples.subarray(skip));
    this.pos += samples.length;
    const out: CutWindow[] = [];
    for (;;) {
      const nominal = (this.index + 1) * this.slot;
      // planWindows: a boundary exists for a slot that ends before the recording does…
      if (this.pos <= nominal) break;
      const boundary = this.boundaryOf(nominal);
      // …and leaves at least minTail after it; otherwise the rest is one final window. Which of
      // the two is known once minTail has arrived after the boundary (or the recording ended).
      if (this.pos < boundary + this.minTail) break;
      out.push(this.take(boundary));
    }
    return out;
  }

  /** The recording ended: its last window, or null if every sample is in a window already. */
  finish(): CutWindow | null {
    this.finished = true;
    if (this.pos <= this.bufStart) return null;
    return this.take(this.pos);
  }

  private boundaryOf(nominal: number): number {
    const local = nominal - this.bufStart;
    if (this.frameCount === 0) return nominal;
    let bestEnergy = Infinity;
    let bestEnd = local;
    for (let j = 0; j < this.frameCount; j++) {
      const end = local - j * this.frame;
      const energy = sumOfSquares(this.buf, end - this.frame, end);
      if (energy < bestEnergy) {
        bestEnergy = energy;
        bestEnd = end;
      }
    }
    return this.bufStart + bestEnd - this.frame + Math.floor(this.frame / 2);
  }

  private take(end: number): CutWindow {
    const length = end - this.bufStart;
    const window: CutWindow = {
      index: this.index,
      startSample: this.bufStart,
      endSample: end,
      samples: this.buf.slice(0, length),
    };
    this.buf.copyWithin(0, length, this.used);
    this.used -= length;
    this.bufStart = end;
    this.index += 1;
    return window;
  }

  private append(samples: Int16Array): void {
    if (samples.length === 0) return;
    if (this.used + samples.length > this.buf.length) {
      const grown = new Int16Array(Math.max(this.buf.length * 2, this.used + samples.length));
      grown.set(this.buf.subarray(0, this.used));
      this.buf = grown;
    }
    this.buf.set(samples, this.used);
    this.used += samples.length;
  }
}
