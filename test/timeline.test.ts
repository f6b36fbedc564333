import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cutStretch,
  decodeEnergy,
  encodeEnergy,
  energyProfile,
  frontierStep,
  mapPosition,
  planRepair,
  repairRegions,
  splitForRecognisers,
  splitGap,
  type CutOptions,
  type RepairInput,
  type Span,
  repairCut,
  repairedWindowStatus,
} from '../src/domain/timeline.ts';

const S = 16_000;
const OPTS: CutOptions = { slot: 60 * S, search: 3 * S, frame: 1600, minTail: S };

/** A chunk of audio at `start` with a constant level, and a quiet 100 ms at `quietAt` (relative). */
function chunk(start: number, seconds: number, quietAt: number | null = null): Span {
  const samples = new Int16Array(seconds * S).fill(1000);
  if (quietAt !== null) samples.fill(0, quietAt, quietAt + 1600);
  return { start, length: samples.length, audio: true, energy: energyProfile(samples) };
}

function silence(start: number, seconds: number): Span {
  return { start, length: seconds * S, audio: false, energy: null };
}

/** Five-second chunks covering [0, seconds), each with its own quiet frame near its end. */
function speech(seconds: number, from = 0): Span[] {
  const out: Span[] = [];
  for (let t = from; t < from + seconds; t += 5) out.push(chunk(t * S, 5, 4 * S));
  return out;
}

