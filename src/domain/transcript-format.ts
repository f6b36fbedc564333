export type TranscriptFormat = 'txt' | 'vtt' | 'srt' | 'md';

/** A segment to render, with its speaker's name where one is known (W5). */
export interface RenderedSegment {
  startMs: number;
  endMs: number;
  text: string;
  speaker?: { name: string } | null;
}

/**
 * W5: renders segments as plain text (`[mm:ss] Name: text`), WebVTT (`<v Name>`), SubRip (`Name:`)
 * or Markdown (paragraphs by speaker). Blank segments are omitted; a segment without a speaker has
 * no name.
 */
export function formatTranscript(
  segments: RenderedSegment[],
  format: TranscriptFormat,
  title?: string,
): string {
  const cues = segments
    .map((s) => ({
      startMs: Math.max(0, s.startMs),
      endMs: Math.max(0, s.endMs, s.startMs),
      text: oneLine(s.text),
      speaker: s.speaker ? oneLine(s.speaker.name) : null,
    }))
    .filter((s) => s.text !== '');
  const named = (c: { speaker: string | null; text: string }) =>
    c.speaker ? `${c.speaker}: ${c.text}` : c.text;
  switch (format) {
    case 'txt':
      return cues.map((c) => `[${clock(c.startMs)}] ${named(c)}\n`).join('');
    case 'vtt': {
      const body = cues.map(
        (c) =>
          `${timestamp(c.startMs, '.')} --> ${timestamp(c.endMs, '.')}\n${c.speaker ? `<v ${escapeVtt(c.speaker)}>` : ''}${escapeVtt(c.text)}\n`,
      );
      return ['WEBVTT\n', ...body].join('\n');
    }
    case 'srt':
      return cues
        .map((c, i) => `${i + 1}\n${timestamp(c.startMs, ',')} --> ${timestamp(c.endMs, ',')}\n${named(c)}\n`)
        .join('\n');
    case 'md':
      return markdown(paragraphs(cues), title);
  }
}

/** Consecutive segments of one speaker, as one paragraph that starts at its first. */
export function paragraphs(
  cues: Array<{ startMs: number; text: string; speaker: string | null }>,
): Array<{ startMs: number; speaker: string | null; text: string }> {
  const out: Array<{ startMs: number; speaker: string | null; text: string }> = [];
  for (const c of cues) {
    const last = out.at(-1);
    if (last && last.speaker === c.speaker) last.text = `${last.text} ${c.text}`;
    else out.push({ startMs: c.startMs, speaker: c.speaker, text: c.text });
  }
  return out;
}

function markdown(
  paras: Array<{ startMs: number; speaker: string | null; text: string }>,
  title?: string,
): string {
  const lines: string[] = [];
  if (title) lines.push(`# ${escapeMarkdown(oneLine(title))}`, '');
  for (const p of paras) {
    const who = p.speaker ? `**${escapeMarkdown(p.speaker)}** ` : '';
    lines.push(`${who}\\[${clock(p.startMs)}\\]`, '', escapeMarkdown(p.text), '');
  }
  return lines.join('\n');
}

/** Text read as text in Markdown: its markup characters escaped. */
export function escapeMarkdown(text: string): string {
  return text.replace(/([\\`*_[\]<>#|])/g, '\\$1');
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
