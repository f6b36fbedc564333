import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { down as removeHeaders, up as addHeaders } from '../src/db/migrations/0034-function-headers.ts';
import * as m0035 from '../src/db/migrations/0035-close-out-gate-facts.ts';
import * as m0036 from '../src/db/migrations/0036-provider-holds.ts';
import * as m0037 from '../src/db/migrations/0037-speakers.ts';
import * as m0038 from '../src/db/migrations/0038-tracks.ts';
import * as m0039 from '../src/db/migrations/0039-processing-meetings.ts';
import * as m0040 from '../src/db/migrations/0040-people.ts';
import * as m0041 from '../src/db/migrations/0041-meeting-access.ts';
import * as m0042 from '../src/db/migrations/0042-sso-and-share-links.ts';
import * as m0043 from '../src/db/migrations/0043-audit-trail.ts';
import * as m0044 from '../src/db/migrations/0044-sealed-secrets.ts';
import * as m0045 from '../src/db/migrations/0045-search-overloads-see-visibility.ts';
import * as m0046 from '../src/db/migrations/0046-database-roles.ts';
import * as m0047 from '../src/db/migrations/0047-bot-owners.ts';
import * as m0048 from '../src/db/migrations/0048-batch-owners.ts';
import * as m0049 from '../src/db/migrations/0049-search-visibility-once.ts';
import * as m0050 from '../src/db/migrations/0050-transcript-corrections.ts';
import * as m0051 from '../src/db/migrations/0051-playback-retention.ts';
import * as m0052 from '../src/db/migrations/0052-ask-budget.ts';
import * as m0053 from '../src/db/migrations/0053-fair-claiming.ts';
import * as m0054 from '../src/db/migrations/0054-webhook-fairness.ts';
import * as m0055 from '../src/db/migrations/0055-workspace-budgets.ts';
import * as m0056 from '../src/db/migrations/0056-workspace-hours-cap.ts';
import * as m0057 from '../src/db/migrations/0057-workspace-running-cap.ts';
import * as m0058 from '../src/db/migrations/0058-quota-reservations.ts';
import * as m0059 from '../src/db/migrations/0059-window-commit-late-fact.ts';
import * as m0060 from '../src/db/migrations/0060-stream-counts.ts';
import * as m0061 from '../src/db/migrations/0061-readiness-grant.ts';
import { dumpSchema } from '../src/db/schema-dump.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';

const SCHEMA_FILE = path.resolve(import.meta.dirname, '../src/db/schema.sql');

/**
 * How `actual` differs from `expected`, line by line, as unified-diff hunks with three lines of
 * context (a longest common subsequence between the first and the last differing line), at most
 * `limit` lines of it.
 */
function lineDiff(expected: string, actual: string, limit = 80): string {
  const a = expected.split('\n');
  const b = actual.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  // Each line of `expected` from `start` on, kept (' '), removed ('-') or added ('+'), with its number.
  const ops: Array<{ op: ' ' | '-' | '+'; line: string; at: number }> = [];
  if (x.length * y.length > 4_000_000) {
    ops.push(...x.map((line, k) => ({ op: '-' as const, line, at: start + k })));
    ops.push(...y.map((line) => ({ op: '+' as const, line, at: endA })));
  } else {
    // lcs[i][j]: the length of the longest common subsequence of x[i..] and y[j..].
    const lcs = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i--) {
      for (let j = y.length - 1; j >= 0; j--) {
        lcs[i]![j] = x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
      }
    }
    let i = 0;
    let j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        ops.push({ op: ' ', line: x[i]!, at: start + i });
        i++;
        j++;
      } else if (i < x.length && (j === y.length || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
        ops.push({ op: '-', line: x[i]!, at: start + i });
        i++;
      } else {
        ops.push({ op: '+', line: y[j]!, at: start + i });
        j++;
      }
    }
  }
  const before = a.slice(Math.max(0, start - 3), start).map((line, k, all) => ({
    op: ' ' as const,
    line,
    at: start - all.length + k,
  }));
  const afterEnd = a.slice(endA, endA + 3).map((line, k) => ({ op: ' ' as const, line, at: endA + k }));
  const all = [...before, ...ops, ...afterEnd];
  const changed = all.map((o, k) => (o.op === ' ' ? -1 : k)).filter((k) => k >= 0);
  const near = (k: number) => changed.some((c) => Math.abs(c - k) <= 3);
  const out: string[] = [];
  let shown = -2;
  all.forEach((o, k) => {
    if (!near(k)) return;
    if (k !== shown + 1) out.push(`@@ line ${o.at + 1} of src/db/schema.sql @@`);
    out.push(`${o.op} ${o.line}`);
    shown = k;
  });
  return out.length > limit
    ? [...out.slice(0, limit), `… ${out.length - limit} more lines`].join('\n')
    : out.join('\n');
}

