import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planWindows, WindowCutter, type CutWindow } from '../src/domain/audio-windows.ts';

const RATE = 16_000;

/** Loud tone everywhere except quiet stretches `[startSec, endSec)` filled with faint noise. */
function toneWithGaps(totalSec: number, gaps: Array<[number, number]>): Int16Array {
  const samples = new Int16Array(Math.round(totalSec * RATE));
  let seed = 12345;
  for (let i = 0; i < samples.length; i++) {
    const t = i / RATE;
    const quiet = gaps.some(([a, b]) => t >= a && t < b);
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    samples[i] = quiet ? (seed % 101) - 50 : Math.round(8000 * Math.sin(2 * Math.PI * 220 * t));
  }
  return samples;
}

type Window = ReturnType<typeof planWindows>[number];

function assertCoversExactly(windows: Window[], total: number): void {
  assert.ok(windows.length > 0);
  assert.equal(windows[0]!.startSample, 0);
  assert.equal(windows.at(-1)!.endSample, total);
  let sum = 0;
  windows.forEach((w, i) => {
    assert.equal(w.index, i);
    assert.ok(w.endSample > w.startSample, `window ${i} is empty`);
    if (i > 0) assert.equal(w.startSample, windows[i - 1]!.endSample, `gap or overlap before window ${i}`);
    sum += w.endSample - w.startSample;
  });
  assert.equal(sum, total);
}

void describe('planWindows', () => {
  void it('L18: a boundary is placed in the quietest stretch near the end of its slot', () => {
    const gaps: Array<[number, number]> = [
      [8.4, 8.7],
      [18.03, 18.38], // not aligned to the 100 ms frame grid
      [29.5, 29.8],
    ];
    const samples = toneWithGaps(35, gaps);
    const windows = planWindows(samples, RATE, 10);
    assert.equal(windows.length, 4);
    assertCoversExactly(windows, samples.length);
    windows.slice(0, -1).forEach((w, i) => {
      const [a, b] = gaps[i]!;
      assert.ok(
        w.endSample >= a * RATE && w.endSample < b * RATE,
        `boundary ${w.endSample / RATE}s not in gap`,
      );
    });
  });

  void it('L18: ties go to the latest quiet frame, at its middle', () => {
    const samples = new Int16Array(25 * RATE);
    const windows = planWindows(samples, RATE, 10);
    assert.deepEqual(
      windows.map((w) => w.endSample),
      [9.95 * RATE, 19.95 * RATE, 25 * RATE],
    );
  });

  void it('L18: boundaries stay within the search stretch of their slot when there is no pause', () => {
    const samples = toneWithGaps(47, []);
    const windows = planWindows(samples, RATE, 10, { searchSeconds: 2, frameMs: 50 });
    assertCoversExactly(windows, samples.length);
    windows.slice(0, -1).forEach((w, i) => {
      const nominal = (i + 1) * 10 * RATE;
      assert.ok(w.endSample <= nominal && w.endSample >= nominal - 2 * RATE);
    });
  });

  void it('L18: no audio is skipped or transcribed twice for awkward lengths and settings', () => {
    for (const [seconds, windowSeconds, search, frameMs] of [
      [61.37, 7, 3, 100],
      [10.001, 10, 3, 100],
      [123.4, 30, 30, 100],
      [5.5, 1, 3, 1000],
      [3, 0.25, 3, 7],
    ] as const) {
      const samples = toneWithGaps(seconds, [[seconds / 3, seconds / 3 + 0.2]]);
      const windows = planWindows(samples, RATE, windowSeconds, { searchSeconds: search, frameMs });
      assertCoversExactly(windows, samples.length);
    }
  });

  void it('L18: a final stretch shorter than a second is merged into the previous window', () => {
    const samples = toneWithGaps(20.5, [[19.9, 20]]);
    const windows = planWindows(samples, RATE, 10);
    assert.equal(windows.length, 2);
    assertCoversExactly(windows, samples.length);
  });

  void it('L18: audio shorter than one window is one window', () => {
    const samples = toneWithGaps(4.2, []);
    assert.deepEqual(planWindows(samples, RATE, 10), [
      { index: 0, startSample: 0, endSample: samples.length },
    ]);
    const exact = toneWithGaps(10, []);
    assert.deepEqual(planWindows(exact, RATE, 10), [{ index: 0, startSample: 0, endSample: exact.length }]);
  });

  void it('L18: empty audio has no windows', () => {
    assert.deepEqual(planWindows(new Int16Array(0), RATE, 10), []);
  });
});

