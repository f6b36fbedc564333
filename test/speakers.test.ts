import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  attributeSegments,
  participantKey,
  turnsFromTimeline,
  type SpeakerTurn,
  type SpokenSegment,
} from '../src/domain/speakers.ts';

const seg = (
  startMs: number,
  endMs: number,
  text: string,
  extra: Partial<SpokenSegment> = {},
): SpokenSegment => ({
  startMs,
  endMs,
  text,
  speakerKey: null,
  words: null,
  ...extra,
});
const turn = (startMs: number, endMs: number, speakerKey: string): SpeakerTurn => ({
  startMs,
  endMs,
  speakerKey,
});

void describe('speaker attribution (W1, W2)', () => {
  const turns = [turn(0, 4_000, 'ann'), turn(4_000, 9_000, 'bob'), turn(12_000, 15_000, 'ann')];

  void it('W2: a segment inside one turn gets that speaker', () => {
    const [a, b] = attributeSegments([seg(500, 3_000, 'hello'), seg(5_000, 8_000, 'hi there')], turns);
    assert.deepEqual(
      [a, b].map((s) => [s!.speakerKey, s!.attribution]),
      [
        ['ann', 'turn'],
        ['bob', 'turn'],
      ],
    );
  });

  void it('W2: a segment spanning a change is split at the word times', () => {
    const words = [
      { startMs: 3_000, endMs: 3_400, text: 'so' },
      { startMs: 3_500, endMs: 3_900, text: 'agreed' },
      { startMs: 4_100, endMs: 4_500, text: 'yes' },
      { startMs: 4_600, endMs: 5_200, text: 'indeed' },
    ];
    const out = attributeSegments([seg(3_000, 5_200, 'so agreed yes indeed', { words })], turns);
    assert.deepEqual(out, [
      { startMs: 3_000, endMs: 3_900, text: 'so agreed', speakerKey: 'ann', attribution: 'split' },
      { startMs: 4_100, endMs: 5_200, text: 'yes indeed', speakerKey: 'bob', attribution: 'split' },
    ]);
  });

  void it('W2: without word times, the speaker of the largest overlap, marked so', () => {
    const [s] = attributeSegments([seg(3_000, 6_000, 'so agreed yes indeed')], turns);
    assert.equal(s!.speakerKey, 'bob');
    assert.equal(s!.attribution, 'overlap');
  });

  void it('W1: a segment no turn overlaps, or with no timeline at all, has no speaker (never invented)', () => {
    const [gap] = attributeSegments([seg(9_500, 11_500, 'between turns')], turns);
    assert.equal(gap!.speakerKey, null);
    assert.equal(gap!.attribution, null);
    const [none] = attributeSegments([seg(0, 1_000, 'alone')], []);
    assert.equal(none!.speakerKey, null);
  });

  void it("W1: a segment's own source (track, channel, cluster) wins over the timeline", () => {
    const [s] = attributeSegments([seg(500, 3_000, 'mine', { speakerKey: 'track:mic' })], turns);
    assert.deepEqual([s!.speakerKey, s!.attribution], ['track:mic', 'source']);
  });

  void it('W2: a word between two turns goes to the nearest one; a split of one speaker is not marked split', () => {
    const words = [
      { startMs: 8_000, endMs: 8_500, text: 'one' },
      { startMs: 9_600, endMs: 9_900, text: 'two' },
    ];
    const out = attributeSegments([seg(8_000, 9_900, 'one two', { words })], turns);
    assert.deepEqual(
      out.map((s) => [s.speakerKey, s.attribution, s.text]),
      [['bob', 'turn', 'one two']],
    );
  });

  void it('W2: many turns and segments are attributed in one pass (overlapping turns included)', () => {
    const many: SpeakerTurn[] = [];
    for (let i = 0; i < 5_000; i++) many.push(turn(i * 1_000, i * 1_000 + 1_000, i % 2 ? 'b' : 'a'));
    many.push(turn(0, 5_000_000, 'z'));
    const segments = Array.from({ length: 5_000 }, (_, i) => seg(i * 1_000 + 100, i * 1_000 + 900, `w${i}`));
    const out = attributeSegments(segments, many);
    assert.equal(out.length, 5_000);
    // Each segment overlaps its own turn and the long one for the same time: the tie goes to the
    // turn met first (the long one starts at 0).
    assert.ok(out.every((s) => s.attribution === 'overlap'));
  });
});

void describe('speaker timelines (R11)', () => {
  void it('R11: negative offsets start at 0, open turns end at the next, turns before the recording are dropped', () => {
    const out = turnsFromTimeline(
      [
        { speakerKey: 'early', startS: -9, endS: -3 },
        { speakerKey: 'ann', startS: -2.5, endS: null },
        { speakerKey: 'bob', startS: 4, endS: 7.25 },
        { speakerKey: 'ann', startS: 8, endS: null },
      ],
      20_000,
    );
    assert.deepEqual(out, [
      { startMs: 0, endMs: 4_000, speakerKey: 'ann' },
      { startMs: 4_000, endMs: 7_250, speakerKey: 'bob' },
      { startMs: 8_000, endMs: 20_000, speakerKey: 'ann' },
    ]);
  });

  void it('R11: a re-join as a new participant object is the same speaker (same e-mail, else same name)', () => {
    assert.equal(
      participantKey({ id: 100, name: 'Ann Lee', email: null }),
      participantKey({ id: 200, name: ' ann  lee', email: null }),
    );
    assert.equal(
      participantKey({ id: 1, name: 'Ann', email: 'ANN@x.org' }),
      participantKey({ id: 2, name: 'Ann (phone)', email: 'ann@x.org' }),
    );
    assert.notEqual(
      participantKey({ id: 1, name: null, email: null }),
      participantKey({ id: 2, name: null, email: null }),
    );
  });
});
