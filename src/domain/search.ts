/**
 * Issue 18 (O4, O5): the rules of search and ask that need no database: which text search
 * configuration a meeting's language gets, what of the minutes is searchable, how highlights and
 * cursors are written, and which citations of an answer may stand.
 */

import { isNearDuplicate, wordsOf } from './near-duplicate.ts';

/** English meetings (and meetings of no stated language) are stemmed; others are matched word for word. */
export function searchConfigFor(language: string | null): 'english' | 'simple' {
  if (language === null || language.trim() === '') return 'english';
  return /^en\b|^en[-_]|^english$/i.test(language.trim()) ? 'english' : 'simple';
}

/** The searchable lines of stored minutes: the summary's sentences, the decisions, the action items. */
export function minutesLines(minutes: unknown): string[] {
  if (typeof minutes !== 'object' || minutes === null) return [];
  const m = minutes as { summary?: unknown; decisions?: unknown; actionItems?: unknown };
  const list = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const summary = typeof m.summary === 'string' ? m.summary.split(/(?<=[.!?])\s+/) : [];
  return [...summary, ...list(m.decisions), ...list(m.actionItems)]
    .map((line) => line.replace(/\s+/g, ' ').trim())
    .filter((line) => /[\p{L}\p{N}]/u.test(line));
}

export interface SearchFilters {
  from?: Date;
  to?: Date;
  source?: string;
  status?: string;
  /** W6: only what this speaker said (their name, any case). */
  speaker?: string;
}

/** A hit: one transcript segment (its time) or one line of the minutes, with its matched words. */
export interface SearchHit extends Highlighted {
  kind: 'segment' | 'minutes';
  startMs: number | null;
  endMs: number | null;
  /** W6: who said it, where a source knows (null for minutes and unknown speakers). */
  speaker?: string | null;
}

/**
 * O4/W6: a transcript as search passages: stretches of at most `maxLines` consecutive lines of one
 * speaker (or of no known speaker) within `maxMs`, each with its lines' times ([startMs, endMs,
 * characters]) for the hit.
 */
export function transcriptPassages(
  lines: Array<{ startMs: number; endMs: number; text: string; speaker: { name: string } | null }>,
  maxLines: number,
  maxMs: number,
): Array<{
  startMs: number;
  endMs: number;
  text: string;
  speaker: string | null;
  segments: StretchSegments;
}> {
  const out: Array<{
    startMs: number;
    endMs: number;
    text: string;
    speaker: string | null;
    segments: StretchSegments;
  }> = [];
  for (const l of lines) {
    const text = l.text;
    if (!/[\p{L}\p{N}]/u.test(text)) continue;
    const speaker = l.speaker?.name ?? null;
    const last = out.at(-1);
    if (
      last &&
      last.speaker === speaker &&
      last.segments.length < maxLines &&
      l.startMs - last.startMs < maxMs
    ) {
      last.text = `${last.text} ${text}`;
      last.endMs = Math.max(last.endMs, l.endMs);
      last.segments.push([l.startMs, l.endMs, [...text].length]);
    } else
      out.push({
        startMs: l.startMs,
        endMs: l.endMs,
        text,
        speaker,
        segments: [[l.startMs, l.endMs, [...text].length]],
      });
  }
  return out;
}

/** How a stretch of transcript joins its segments: [startMs, endMs, characters] each, one space apart. */
export type StretchSegments = Array<[number, number, number]>;

/**
 * O4: the hit a matched stretch of transcript gives: the first of its segments that holds a
 * matched word (the first segment when none does), with that segment's time, text and matches.
 * Lengths count characters (code points), as Postgres does.
 */
export function segmentHit(
  marked: string,
  segments: StretchSegments,
  marks: { start: string; stop: string },
): SearchHit {
  const whole = parseMarks(marked, marks);
  const chars = [...whole.text];
  // Highlight offsets in code points, from the UTF-16 offsets parseMarks gives.
  const toChar = new Map<number, number>();
  let units = 0;
  chars.forEach((c, i) => {
    toChar.set(units, i);
    units += c.length;
  });
  toChar.set(units, chars.length);
  const found = whole.highlights.map((h) => ({
    start: toChar.get(h.start) ?? 0,
    end: toChar.get(h.end) ?? 0,
  }));
  let at = 0;
  const ranges = segments.map(([startMs, endMs, length]) => {
    const range = { startMs, endMs, from: at, to: at + length };
    at += length + 1;
    return range;
  });
  const chosen = ranges.find((r) => found.some((h) => h.start >= r.from && h.start < r.to)) ?? ranges[0];
  if (!chosen) return { kind: 'segment', startMs: null, endMs: null, ...whole };
  const text = chars.slice(chosen.from, chosen.to).join('');
  const unitsBefore = (i: number) => chars.slice(chosen.from, chosen.from + i).join('').length;
  const highlights = found
    .filter((h) => h.start >= chosen.from && h.start < chosen.to)
    .map((h) => ({
      start: unitsBefore(h.start - chosen.from),
      end: unitsBefore(Math.min(h.end, chosen.to) - chosen.from),
    }));
  return { kind: 'segment', startMs: chosen.startMs, endMs: chosen.endMs, text, highlights };
}

