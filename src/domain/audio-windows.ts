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
