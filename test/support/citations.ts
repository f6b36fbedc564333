/**
 * Which requirement ids the repository cites, by the rule docs/requirements.md states. An id is a
 * letter of the spec's families and a number (`J3`, `L21`, `S10`); it is cited only where it is
 * written as a citation:
 *
 *   - followed by a colon: a test title or a comment that leads with it (`'J3: a stale token…'`);
 *   - joined to another id by a slash (`J3/L6`, `'L7/V8: …'`);
 *   - opening parentheses (`(J3)`, `(J7, J20)`, `(L21; one hour…)`), or closing them after a comma,
 *     semicolon or colon (`(…, S8)`, `(…: L19)`).
 *
 * A list of ids (`J7, J20`, `J3/L6`, `R2–R4`, `L4 and L6`) counts as one citation. So "an S3 bucket",
 * "(… parts on S3)", "V8's heap" (the storage and the JavaScript engine) and a hex colour are not
 * citations, while "(S3)" and "'S3: … the secret stays out'" are.
 */
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** Where citations are looked for (docs/requirements.md itself aside). */
export const SCANNED = ['src', 'test', 'sim', 'bench', 'scripts', 'docs', 'web', 'README.md'];
const TEXT = /\.(ts|tsx|js|mjs|md|patch|sql|sh|html|css)$/;

const ID = '[JLBORVSXWUEFP][1-9][0-9]?';
/** One id or a list of them, as one citation. */
const GROUP = new RegExp(`(?<![A-Za-z0-9_])(${ID}(?:(?:, |/|–| and )${ID})*)(?![A-Za-z0-9_])`, 'g');
const ONE = new RegExp(ID, 'g');

/** The ids cited in `text`, by the rule above. */
export function citedIds(text: string): string[] {
  const ids: string[] = [];
  for (const m of text.matchAll(GROUP)) {
    const group = m[1]!;
    // What precedes the group, past spaces and the comment markers of a wrapped line.
    const before = text
      .slice(Math.max(0, m.index - 40), m.index)
      .replace(/(?:\s|\/\/|\*)*$/, '')
      .slice(-1);
    const after = text[m.index + m[0].length] ?? '';
    const opens = before === '(';
    const closes = after === ')' && [',', ';', ':'].includes(before);
    if (opens || closes || after === ':' || group.includes('/')) {
      ids.push(...(group.match(ONE) ?? []));
    }
  }
  return ids;
}

/** The titles of the tests in a test file (`it`, `test`, `describe`, `suite`), template parts kept as written. */
export function testTitles(source: string): string[] {
  const title = /\b(?:it|test|describe|suite)\(\s*(['"`])((?:\\.|(?!\1)[^\\])*)\1/gs;
  return [...source.matchAll(title)].map((m) => m[2]!);
}

/** Every scanned file, relative to the root. */
export function scannedFiles(): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const abs = path.join(ROOT, rel);
    const stat = fs.statSync(abs, { throwIfNoEntry: false });
    if (!stat) return;
    if (stat.isDirectory()) {
      if (['node_modules', 'dist', '.verbatim', 'test-output'].includes(path.basename(rel))) return;
      for (const name of fs.readdirSync(abs).sort()) walk(path.join(rel, name));
    } else if (TEXT.test(rel) && rel !== path.join('docs', 'requirements.md')) {
      out.push(rel);
    }
  };
  for (const top of SCANNED) walk(top);
  return out;
}

/** Each cited id with the files citing it. */
export function citations(): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const file of scannedFiles()) {
    for (const id of citedIds(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
      found.set(id, (found.get(id) ?? new Set()).add(file));
    }
  }
  return found;
}

/** Each id cited in a test title, with the test files whose titles cite it. */
export function provenIn(): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const file of scannedFiles().filter((f) => f.startsWith('test/') && f.endsWith('.test.ts'))) {
    for (const title of testTitles(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
      for (const id of citedIds(title)) found.set(id, (found.get(id) ?? new Set()).add(file));
    }
  }
  return found;
}

/** Sorts ids by family in the spec's order, then by number. */
export function byId(a: string, b: string): number {
  const order = 'JLBORVSXWUEFP';
  return order.indexOf(a[0]!) - order.indexOf(b[0]!) || Number(a.slice(1)) - Number(b.slice(1));
}
