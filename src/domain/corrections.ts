/**
 * E3: a person's corrections of a transcript, applied when it is read. A correction holds the
 * recogniser's text it replaced (`originalText`) over a stretch of the timeline. A line whose own
 * text is that original, over that stretch, reads as corrected; the latest such correction wins.
 * A late-audio repair that re-cut the stretch keeps the correction where it finds the same words
 * again; where it does not, the correction is shown on the lines it overlaps as needing a look
 * (`review`), and the recogniser's new words are read until a person decides.
 */

export interface Correction {
  id: string;
  startMs: number;
  endMs: number;
  originalText: string;
  text: string;
  createdAt: Date;
}

export interface CorrectableLine {
  startMs: number;
  endMs: number;
  text: string;
  /** The recogniser's own text, when `text` was formatted from it. */
  rawText?: string;
}

export type CorrectedLine<T> = Omit<T, 'rawText'> & {
  /** The recogniser's own words, whatever `text` shows (formatted, or a person's correction). */
  rawText: string;
  /** The correction `text` comes from, when a person corrected this line. */
  correctionId: string | null;
  /** A correction of this stretch made before a repair changed its words: a person should look. */
  review: { correctionId: string; text: string } | null;
};

/** Text compared as words: case, spacing and punctuation of the recogniser's output aside. */
export function sameWords(a: string, b: string): boolean {
  return normalise(a) === normalise(b);
}

function normalise(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}'’\s-]/gu, '')
    .split(/\s+/u)
    .filter(Boolean)
    .join(' ');
}

/**
 * How far a repair may move a line and its correction still follow it: a late chunk moves what
 * follows it by the difference between its length and the length it was reserved as.
 */
export const CORRECTION_DRIFT_MS = 10_000;

/** 0 when the spans overlap, else the time between them. */
function distance(a: { startMs: number; endMs: number }, b: { startMs: number; endMs: number }): number {
  return Math.max(0, a.startMs - b.endMs, b.startMs - a.endMs);
}

/** How far a line is from where a correction was made: both ends compared (0: the same span). */
function closeness(a: { startMs: number; endMs: number }, b: { startMs: number; endMs: number }): number {
  return Math.abs(a.startMs - b.startMs) + Math.abs(a.endMs - b.endMs);
}

/**
 * Each correction goes to a line whose words are its original and which no other correction
 * took: first those whose line is exactly where it was made (newest first), then the others to
 * the closest such line (both ends compared) within CORRECTION_DRIFT_MS. Two lines with the same
 * words side by side ("Okay." "Okay.") each keep their own. One that finds none is shown on the
 * line nearest to it as needing a look (the newest such per line), never dropped. A line holds one
 * correction: making a new one removes those it held (src/meetings/corrections.ts).
 */
export function applyCorrections<T extends CorrectableLine>(
  lines: readonly T[],
  corrections: readonly Correction[],
): Array<CorrectedLine<T>> {
  const newestFirst = [...corrections].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
  const raw = lines.map((l) => l.rawText ?? l.text);
  const taken = new Map<number, Correction>();
  const review = new Map<number, Correction>();
  const placed = new Set<string>();
  for (const c of newestFirst) {
    const i = lines.findIndex(
      (l, k) => !taken.has(k) && closeness(c, l) === 0 && sameWords(c.originalText, raw[k]!),
    );
    if (i >= 0) {
      taken.set(i, c);
      placed.add(c.id);
    }
  }
  for (const c of newestFirst) {
    if (placed.has(c.id)) continue;
    let best = -1;
    for (const [i, line] of lines.entries()) {
      if (taken.has(i) || !sameWords(c.originalText, raw[i]!) || distance(c, line) > CORRECTION_DRIFT_MS)
        continue;
      if (best < 0 || closeness(c, line) < closeness(c, lines[best]!)) best = i;
    }
    if (best >= 0) {
      taken.set(best, c);
      continue;
    }
    let nearest = -1;
    for (const [i, line] of lines.entries())
      if (nearest < 0 || closeness(c, line) < closeness(c, lines[nearest]!)) nearest = i;
    if (nearest >= 0 && !review.has(nearest)) review.set(nearest, c);
  }
  return lines.map((line, i) => {
    const found = taken.get(i);
    const look = review.get(i);
    // A look is asked for only by a correction newer than the one the line shows, saying otherwise.
    const asks =
      look !== undefined &&
      (!found || look.createdAt.getTime() > found.createdAt.getTime()) &&
      !sameWords(look.text, found ? found.text : raw[i]!);
    const { rawText: _formattedFrom, ...rest } = line;
    return {
      ...rest,
      text: found ? found.text : line.text,
      rawText: raw[i]!,
      correctionId: found?.id ?? null,
      review: asks ? { correctionId: look.id, text: look.text } : null,
    };
  });
}
