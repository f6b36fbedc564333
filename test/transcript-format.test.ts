import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatTranscript } from '../src/domain/transcript-format.ts';
import type { TranscriptSegment } from '../src/ports.ts';

const segments: TranscriptSegment[] = [
  { startMs: 1000, endMs: 2500, text: 'Hello everyone.' },
  { startMs: 2500, endMs: 2600, text: '   ' },
  { startMs: 65_432, endMs: 3_723_004, text: 'We agreed  on\nthe <budget> --> next.' },
];

void describe('formatTranscript', () => {
  void it('renders plain text with [mm:ss] stamps', () => {
    assert.equal(
      formatTranscript(segments, 'txt'),
      '[00:01] Hello everyone.\n[01:05] We agreed on the <budget> --> next.\n',
    );
  });

  void it('renders WebVTT', () => {
    assert.equal(
      formatTranscript(segments, 'vtt'),
      'WEBVTT\n\n' +
        '00:00:01.000 --> 00:00:02.500\nHello everyone.\n\n' +
        '00:01:05.432 --> 01:02:03.004\nWe agreed on the &lt;budget&gt; --&gt; next.\n',
    );
  });

  void it('renders SubRip', () => {
    assert.equal(
      formatTranscript(segments, 'srt'),
      '1\n00:00:01,000 --> 00:00:02,500\nHello everyone.\n\n' +
        '2\n00:01:05,432 --> 01:02:03,004\nWe agreed on the <budget> --> next.\n',
    );
  });

  void it('renders an empty transcript', () => {
    assert.equal(formatTranscript([], 'vtt'), 'WEBVTT\n');
    assert.equal(formatTranscript([], 'srt'), '');
    assert.equal(formatTranscript([], 'txt'), '');
  });
});
