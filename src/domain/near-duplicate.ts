/**
 * Issue 18 (item 6): offline text picked from a transcript (extractive minutes, offline answers)
 * never says the same thing twice. Speakers repeat themselves and speech recognition turns one
 * sentence into slightly different strings, so "the same" means: the same words, give or take a
 * few. Two texts are near duplicates when the sets of their words overlap by at least
 * NEAR_DUPLICATE_OVERLAP (Jaccard), or when every word of the shorter one (of three words or more)
 * is in the longer one.
 */
export const NEAR_DUPLICATE_OVERLAP = 0.7;

export function wordsOf(text: string): Set<string> {
  return new Set(text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? []);
}

export function isNearDuplicate(a: Set<string>, b: Set<string>): boolean {
  if (a.size === 0 || b.size === 0) return a.size === b.size;
  let shared = 0;
  for (const w of a) if (b.has(w)) shared++;
  // A short text all of whose words a longer one says adds nothing; one or two words are too few
  // to tell.
  if (Math.min(a.size, b.size) >= 3 && shared === Math.min(a.size, b.size)) return true;
  return shared / (a.size + b.size - shared) >= NEAR_DUPLICATE_OVERLAP;
}

/**
 * The items in their order, each dropped when it is a near duplicate of one kept before it (or of
 * one in `already`, texts kept elsewhere).
 */
export function withoutNearDuplicates<T>(
  items: readonly T[],
  textOf: (item: T) => string,
  already: readonly string[] = [],
): T[] {
  const kept: Array<Set<string>> = already.map(wordsOf);
  const out: T[] = [];
  for (const item of items) {
    const words = wordsOf(textOf(item));
    if (kept.some((k) => isNearDuplicate(k, words))) continue;
    kept.push(words);
    out.push(item);
  }
  return out;
}