void describe('timeline rules (pure)', () => {
  void it('L18: energy profiles survive storage and a slot boundary lands in the quiet frame', () => {
    const e = energyProfile(new Int16Array(800).fill(10));
    assert.equal(e.length, 5);
    assert.deepEqual([...decodeEnergy(encodeEnergy(e))!], [...e]);
    const spans = speech(65);
    const { windows, cut } = cutStretch(spans, 0, 65 * S, OPTS, false);
    assert.equal(windows.length, 1);
    // The quiet frame of the chunk [55, 60) is at 59 s: the boundary is in its middle.
    assert.equal(windows[0]!.end, 59 * S + 800);
    assert.equal(cut, windows[0]!.end);
  });

  void it('L21: a long silent stretch becomes one window, not one per slot', () => {
    const spans = [silence(0, 3600), ...speech(20, 3600)];
    const { windows, cut } = cutStretch(spans, 0, 3620 * S, OPTS, false);
    assert.deepEqual(windows, [{ start: 0, end: 3600 * S, audio: false }]);
    assert.equal(cut, 3600 * S);
    const last = cutStretch(spans, cut, 3620 * S, OPTS, true);
    assert.deepEqual(last.windows, [{ start: 3600 * S, end: 3620 * S, audio: true }]);
  });

  void it('L18: the final cut covers the rest and a short tail joins the window before it', () => {
    const spans = speech(120.5);
    const { windows } = cutStretch(spans, 0, 120.5 * S, OPTS, true);
    assert.equal(windows.at(-1)!.end, 120.5 * S);
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i]!.start, windows[i - 1]!.end);
    assert.ok(windows.at(-1)!.end - windows.at(-1)!.start >= S, 'no tail shorter than a second');
  });

  void it('L24: the last stretch is shared between recognisers at quiet frames, never in pieces too short to be worth one', () => {
    // 27 s of speech, a quiet frame 4 s into each 5 s chunk.
    const spans = speech(27);
    const whole = { start: 0, end: 27 * S, audio: true };
    const minPiece = 8 * S;
    const two = splitForRecognisers(spans, whole, OPTS, 2, minPiece);
    assert.equal(two.length, 2);
    assert.equal(two[0]!.start, 0);
    assert.equal(two[0]!.end, two[1]!.start, 'no gap and no overlap');
    assert.equal(two[1]!.end, 27 * S);
    // Near the middle, in a quiet frame (14 s is the one closest to 13.5 s).
    assert.equal(two[0]!.end, 14 * S + 800);
    const three = splitForRecognisers(spans, whole, OPTS, 3, minPiece);
    assert.deepEqual(
      three.map((w) => w.end),
      [9 * S + 800, 19 * S + 800, 27 * S],
    );
    // Four would be under 8 s each: three at most. One recogniser, or a short stretch: whole.
    assert.equal(splitForRecognisers(spans, whole, OPTS, 4, minPiece).length, 3);
    assert.deepEqual(splitForRecognisers(spans, whole, OPTS, 1, minPiece), [whole]);
    const short = { start: 0, end: 15 * S, audio: true };
    assert.deepEqual(splitForRecognisers(spans, short, OPTS, 2, minPiece), [short]);
    const silent = { start: 0, end: 27 * S, audio: false };
    assert.deepEqual(splitForRecognisers([silence(0, 27)], silent, OPTS, 2, minPiece), [silent]);
  });

  void it('L19: the frontier waits for a missing chunk for the patience, then reserves the run', () => {
    const base = {
      nextSeq: 3,
      atFrontier: 'absent' as const,
      nextStored: 7,
      expectedEnd: null,
      patienceMs: 30_000,
    };
    assert.deepEqual(frontierStep({ ...base, final: false, waitedMs: 1000 }), { kind: 'wait' });
    assert.deepEqual(frontierStep({ ...base, final: false, waitedMs: 30_000 }), {
      kind: 'reserve',
      endSeq: 7,
    });
    assert.deepEqual(frontierStep({ ...base, final: true, waitedMs: null }), { kind: 'reserve', endSeq: 7 });
    assert.deepEqual(
      frontierStep({ ...base, nextStored: null, expectedEnd: 10, final: true, waitedMs: null }),
      { kind: 'reserve', endSeq: 10 },
      'L20: at close-out the declared count reserves what never came',
    );
    assert.deepEqual(frontierStep({ ...base, nextStored: null, final: false, waitedMs: 99_999 }), {
      kind: 'wait',
    });
    assert.deepEqual(frontierStep({ ...base, atFrontier: 'ready', final: false, waitedMs: null }), {
      kind: 'place',
    });
  });

  void it('L19: a reserved run splits around the chunk that arrived, positions unchanged', () => {
    const run = { firstSeq: 10, endSeq: 14, start: 50 * S, samples: 20 * S };
    const parts = splitGap(run, 12);
    assert.deepEqual(parts.before, { firstSeq: 10, endSeq: 12, start: 50 * S, samples: 10 * S });
    assert.deepEqual(parts.own, { firstSeq: 12, endSeq: 13, start: 60 * S, samples: 5 * S });
    assert.deepEqual(parts.after, { firstSeq: 13, endSeq: 14, start: 65 * S, samples: 5 * S });
    assert.throws(() => splitGap(run, 14));
  });

  void it('L19: positions after a resized stretch move by the difference; inside it they have none', () => {
    const resizes = [{ seq: 3, start: 15 * S, oldLength: 5 * S, newLength: 3 * S }];
    assert.equal(mapPosition(resizes, 10 * S), 10 * S);
    assert.equal(mapPosition(resizes, 15 * S), 15 * S);
    assert.equal(mapPosition(resizes, 17 * S), null);
    assert.equal(mapPosition(resizes, 20 * S), 18 * S);
  });

  void it('L19: recut replaces every window the arrived chunk touches and cuts their stretch again', () => {
    // Windows [0, 59.05) and [59.05, 118.05): chunk 11 ([55, 60)) arrives, a little shorter.
    const b1 = 59 * S + 800;
    const input: RepairInput = {
      mode: 'recut',
      closed: false,
      resizes: [{ seq: 11, start: 55 * S, oldLength: 5 * S, newLength: 4 * S }],
      windows: [
        { id: 'a', start: 0, end: b1, status: 'transcribed' },
        { id: 'b', start: b1, end: 118 * S + 800, status: 'transcribed' },
      ],
      cut: 118 * S + 800,
      placed: 130 * S,
    };
    assert.deepEqual(repairRegions(input), [{ from: 0, to: 118 * S + 800, kind: 'recut' }]);
    const spans = [...speech(55), chunk(55 * S, 4, 3 * S), ...speech(70, 59).map((s) => ({ ...s }))];
    const plan = planRepair(input, spans, OPTS);
    assert.deepEqual(plan.supersede, ['a', 'b']);
    assert.equal(plan.create[0]!.start, 0);
    assert.equal(plan.create.at(-1)!.end, 117 * S + 800, 'the region ends one second earlier');
    assert.equal(plan.cut, 117 * S + 800);
    for (let i = 1; i < plan.create.length; i++) assert.equal(plan.create[i]!.start, plan.create[i - 1]!.end);
    assert.ok(plan.create.every((w) => w.kind === 'transcribe'));
  });

  void it('L19: a chunk whose stretch the cut has not reached needs no windows yet', () => {
    const input: RepairInput = {
      mode: 'recut',
      closed: false,
      resizes: [{ seq: 30, start: 150 * S, oldLength: 5 * S, newLength: 5 * S }],
      windows: [{ id: 'a', start: 60 * S, end: 119 * S, status: 'transcribed' }],
      cut: 119 * S,
      placed: 160 * S,
    };
    assert.deepEqual(repairRegions(input), []);
    assert.deepEqual(planRepair(input, [], OPTS), { supersede: [], create: [], cut: 119 * S });
  });

  void it('L19: splice keeps the segments around a chunk that arrived after its audio was deleted', () => {
    const input: RepairInput = {
      mode: 'splice',
      closed: true,
      resizes: [{ seq: 3, start: 15 * S, oldLength: 5 * S, newLength: 6 * S }],
      windows: [{ id: 'w', start: 0, end: 59 * S, status: 'transcribed' }],
      cut: 59 * S,
      placed: 59 * S,
    };
    const plan = planRepair(input, [chunk(15 * S, 6)], OPTS);
    assert.deepEqual(plan.supersede, ['w']);
    assert.deepEqual(plan.create, [
      {
        start: 0,
        end: 15 * S,
        kind: 'keep',
        keep: { windowId: 'w', status: 'transcribed', from: 0, to: 15 * S, straddleFrom: null },
      },
      { start: 15 * S, end: 21 * S, kind: 'transcribe' },
      {
        start: 21 * S,
        end: 60 * S,
        kind: 'keep',
        keep: { windowId: 'w', status: 'transcribed', from: 20 * S, to: 59 * S, straddleFrom: 15 * S },
      },
    ]);
    assert.equal(plan.cut, 60 * S);
  });

  void it('L16/L19: a splice into a window still being transcribed transcribes that window whole, with no piece of it kept without words (found by the soak)', () => {
    // Windows [0, 60) transcribed and [60, 120) still in retry (its audio kept); the reserved
    // stretch [70, 80) gets its late chunk after the audio of the rest was deleted.
    const input: RepairInput = {
      mode: 'splice',
      closed: true,
      resizes: [{ seq: 14, start: 70 * S, oldLength: 10 * S, newLength: 12 * S }],
      windows: [
        { id: 'done', start: 0, end: 60 * S, status: 'transcribed' },
        { id: 'retrying', start: 60 * S, end: 120 * S, status: 'pending' },
      ],
      cut: 120 * S,
      placed: 120 * S,
    };
    assert.deepEqual(repairRegions(input), [{ from: 60 * S, to: 120 * S, kind: 'splice' }]);
    const plan = planRepair(input, [...speech(60, 60), chunk(70 * S, 12)], OPTS);
    assert.deepEqual(plan.supersede, ['retrying']);
    // The whole stretch is transcribed, cut as any stretch is (a window of at most a slot and its
    // tail), with no gap and no piece kept.
    assert.deepEqual(
      plan.create.map((w) => w.kind),
      plan.create.map(() => 'transcribe'),
    );
    assert.equal(plan.create[0]?.start, 60 * S);
    assert.equal(plan.create.at(-1)?.end, 122 * S);
    for (let i = 1; i < plan.create.length; i++) assert.equal(plan.create[i]!.start, plan.create[i - 1]!.end);
    assert.ok(!plan.create.some((w) => w.kind === 'keep'), 'no piece of a pending window is kept');
    // Two late chunks in one pending window make one region.
    const two = {
      ...input,
      resizes: [...input.resizes, { seq: 20, start: 100 * S, oldLength: 5 * S, newLength: 5 * S }],
    };
    assert.deepEqual(repairRegions(two), [{ from: 60 * S, to: 120 * S, kind: 'splice' }]);
  });

  void it('L19: a long gap of missing chunks spliced in late is cut into windows of the usual length, not sent as one recognition (found by the simulation: 60 s in one request never beat the recogniser’s timeout)', () => {
    // The meeting's first minute never arrived; its window is one missing stretch. Its twelve
    // chunks arrive after the close-out deleted the audio.
    const input: RepairInput = {
      mode: 'splice',
      closed: true,
      resizes: Array.from({ length: 12 }, (_, i) => ({
        seq: i,
        start: i * 5 * S,
        oldLength: 5 * S,
        newLength: 5 * S,
      })),
      windows: [{ id: 'gap', start: 0, end: 60 * S, status: 'missing' }],
      cut: 60 * S,
      placed: 60 * S,
    };
    const short: CutOptions = { ...OPTS, slot: 8 * S };
    const plan = planRepair(input, speech(60), short);
    assert.deepEqual(plan.supersede, ['gap']);
    assert.ok(plan.create.length >= 6, `cut into windows (${plan.create.length})`);
    for (const w of plan.create) {
      assert.equal(w.kind, 'transcribe');
      assert.ok(w.end - w.start <= short.slot + short.search + short.minTail, `${(w.end - w.start) / S} s`);
    }
    assert.equal(plan.create[0]?.start, 0);
    assert.equal(plan.create.at(-1)?.end, 60 * S);
  });

  void it('L19: new audio after a closed timeline is cut with the last window while the audio is stored', () => {
    const input: RepairInput = {
      mode: 'recut',
      closed: true,
      resizes: [],
      windows: [{ id: 'last', start: 59 * S, end: 80 * S, status: 'transcribed' }],
      cut: 80 * S,
      placed: 85 * S,
    };
    const plan = planRepair(input, speech(26, 59), OPTS);
    assert.deepEqual(plan.supersede, ['last']);
    assert.deepEqual(plan.create, [{ start: 59 * S, end: 85 * S, kind: 'transcribe' }]);
    assert.equal(plan.cut, 85 * S);
    const spliced = planRepair({ ...input, mode: 'splice' }, [chunk(80 * S, 5)], OPTS);
    assert.deepEqual(spliced.supersede, []);
    assert.deepEqual(spliced.create, [{ start: 80 * S, end: 85 * S, kind: 'transcribe' }]);
  });
});

