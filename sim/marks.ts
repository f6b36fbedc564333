/**
 * The simulation's marked audio and how its recogniser reads it back (docs/simulation.md, "Marks").
 *
 * Lossless audio (live chunks, WAV and FLAC uploads, bot recordings) carries an exact mark in every
 * sample: a square wave at the Nyquist rate whose level says which meeting and which stretch of it
 * (a live chunk's seq, an upload's stretch) the sample belongs to. Every sample names itself, so a
 * window cut anywhere is read exactly, and a transcript shows which samples of which meeting it
 * holds, once or twice, in which order.
 *
 * Lossy audio (MP3, Opus, AAC) cannot carry that: a codec keeps what is audible, not sample
 * values. Its stretches are sine tones of distinct frequencies, which survive coding, read in 20 ms
 * blocks by counting zero crossings. A tone stretch is read to within a tolerance (a block at each
 * change of tone, and the codec's padding at the ends), not exactly.
 *
 * Pure: the recogniser (sim/providers.ts), the clients (sim/run.ts), the store watcher
 * (sim/store.ts) and the oracle all use these functions.
 */

export const SAMPLE_RATE = 16_000;
/** Levels start here, so no marked sample is quiet enough to pass for silence. */
const MARK_BASE = 1000;
/** Marks (stretches) a meeting may have: a live meeting's chunks, an upload's stretches. */
export const MARKS_PER_MEETING = 16;
/** The most meetings one run can mark: levels stay below 32 768. */
export const MAX_MEETING_NUMBERS = Math.floor((32_767 - MARK_BASE) / MARKS_PER_MEETING);

/** The sample level of (meeting number, mark). */
export function markLevel(meeting: number, mark: number): number {
  if (!Number.isInteger(meeting) || meeting < 0 || meeting >= MAX_MEETING_NUMBERS)
    throw new Error(`meeting number ${meeting} out of range`);
  if (!Number.isInteger(mark) || mark < 0 || mark >= MARKS_PER_MEETING)
    throw new Error(`mark ${mark} out of range`);
  return MARK_BASE + meeting * MARKS_PER_MEETING + mark;
}

