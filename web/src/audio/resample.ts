/**
 * Streaming downsampler for the capture worklet: a windowed-sinc low-pass at 92 % of the output
 * Nyquist frequency, then linear interpolation at the fractional output positions. Chromium's audio
 * runs at 48 kHz (sometimes 44.1 kHz); the server wants 16 kHz. Pure, so it is unit-tested in Node.
 */
export class Downsampler {
  private readonly ratio: number;
  private readonly half: number;
  private readonly taps: Float32Array;
  private buffer: Float32Array;
  /** Position of the next output sample, in `buffer` coordinates. */
  private pos: number;

  constructor(
    readonly inRate: number,
    readonly outRate: number,
  ) {
    if (!(inRate >= outRate) || outRate <= 0)
      throw new Error(`cannot resample ${inRate} Hz to ${outRate} Hz`);
    this.ratio = inRate / outRate;
    this.half = this.ratio === 1 ? 0 : Math.ceil(8 * this.ratio);
    const n = 2 * this.half + 1;
    const cutoff = (0.5 / this.ratio) * 0.92; // cycles per input sample
    const taps = new Float32Array(n);
    let sum = 0;
    for (let j = 0; j < n; j++) {
      const x = j - this.half;
      const sinc = x === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * x) / (Math.PI * x);
      const blackman =
        0.42 -
        0.5 * Math.cos((2 * Math.PI * j) / (n - 1 || 1)) +
        0.08 * Math.cos((4 * Math.PI * j) / (n - 1 || 1));
      taps[j] = sinc * (n === 1 ? 1 : blackman);
      sum += taps[j]!;
    }
    for (let j = 0; j < n; j++) taps[j] = taps[j]! / sum;
    this.taps = taps;
    // Leading zeros stand in for the audio before the first sample, so output 0 is input 0.
    this.buffer = new Float32Array(this.half);
    this.pos = this.half;
  }

  /** Feeds input samples; returns the output samples that are now fully determined. */
  process(input: Float32Array): Float32Array {
    const joined = new Float32Array(this.buffer.length + input.length);
    joined.set(this.buffer);
    joined.set(input, this.buffer.length);
    const out: number[] = [];
    while (Math.floor(this.pos) + 1 + this.half < joined.length) {
      const i = Math.floor(this.pos);
      const frac = this.pos - i;
      const a = this.filtered(joined, i);
      out.push(frac === 0 ? a : a + (this.filtered(joined, i + 1) - a) * frac);
      this.pos += this.ratio;
    }
    const drop = Math.max(0, Math.min(joined.length, Math.floor(this.pos) - this.half));
    this.buffer = joined.slice(drop);
    this.pos -= drop;
    return Float32Array.from(out);
  }

  /** The last samples, held back for the filter's look-ahead, padded out with silence. */
  flush(): Float32Array {
    const remaining = Math.max(0, Math.ceil((this.buffer.length - this.pos) / this.ratio));
    const out = this.process(new Float32Array(this.half + 2));
    return out.subarray(0, remaining);
  }

  private filtered(x: Float32Array, center: number): number {
    let acc = 0;
    const start = center - this.half;
    for (let j = 0; j < this.taps.length; j++) acc += this.taps[j]! * (x[start + j] ?? 0);
    return acc;
  }
}

/** Float samples in [-1, 1] to 16-bit PCM, clipped. */
export function toInt16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]!));
    out[i] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
  }
  return out;
}
