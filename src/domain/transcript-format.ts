import type { TranscriptSegment } from '../ports.ts';

export type TranscriptFormat = 'txt' | 'vtt' | 'srt';

/** Renders segments as plain text (`[mm:ss] text`), WebVTT or SubRip. Blank segments are omitted. */
export function formatTranscript(segments: TranscriptSegment[], format: TranscriptFormat): string {
  const cues = segments
    .map((s) => ({
      startMs: Math.max(0, s.startMs),
      endMs: Math.max(0, s.endMs, s.startMs),
      text: oneLine(s.text),
    }))
    .filter((s) => s.text !== '');
  switch (format) {
    case 'txt':
      return cues.map((c) => `[${clock(c.startMs)}] ${c.text}\n`).join('');
    case 'vtt': {
      const body = cues.map(
        (c) => `${timestamp(c.startMs, '.')} --> ${timestamp(c.endMs, '.')}\n${escapeVtt(c.text)}\n`,
      );
      return ['WEBVTT\n', ...body].join('\n');
    }
    case 'srt':
      return cues
        .map((c, i) => `${i + 1}\n${timestamp(c.startMs, ',')} --> ${timestamp(c.endMs, ',')}\n${c.text}\n`)
        .join('\n');
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** `mm:ss`, minutes not wrapping at the hour (`75:03`). */
export function clock(ms: number): string {
  const totalSeconds = Math.floor(Math.max(0, ms) / 1000);
  return `${pad(Math.floor(totalSeconds / 60), 2)}:${pad(totalSeconds % 60, 2)}`;
}

function timestamp(ms: number, millisSeparator: '.' | ','): string {
  const whole = Math.round(ms);
  const h = Math.floor(whole / 3_600_000);
  const m = Math.floor((whole % 3_600_000) / 60_000);
  const s = Math.floor((whole % 60_000) / 1000);
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}${millisSeparator}${pad(whole % 1000, 3)}`;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

// A cue payload must not contain `-->`, and `&`/`<` start entities and tags in WebVTT.
function escapeVtt(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