/** The dump without the function headers 0034 added (the comment lines that open each body). */
function withoutHeaders(dump: string): string {
  return dump.replace(/(AS \$function\$\n)(--[^\n]*\n)+/g, '$1');
}

void describe('the committed schema (src/db/schema.sql)', () => {
  let tdb: TestDatabase;
  let client: pg.Client;
  let db: Kysely<unknown>;

  before(async () => {
    tdb = await createTestDatabase();
    client = new pg.Client({ connectionString: tdb.url });
    client.on('error', () => undefined);
    await client.connect();
    const pool = new pg.Pool({ connectionString: tdb.url, max: 1 });
    pool.on('error', () => undefined);
    db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  });

  after(async () => {
    await db?.destroy();
    await client?.end();
    await tdb?.drop();
  });

  void it('is the schema the migrations leave (else: run npm run db:schema and commit src/db/schema.sql)', async () => {
    const actual = await dumpSchema(client);
    const expected = fs.readFileSync(SCHEMA_FILE, 'utf8');
    if (actual === expected) return;
    const written = path.join(os.tmpdir(), `verbatim-schema-${process.pid}.sql`);
    fs.writeFileSync(written, actual);
    assert.fail(
      [
        'src/db/schema.sql is not the schema the migrations leave.',
        'Run `npm run db:schema`, review `git diff src/db/schema.sql` and commit it with the migration.',
        `The migrated schema is in ${written}; where they differ (- the file, + the migrations):`,
        '',
        lineDiff(expected, actual),
      ].join('\n'),
    );
  });

  void it('opens every function with a header comment that names it', async () => {
    const { rows } = await client.query<{ name: string; src: string }>(
      `select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as name, p.prosrc as src
         from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'public'
          and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')`,
    );
    assert.ok(rows.length > 20, `the functions were found: ${rows.length}`);
    const bare = rows.filter(
      (r) => !r.src.trimStart().startsWith(`-- ${r.name.slice(0, r.name.indexOf('(') + 1)}`),
    );
    assert.deepEqual(
      bare.map((r) => r.name).sort(),
      [],
      'each function body opens with `-- name(arguments) returns …` and its Input, Effects and Output ' +
        '(as in src/db/schema.sql): a CREATE OR REPLACE keeps the header, a new function gets one',
    );
  });

  void it('0034 adds only comments: without its headers the dump is byte for byte as 0033 left it, and down/up restore each', async () => {
    // The schema as 0034 left it: the migrations after it are taken down first, and put back last.
    const later = [
      m0035,
      m0036,
      m0037,
      m0038,
      m0039,
      m0040,
      m0041,
      m0042,
      m0043,
      m0044,
      m0045,
      m0046,
      m0047,
      m0048,
      m0049,
      m0050,
      m0051,
      m0052,
      m0053,
      m0054,
      m0055,
      m0056,
      m0057,
      m0058,
      m0059,
      m0060,
      m0061,
    ];
    for (const m of [...later].reverse()) await m.down(db);
    const withHeaders = await dumpSchema(client);
    await removeHeaders(db);
    const without = await dumpSchema(client);
    assert.notEqual(without, withHeaders, 'down removed the headers');
    assert.equal(
      without,
      withoutHeaders(withHeaders),
      'down restores the definitions, headers aside, exactly',
    );
    const { rows } = await client.query<{ n: number }>(
      `select count(*)::int as n from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = 'public' and p.prosrc ~ '^\\s*--'`,
    );
    assert.equal(rows[0]!.n, 0, 'no body opens with a comment after down');
    await addHeaders(db);
    assert.equal(await dumpSchema(client), withHeaders, 'up again gives the same schema');
    for (const m of later) await m.up(db);
  });
});
