import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { formatSegments, needsFormatting, SENTENCE_PAUSE_MS } from '../src/domain/readable-text.ts';
import type { TranscriptSegment } from '../src/ports.ts';

/** Real PocketSphinx output: four sentences with pauses between them (the fixture says how it was made). */
const recorded = (
  JSON.parse(readFileSync(path.join(import.meta.dirname, 'fixtures/pocketsphinx-meeting.json'), 'utf8')) as {
    segments: TranscriptSegment[];
  }
).segments;

void describe('E2: readable text from a recogniser without case or punctuation', () => {
  void it('E2: real PocketSphinx output becomes sentences: capitals at pauses, "I", the vocabulary’s names, full stops', () => {
    const out = formatSegments(recorded, ['London', 'Monday', 'API']);
    assert.deepEqual(
      out.map((s) => s.text),
      [
        'I think the budget for London is fine.',
        'We will ship to release on Monday.',
        'Does anyone have questions about the roadmap.',
        'I will send the minutes to the marketing team.',
      ],
    );
    assert.ok(out.every((s) => s.formatted));
    assert.deepEqual(
      out.map((s) => s.rawText),
      recorded.map((s) => s.text),
      'the recogniser’s own text is kept beside the formatted one',
    );
    assert.deepEqual(
      out.map((s) => [s.startMs, s.endMs, s.words]),
      recorded.map((s) => [s.startMs, s.endMs, s.words]),
      'times and words are untouched',
    );
  });

  void it('E2: one sentence cut into segments without a pause (a window boundary) stays one sentence', () => {
    const [first] = recorded;
    assert.ok(first?.words && first.words.length >= 6);
    const half = 3;
    const a = {
      startMs: first.startMs,
      endMs: first.words[half - 1]!.endMs,
      text: '',
      words: first.words.slice(0, half),
    };
    a.text = a.words.map((w) => w.text).join(' ');
    const b = {
      startMs: first.words[half]!.startMs,
      endMs: first.endMs,
      text: '',
      words: first.words.slice(half),
    };
    b.text = b.words.map((w) => w.text).join(' ');
    assert.ok(b.startMs - a.endMs < SENTENCE_PAUSE_MS, 'the fixture has no pause inside its first sentence');
    const out = formatSegments([a, b], ['London']);
    assert.equal(`${out[0]!.text} ${out[1]!.text}`, 'I think the budget for London is fine.');
  });

  void it('E2: a pause between two timed words inside one segment ends a sentence there', () => {
    const [first, second] = recorded;
    assert.ok(first?.words && second?.words);
    const joined = {
      startMs: first.startMs,
      endMs: second.endMs,
      text: `${first.text} ${second.text}`,
      words: [...first.words, ...second.words],
    };
    const [out] = formatSegments([joined], ['London', 'Monday']);
    assert.equal(out!.text, 'I think the budget for London is fine. We will ship to release on Monday.');
  });

  void it('E2: another speaker starts a sentence even without a pause; "i\'m" and a name of two words', () => {
    const out = formatSegments(
      [
        { startMs: 0, endMs: 900, text: "i'm with acme corp", speaker: { name: 'Ann' } },
        { startMs: 950, endMs: 1800, text: 'welcome to acme corp i guess', speaker: { name: 'Bob' } },
      ],
      ['Acme', 'Acme Corp', 'lowercase term'],
    );
    assert.deepEqual(
      out.map((s) => s.text),
      ["I'm with Acme Corp.", 'Welcome to Acme Corp I guess.'],
    );
  });

  void it('E2: text with capitals or punctuation (Whisper, a correction) is left as it was, and said so', () => {
    const segments = [
      { startMs: 0, endMs: 1000, text: 'So I think we are done.' },
      { startMs: 3000, endMs: 4000, text: 'ok then' },
      { startMs: 4100, endMs: 5000, text: 'See you, Monday' },
    ];
    const out = formatSegments(segments, ['Monday']);
    assert.deepEqual(
      out.map((s) => [s.text, s.formatted, s.rawText]),
      [
        ['So I think we are done.', false, undefined],
        ['Ok then', true, 'ok then'],
        ['See you, Monday', false, undefined],
      ],
    );
    assert.equal(needsFormatting('12 34'), false, 'no letters: nothing to format');
    assert.equal(needsFormatting('c3x5 c4x5'), false, 'a code or a number is written as it was');
    assert.equal(needsFormatting('ünter straße'), true);
  });
});