void it('L19: a repair’s new window is transcribed when recognised, missing without audio, and a kept piece keeps its window’s settled status (a piece of a pending window fails as deleted)', () => {
  assert.equal(repairedWindowStatus('transcribe', undefined).status, 'transcribed');
  assert.equal(repairedWindowStatus('silent', undefined).status, 'missing');
  const failed = { status: 'failed', failure_code: 'asr.bad', failure_message: 'no' } as const;
  assert.deepEqual(repairedWindowStatus('keep', failed), {
    status: 'failed',
    failureCode: 'asr.bad',
    failureMessage: 'no',
  });
  const done = { status: 'transcribed', failure_code: null, failure_message: null } as const;
  assert.deepEqual(repairedWindowStatus('keep', done), {
    status: 'transcribed',
    failureCode: null,
    failureMessage: null,
  });
  const pending = { status: 'pending', failure_code: null, failure_message: null } as const;
  assert.deepEqual(repairedWindowStatus('keep', pending), {
    status: 'failed',
    failureCode: 'audio.deleted',
    failureMessage: 'its audio was deleted before it was transcribed',
  });
});

void it('L19: a repair sets the cut where its plan says when the old cut lay inside a chain’s reserved stretch, and never moves it back otherwise', () => {
  const chains = [{ start: 1000, oldLength: 500 }];
  assert.deepEqual(repairCut(chains, 1200, 1100), { cut: 1100, atLeast: false });
  assert.deepEqual(repairCut(chains, 1000, 1800), { cut: 1800, atLeast: true });
  assert.deepEqual(repairCut(chains, 1500, 900), { cut: 900, atLeast: true });
});
