/**
 * E2: text people can read from a recogniser that gives neither case nor punctuation
 * (PocketSphinx: `so i think the budget is fine we ship on monday`). A sentence starts where the
 * speaker paused or changed, and ends before it; "i" is a capital; the workspace's vocabulary
 * (W7) keeps its own spelling. Text that already has a capital or a punctuation mark (Whisper, a
 * person's correction) is left as it is. Pure: applied when a transcript is read, the stored text
 * is never changed, and the raw text goes out beside the formatted one.
 */

/** A pause at least this long between two words ends a sentence. PocketSphinx cuts segments at 0.6 s. */
export const SENTENCE_PAUSE_MS = 600;

export interface FormattableSegment {
  startMs: number;
  endMs: number;
  text: string;
  words?: Array<{ startMs: number; endMs: number; text: string }> | null;
  speaker?: { name: string } | null;
}

export type Formatted<T> = T & {
  /** The recogniser's own text, when `text` was formatted from it. */
  rawText?: string;
  /** Whether `text` was formatted here (false: the recogniser's or a person's text as it was). */
  formatted: boolean;
};

/**
 * Whether a recogniser's text is formatted: words of lower-case letters only (with apostrophes and
 * hyphens), as a dictionary recogniser says them. A capital, a punctuation mark or a digit means
 * someone already chose how it is written (Whisper, a person's correction, a code or a number).
 */
export function needsFormatting(text: string): boolean {
  return /\p{Ll}/u.test(text) && /^[\p{Ll}'’\-\s]+$/u.test(text);
}

const PRONOUN_I = /^i(?:'(?:m|ll|ve|d))?$/;

/**
 * The vocabulary's terms that carry a capital, by their words in lower case: `Acme Corp` is
 * `['acme', 'corp']`. Longest first, so `New York Times` wins over `New York`.
 */
function vocabularyIndex(vocabulary: readonly string[]): Array<{ words: string[]; spelled: string[] }> {
  return vocabulary
    .map((term) => term.trim().split(/\s+/u).filter(Boolean))
    .filter((spelled) => spelled.length > 0 && spelled.some((w) => /\p{Lu}/u.test(w)))
    .map((spelled) => ({ words: spelled.map((w) => w.toLowerCase()), spelled }))
    .sort((a, b) => b.words.length - a.words.length);
}

function capitalise(word: string): string {
  const first = word.codePointAt(0);
  if (first === undefined) return word;
  const head = String.fromCodePoint(first);
  return head.toUpperCase() + word.slice(head.length);
}

/** A segment's words with the times that say where its own pauses are, when the recogniser gave them. */
function tokensOf(segment: FormattableSegment): Array<{ text: string; pauseBefore: boolean }> {
  const tokens = segment.text.split(/\s+/u).filter(Boolean);
  const words = segment.words ?? [];
  const timed = words.length === tokens.length && words.every((w, i) => w.text.toLowerCase() === tokens[i]);
  return tokens.map((text, i) => ({
    text,
    pauseBefore: timed && i > 0 && words[i]!.startMs - words[i - 1]!.endMs >= SENTENCE_PAUSE_MS,
  }));
}

/**
 * Formats each segment whose text needs it (`needsFormatting`). A sentence starts at the first
 * segment, after a pause of SENTENCE_PAUSE_MS (between segments, or between two timed words of
 * one) and where the speaker changes; the sentence before ends with a full stop.
 */
export function formatSegments<T extends FormattableSegment>(
  segments: readonly T[],
  vocabulary: readonly string[] = [],
): Array<Formatted<T>> {
  const terms = vocabularyIndex(vocabulary);
  return segments.map((segment, i) => {
    if (!needsFormatting(segment.text)) return { ...segment, formatted: false };
    const before = segments[i - 1];
    const after = segments[i + 1];
    const startsSentence = !before || breaksBetween(before, segment);
    const endsSentence = !after || breaksBetween(segment, after);
    const tokens = tokensOf(segment);
    const out = tokens.map((t) => (PRONOUN_I.test(t.text) ? capitalise(t.text) : t.text));
    spellTerms(out, terms);
    tokens.forEach((t, k) => {
      if (k === 0 ? startsSentence : t.pauseBefore) out[k] = capitalise(out[k]!);
      if (k > 0 && t.pauseBefore) out[k - 1] = `${out[k - 1]!}.`;
    });
    if (endsSentence && out.length > 0) out[out.length - 1] = `${out[out.length - 1]!}.`;
    return { ...segment, text: out.join(' '), rawText: segment.text, formatted: true };
  });
}

function breaksBetween(a: FormattableSegment, b: FormattableSegment): boolean {
  if ((a.speaker?.name ?? null) !== (b.speaker?.name ?? null)) return true;
  return b.startMs - a.endMs >= SENTENCE_PAUSE_MS;
}

/** Replaces, in place, each run of words that is a vocabulary term with the term's own spelling. */
function spellTerms(words: string[], terms: ReturnType<typeof vocabularyIndex>): void {
  for (let i = 0; i < words.length; i++) {
    const term = terms.find((t) => t.words.every((w, k) => words[i + k]?.toLowerCase() === w));
    if (!term) continue;
    term.spelled.forEach((w, k) => (words[i + k] = w));
    i += term.words.length - 1;
  }
}