/** Feeds `samples` to a cutter in pieces of the given sizes (cycled), then finishes it. */
function cutInPieces(
  samples: Int16Array,
  windowSeconds: number,
  opts: Parameters<typeof planWindows>[3],
  sizes: number[],
  resume?: { index: number; startSample: number },
): CutWindow[] {
  const cutter = new WindowCutter(RATE, windowSeconds, opts, resume);
  const out: CutWindow[] = [];
  let at = 0;
  for (let i = 0; at < samples.length; i++) {
    const size = sizes[i % sizes.length]!;
    out.push(...cutter.push(samples.subarray(at, at + size)));
    at += size;
  }
  const last = cutter.finish();
  if (last) out.push(last);
  return out;
}

void describe('WindowCutter', () => {
  const cases = [
    [61.37, 7, 3, 100],
    [10.001, 10, 3, 100],
    [123.4, 30, 30, 100],
    [5.5, 1, 3, 1000],
    [3, 0.25, 3, 7],
    [20.5, 10, 3, 100],
    [95.2, 10, 3, 100],
  ] as const;

  void it('J19/L18: windows cut while decoding are exactly those of the whole recording, for any piece sizes', () => {
    for (const [seconds, windowSeconds, search, frameMs] of cases) {
      const samples = toneWithGaps(seconds, [
        [seconds / 3, seconds / 3 + 0.2],
        [seconds / 2, seconds / 2 + 0.15],
      ]);
      const opts = { searchSeconds: search, frameMs };
      const whole = planWindows(samples, RATE, windowSeconds, opts);
      for (const sizes of [[1], [7, 4093], [16_000], [samples.length], [333, 70_001, 1]]) {
        if (sizes[0] === 1 && samples.length > 200_000) continue; // one sample at a time: short cases only
        const cut = cutInPieces(samples, windowSeconds, opts, sizes);
        assert.deepEqual(
          cut.map(({ index, startSample, endSample }) => ({ index, startSample, endSample })),
          whole,
          `${seconds} s in pieces of ${sizes.join(',')}`,
        );
        for (const w of cut) assert.deepEqual(w.samples, samples.slice(w.startSample, w.endSample));
      }
    }
  });

  void it('J19: a cutter resumed after k windows gives the rest of the same windows', () => {
    const samples = toneWithGaps(95.2, [[33, 33.2]]);
    const whole = planWindows(samples, RATE, 10);
    assert.ok(whole.length > 5);
    for (const k of [1, 4, whole.length - 1]) {
      const resumed = cutInPieces(samples, 10, {}, [4093], { index: k, startSample: whole[k]!.startSample });
      assert.deepEqual(
        resumed.map(({ index, startSample, endSample }) => ({ index, startSample, endSample })),
        whole.slice(k),
      );
    }
    // Resumed after the last window: nothing is left.
    assert.deepEqual(
      cutInPieces(samples, 10, {}, [4093], { index: whole.length, startSample: samples.length }),
      [],
    );
  });

  void it('J19: the cutter holds about one window of audio, however long the recording', () => {
    const cutter = new WindowCutter(RATE, 10);
    const piece = toneWithGaps(1, []);
    let windows = 0;
    for (let s = 0; s < 600; s++) windows += cutter.push(piece).length;
    assert.ok(windows >= 58, `windows cut on the way: ${windows}`);
    const held = (cutter as unknown as { buf: Int16Array }).buf.length;
    assert.ok(held <= 13 * RATE, `held ${held} samples`);
  });
});
