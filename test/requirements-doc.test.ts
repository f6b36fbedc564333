import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { ROOT, byId, citations, citedIds, provenIn } from './support/citations.ts';

const DOC = path.join(ROOT, 'docs', 'requirements.md');

interface Row {
  id: string;
  statement: string;
  proof: string[];
}

function rows(doc: string): Row[] {
  return [...doc.matchAll(/^\| ([A-Z][0-9]+) +\| (.+?) +\| (.+?) +\|$/gm)].map((m) => ({
    id: m[1]!,
    statement: m[2]!,
    proof: [...m[3]!.matchAll(/`([^`]+)`/g)].map((p) => p[1]!),
  }));
}

/** The ids of the "Not cited yet" section, ranges (`W1–W8`) spelled out. */
function uncited(doc: string): string[] {
  const section = doc.slice(doc.indexOf('## Not cited yet'));
  return [...section.matchAll(/\b([A-Z])([0-9]+)(?:–\1([0-9]+))?\b/g)].flatMap((m) => {
    const from = Number(m[2]);
    const to = m[3] === undefined ? from : Number(m[3]);
    return Array.from({ length: to - from + 1 }, (_, i) => `${m[1]}${from + i}`);
  });
}

void it('Requirements: every id the code, tests, simulation and docs cite has its line in docs/requirements.md', () => {
  const doc = fs.readFileSync(DOC, 'utf8');
  const listed = new Set(rows(doc).map((r) => r.id));
  const missing = [...citations()]
    .filter(([id]) => !listed.has(id))
    .sort(([a], [b]) => byId(a, b))
    .map(([id, files]) => `${id} (cited in ${[...files].join(', ')})`);
  assert.deepEqual(missing, [], 'add a line for each to docs/requirements.md');
});

void it('Requirements: each line of docs/requirements.md is one id, said once, whose listed test files name it in a test title', () => {
  const doc = fs.readFileSync(DOC, 'utf8');
  const all = rows(doc);
  assert.ok(all.length > 0, 'the tables are read');
  const ids = all.map((r) => r.id);
  assert.deepEqual(
    ids.filter((id, i) => ids.indexOf(id) !== i),
    [],
    'no id has two lines',
  );
  const proven = provenIn();
  for (const row of all) {
    assert.ok(
      row.statement.length > 0 && row.statement.length <= 400,
      `${row.id} says what it means briefly`,
    );
    assert.ok(row.proof.length > 0, `${row.id} names where it is proven`);
    for (const file of row.proof) {
      assert.ok(fs.existsSync(path.join(ROOT, file)), `${row.id}: ${file} exists`);
      if (/^test\/.*\.test\.ts$/.test(file)) {
        assert.ok(proven.get(row.id)?.has(file), `${row.id}: ${file} has a test whose title names ${row.id}`);
      }
    }
  }
  const notYet = uncited(doc);
  assert.ok(notYet.length > 0);
  const cited = citations();
  for (const id of notYet) {
    assert.ok(!cited.has(id), `${id} is cited now: move it from "Not cited yet" into its table`);
    assert.ok(!ids.includes(id), `${id} is not both listed and uncited`);
  }
});

void it('Requirements: an id counts only where it is written as a citation, so S3 the storage and V8 the engine do not', () => {
  const cases: Array<[string, string[]]> = [
    ["void it('J3: a stale token cannot commit a window'", ['J3']],
    ["it('L7/V8: a socket reset is waited out'", ['L7', 'V8']],
    ['// the last stretch (J3/L6) is fenced', ['J3', 'L6']],
    ['reclaims before a job is isolated (J7, J20)', ['J7', 'J20']],
    ['one hour of chunks (L21; 720 = one hour)', ['L21']],
    ['a feed budget, off the event loop, S8)', ['S8']],
    ['(committing its next window,\n    // J19) may wait', ['J19']],
    ['the provider client (R2–R4).', ['R2', 'R4']],
    ['a lock seen free twice is a death: J18: the watch', ['J18']],
    ['an S3 bucket; S3-compatible; S3’s minimum part; an S3(-compatible) store', []],
    ['four multipart parts (each put on S3)', []],
    ["V8's heap grows, the V8 engine", []],
    ['color: #E5E7EB; 0xB1; sha256 P1a', []],
    ["parsePlant('x', 'Invariant: V13\\ndiff')", []],
    ['J20 as amended', []],
  ];
  for (const [text, ids] of cases) assert.deepEqual(citedIds(text), ids, text);
});
