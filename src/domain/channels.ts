/**
 * B11: the dominance rule. When each speaker has a channel (or a track) of their own, every
 * channel also hears the others a little (bleed: a headset's crosstalk, the call's voices leaking
 * from the speakers into the microphone). Transcribed as they are, those words would appear twice,
 * once under the wrong speaker. So each channel keeps only the stretches where it dominates: in
 * each frame (20 ms) a channel is kept when its energy is within `marginDb` of the loudest
 * channel's, and a kept frame keeps `holdMs` on either side (a word's soft start and tail are not
 * cut off). Elsewhere it is silenced. Two people talking at once at similar levels are both kept;
 * a voice that reaches another channel more than `marginDb` weaker is transcribed once, where it
 * is loudest.
 */
export interface DominanceOptions {
  frameMs: number;
  marginDb: number;
  holdMs: number;
  /** Below this RMS (of 32768) in every channel a frame is silence: nothing to decide. */
  floorRms: number;
}

export const DOMINANCE: DominanceOptions = { frameMs: 20, marginDb: 10, holdMs: 200, floorRms: 60 };

/**
 * The channels as each is kept: the same lengths, each silenced where another dominates.
 * `channels` are aligned sample for sample (a stereo file's two channels, two tracks on one clock).
 */
export function gateByDominance(
  channels: Int16Array[],
  sampleRate: number,
  options: DominanceOptions = DOMINANCE,
): Int16Array[] {
  if (channels.length < 2) return channels.map((c) => c.slice());
  const length = Math.min(...channels.map((c) => c.length));
  const frame = Math.max(1, Math.round((sampleRate * options.frameMs) / 1000));
  const frames = Math.ceil(length / frame);
  const floor = options.floorRms * options.floorRms;
  const energy = channels.map((c) => {
    const e = new Float64Array(frames);
    for (let f = 0; f < frames; f++) {
      let sum = 0;
      const end = Math.min(length, (f + 1) * frame);
      for (let i = f * frame; i < end; i++) sum += c[i]! * c[i]!;
      e[f] = sum / Math.max(1, end - f * frame);
    }
    return e;
  });
  const keep = keptFrames(energy, options);
  return channels.map((c, ci) => {
    const out = c.slice(0, length);
    for (let f = 0; f < frames; f++) {
      if (keep[ci]![f]) continue;
      let loudest = 0;
      for (const e of energy) loudest = Math.max(loudest, e[f]!);
      if (loudest < floor) continue;
      out.fill(0, f * frame, Math.min(length, (f + 1) * frame));
    }
    return out;
  });
}

/**
 * The rule on energies: for each channel, 1 in each frame (of `options.frameMs`) where it is kept:
 * it is within `marginDb` of the loudest channel there (and that one is above the floor), or such
 * a frame is within the hold. `energy` is each channel's mean square per frame, all of one length.
 */
export function keptFrames(energy: ArrayLike<number>[], options: DominanceOptions = DOMINANCE): Uint8Array[] {
  const frames = Math.min(...energy.map((e) => e.length));
  const ratio = 10 ** (-options.marginDb / 10);
  const floor = options.floorRms * options.floorRms;
  const hold = Math.ceil(options.holdMs / options.frameMs);
  return energy.map((own) => {
    const dominant = new Uint8Array(frames);
    for (let f = 0; f < frames; f++) {
      let loudest = 0;
      for (const e of energy) loudest = Math.max(loudest, e[f]!);
      if (loudest >= floor && own[f]! >= loudest * ratio) dominant[f] = 1;
    }
    // A kept frame keeps its neighbours within the hold.
    const keep = new Uint8Array(frames);
    for (let f = 0; f < frames; f++) {
      if (!dominant[f]) continue;
      for (let g = Math.max(0, f - hold); g <= Math.min(frames - 1, f + hold); g++) keep[g] = 1;
    }
    return keep;
  });
}

/** Interleaved samples (`n` channels) as one array per channel. */
export function deinterleave(samples: Int16Array, n: number): Int16Array[] {
  const frames = Math.floor(samples.length / n);
  const out = Array.from({ length: n }, () => new Int16Array(frames));
  for (let i = 0; i < frames; i++) for (let c = 0; c < n; c++) out[c]![i] = samples[i * n + c]!;
  return out;
}

/** The channels mixed down to one (their mean), for finding where to cut windows. */
export function mixDown(channels: Int16Array[]): Int16Array {
  const length = Math.min(...channels.map((c) => c.length));
  const out = new Int16Array(length);
  for (let i = 0; i < length; i++) {
    let sum = 0;
    for (const c of channels) sum += c[i]!;
    out[i] = Math.round(sum / channels.length);
  }
  return out;
}

/**
 * B11: the channels of a recording decoded as a stream (interleaved pieces of any size), kept from
 * `fromSample` on until the window that needs them is taken, so no more than about one window of
 * each channel is held. `push` returns the mix of the whole frames it added: the cutter decides
 * the windows on it, and every channel is cut at the same boundaries.
 */
export class ChannelBuffer {
  private readonly bufs: Int16Array[];
  private length = 0;
  /** The absolute sample index of bufs[c][0]. */
  private base: number;
  /** The absolute sample index of the next whole frame pushed. */
  private pos = 0;
  private carry = new Int16Array(0);

  constructor(
    readonly channels: number,
    fromSample = 0,
  ) {
    this.base = fromSample;
    this.bufs = Array.from({ length: channels }, () => new Int16Array(1 << 16));
  }

  push(interleaved: Int16Array): Int16Array {
    const n = this.channels;
    const all = this.carry.length === 0 ? interleaved : concat(this.carry, interleaved);
    const frames = Math.floor(all.length / n);
    this.carry = all.slice(frames * n);
    const split = deinterleave(all.subarray(0, frames * n), n);
    const skip = Math.min(frames, Math.max(0, this.base - this.pos));
    if (frames > skip) {
      this.reserve(this.length + frames - skip);
      split.forEach((c, i) => this.bufs[i]!.set(c.subarray(skip), this.length));
      this.length += frames - skip;
    }
    this.pos += frames;
    return mixDown(split);
  }

  /** The channels' samples [start, end) (absolute), then everything before `end` is let go. */
  take(start: number, end: number): Int16Array[] {
    const from = Math.max(0, start - this.base);
    const to = Math.max(from, Math.min(this.length, end - this.base));
    const out = this.bufs.map((b) => b.slice(from, to));
    const drop = Math.max(0, Math.min(this.length, end - this.base));
    for (const b of this.bufs) b.copyWithin(0, drop, this.length);
    this.length -= drop;
    this.base += drop;
    return out;
  }

  private reserve(size: number): void {
    if (size <= this.bufs[0]!.length) return;
    let cap = this.bufs[0]!.length;
    while (cap < size) cap *= 2;
    for (let i = 0; i < this.bufs.length; i++) {
      const grown = new Int16Array(cap);
      grown.set(this.bufs[i]!.subarray(0, this.length));
      this.bufs[i] = grown;
    }
  }
}

function concat(a: Int16Array, b: Int16Array): Int16Array {
  const out = new Int16Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