/** 16-bit mono PCM samples as a canonical 44-byte-header WAV. */
export function wavOf(samples: Int16Array, rate = SAMPLE_RATE): Buffer {
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** Stretches of exactly marked audio, one after another, as samples. */
export function markedSamples(
  meeting: number,
  stretches: Array<{ mark: number; samples: number }>,
): Int16Array {
  const total = stretches.reduce((n, s) => n + s.samples, 0);
  const out = new Int16Array(total);
  let at = 0;
  for (const s of stretches) {
    const level = markLevel(meeting, s.mark);
    for (let i = 0; i < s.samples; i++) out[at + i] = (at + i) % 2 === 0 ? level : -level;
    at += s.samples;
  }
  return out;
}

export function markedWav(meeting: number, stretches: Array<{ mark: number; samples: number }>): Buffer {
  return wavOf(markedSamples(meeting, stretches));
}

// ---------------------------------------------------------------------------------------------
// Tones (lossy formats)

/** The frequency of tone mark k: 500 Hz apart by 250 Hz, well inside every codec's band. */
export const toneHz = (k: number): number => 500 + 250 * k;
export const TONE_MARKS = 8;
const TONE_AMPLITUDE = 6000;
/** The block a tone is read in: 20 ms. */
export const TONE_BLOCK = 320;

/** Tone stretches back to back, phase-continuous (no click for a codec to smear). */
export function toneSamples(stretches: Array<{ mark: number; samples: number }>): Int16Array {
  const total = stretches.reduce((n, s) => n + s.samples, 0);
  const out = new Int16Array(total);
  let phase = 0;
  let at = 0;
  for (const s of stretches) {
    if (s.mark < 0 || s.mark >= TONE_MARKS) throw new Error(`tone mark ${s.mark} out of range`);
    const step = (2 * Math.PI * toneHz(s.mark)) / SAMPLE_RATE;
    for (let i = 0; i < s.samples; i++) {
      out[at + i] = Math.round(TONE_AMPLITUDE * Math.sin(phase));
      phase += step;
    }
    at += s.samples;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading

/** One run the recogniser heard: an exact mark, a tone, or noise (neither). */
export type Run =
  | { kind: 'exact'; meeting: number; mark: number; from: number; samples: number }
  | { kind: 'tone'; mark: number; from: number; samples: number }
  | { kind: 'noise'; from: number; samples: number };

/**
 * Reads a window's samples. When most loud samples are exact marks, every sample is read exactly
 * (a sample of no mark is noise); otherwise the window is read as tones. Silence is skipped.
 */
export function readAudio(samples: Int16Array): Run[] {
  let loud = 0;
  let exact = 0;
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]!;
    if (v === 0) continue;
    loud++;
    const prev = i > 0 ? samples[i - 1]! : -v;
    const next = i + 1 < samples.length ? samples[i + 1]! : -v;
    if (Math.abs(v) >= MARK_BASE && (prev === -v || next === -v)) exact++;
  }
  if (loud === 0) return [];
  return exact * 2 >= loud ? readExact(samples) : readTones(samples);
}

function readExact(samples: Int16Array): Run[] {
  const runs: Run[] = [];
  let i = 0;
  while (i < samples.length) {
    const level = Math.abs(samples[i]!);
    let j = i + 1;
    while (j < samples.length && Math.abs(samples[j]!) === level) j++;
    if (level >= MARK_BASE && level < MARK_BASE + MAX_MEETING_NUMBERS * MARKS_PER_MEETING) {
      const v = level - MARK_BASE;
      runs.push({
        kind: 'exact',
        meeting: Math.floor(v / MARKS_PER_MEETING),
        mark: v % MARKS_PER_MEETING,
        from: i,
        samples: j - i,
      });
    } else if (level !== 0) pushRun(runs, { kind: 'noise', from: i, samples: j - i });
    i = j;
  }
  return runs;
}

function readTones(samples: Int16Array): Run[] {
  const runs: Run[] = [];
  for (let from = 0; from < samples.length; from += TONE_BLOCK) {
    // A last piece shorter than a quarter block is read with the block before it.
    let to = Math.min(samples.length, from + TONE_BLOCK);
    if (samples.length - to > 0 && samples.length - to < TONE_BLOCK / 4) to = samples.length;
    const n = to - from;
    let energy = 0;
    let crossings = 0;
    let lastSign = 0;
    for (let i = from; i < to; i++) {
      const v = samples[i]!;
      energy += v * v;
      const sign = Math.sign(v);
      if (sign !== 0) {
        if (lastSign !== 0 && sign !== lastSign) crossings++;
        lastSign = sign;
      }
    }
    const rms = Math.sqrt(energy / n);
    if (rms >= 500) {
      const hz = (crossings * SAMPLE_RATE) / (2 * n);
      const k = Math.round((hz - toneHz(0)) / (toneHz(1) - toneHz(0)));
      pushRun(
        runs,
        k >= 0 && k < TONE_MARKS && Math.abs(hz - toneHz(k)) < 125
          ? { kind: 'tone', mark: k, from, samples: n }
          : { kind: 'noise', from, samples: n },
      );
    }
    if (to === samples.length) break;
  }
  return runs;
}

/** Appends a run, merging it into the last one when they are the same mark and adjacent. */
function pushRun(runs: Run[], run: Run): void {
  const last = runs.at(-1);
  if (
    last &&
    last.kind === run.kind &&
    last.from + last.samples === run.from &&
    (run.kind === 'noise' ||
      (run.kind === 'tone' && last.kind === 'tone' && last.mark === run.mark) ||
      (run.kind === 'exact' &&
        last.kind === 'exact' &&
        last.mark === run.mark &&
        last.meeting === run.meeting))
  ) {
    last.samples += run.samples;
    return;
  }
  runs.push(run);
}

/** The recogniser's word for a run, tagged with the call that heard it (`k<call>`). */
export function wordOf(run: Run, call: number): string {
  switch (run.kind) {
    case 'exact':
      return `m${run.meeting}c${run.mark}x${run.samples}k${call}`;
    case 'tone':
      return `t${run.mark}x${run.samples}k${call}`;
    case 'noise':
      return `n${run.samples}k${call}`;
  }
}

export type Word =
  | { kind: 'exact'; meeting: number; mark: number; samples: number; call: number }
  | { kind: 'tone'; mark: number; samples: number; call: number }
  | { kind: 'noise'; samples: number; call: number };

/** Reads one word of a transcript back; null when it is not one the recogniser writes. */
export function parseWord(word: string): Word | null {
  let m = /^m(\d+)c(\d+)x(\d+)k(\d+)$/.exec(word);
  if (m) return { kind: 'exact', meeting: +m[1]!, mark: +m[2]!, samples: +m[3]!, call: +m[4]! };
  m = /^t(\d+)x(\d+)k(\d+)$/.exec(word);
  if (m) return { kind: 'tone', mark: +m[1]!, samples: +m[2]!, call: +m[3]! };
  m = /^n(\d+)k(\d+)$/.exec(word);
  if (m) return { kind: 'noise', samples: +m[1]!, call: +m[2]! };
  return null;
}

/** Samples of a 16-bit mono WAV (any header layout), or null when it is not one. */
export function samplesOfWav(buf: Buffer): Int16Array | null {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE')
    return null;
  let at = 12;
  let pcm16mono = false;
  while (at + 8 <= buf.length) {
    const id = buf.toString('ascii', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    const body = at + 8;
    if (id === 'fmt ' && body + 16 <= buf.length)
      pcm16mono =
        buf.readUInt16LE(body) === 1 &&
        buf.readUInt16LE(body + 2) === 1 &&
        buf.readUInt16LE(body + 14) === 16;
    if (id === 'data') {
      if (!pcm16mono) return null;
      const end = Math.min(buf.length, body + size) & ~1;
      const copy = Buffer.from(buf.subarray(body, end));
      return new Int16Array(copy.buffer, copy.byteOffset, copy.length / 2);
    }
    at = body + size + (size % 2);
  }
  return null;
}