export interface SearchResult {
  meeting: { id: string; title: string; createdAt: Date; source: string; status: string };
  score: number;
  hitCount: number;
  hits: SearchHit[];
}

export interface SearchPage {
  results: SearchResult[];
  more: boolean;
}

export interface Highlighted {
  text: string;
  /** [start, end) character offsets of the matched words in `text`. */
  highlights: Array<{ start: number; end: number }>;
}

/** Turns a marked passage into its plain text and the offsets of its matches. */
export function parseMarks(marked: string, marks: { start: string; stop: string }): Highlighted {
  let text = '';
  const highlights: Highlighted['highlights'] = [];
  let open: number | null = null;
  for (const ch of marked) {
    if (ch === marks.start) open = text.length;
    else if (ch === marks.stop) {
      if (open !== null && text.length > open) highlights.push({ start: open, end: text.length });
      open = null;
    } else text += ch;
  }
  return { text, highlights };
}

/** The snippet as HTML: the text escaped, its matches in <mark>. */
export function snippetHtml({ text, highlights }: Highlighted): string {
  const esc = (s: string) =>
    s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  let out = '';
  let at = 0;
  for (const h of highlights) {
    out += esc(text.slice(at, h.start)) + '<mark>' + esc(text.slice(h.start, h.end)) + '</mark>';
    at = h.end;
  }
  return out + esc(text.slice(at));
}

export const SEARCH_PAGE_DEFAULT = 20;
export const SEARCH_PAGE_MAX = 50;
export const SEARCH_QUERY_MAX = 500;

/**
 * O5: the passage numbers an answer cites, as `[n]` or `[n, m]`, in order of first mention, keeping
 * only those it was given; and the answer with every other citation mark taken out, so it never
 * cites a passage it was not given.
 */
export function citationsOf(answer: string, given: number): { text: string; cited: number[] } {
  const cited: number[] = [];
  const text = answer
    .replace(/\[(\d+(?:\s*,\s*\d+)*)\]/g, (_, list: string) => {
      const kept = list
        .split(',')
        .map((n) => Number(n.trim()))
        .filter((n) => Number.isInteger(n) && n >= 1 && n <= given);
      for (const n of kept) if (!cited.includes(n)) cited.push(n);
      return kept.length > 0 ? `[${kept.join(', ')}]` : '';
    })
    .replace(/[ \t]+([.,;:!?])/g, '$1')
    .replace(/[ \t]{2,}/g, ' ')
    .trim();
  return { text, cited };
}

/**
 * O5: a question searched as any of its words (websearch `or`), not all of them: "what did we
 * decide about the vendor contract" must find the passage that says "we agreed to renew the vendor
 * contract". Ranking puts passages with more of the words first; stop words match nothing.
 */
export function questionQuery(question: string): string {
  const words = (question.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter(
    (w) => w !== 'or' && w !== 'and',
  );
  return [...new Set(words)].join(' or ');
}

/**
 * O4: a meeting's hits without minutes that only repeat what another hit says. Extractive minutes
 * quote the transcript, so a sentence can come back as its segment, as a summary line and as a
 * decision: the segment, which has a time to open, is kept, and a minutes line that is a near
 * duplicate of a hit before it or of any segment hit is dropped. Segment hits are never dropped:
 * the same words said twice are two moments.
 */
export function withoutRepeatedMinutes(hits: readonly SearchHit[]): SearchHit[] {
  const said = hits.filter((h) => h.kind === 'segment').map((h) => wordsOf(h.text));
  const kept: Array<Set<string>> = [];
  return hits.filter((h) => {
    if (h.kind !== 'minutes') return true;
    const words = wordsOf(h.text);
    if ([...said, ...kept].some((w) => isNearDuplicate(w, words))) return false;
    kept.push(words);
    return true;
  });
}
