import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

/**
 * The boundaries of docs/architecture.md hold because `npm run check` fails when they are crossed.
 * These tests write small probe modules into the tree, lint them with the project's own
 * configuration and check that the rules fire: a rule that is configured but silent (as import-x's
 * no-cycle once was, resolving none of our `.ts` imports) fails here.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tag = `probe${process.pid}`;
const written: string[] = [];

function probe(relative: string, text: string): string {
  const file = path.join(ROOT, relative);
  fs.writeFileSync(file, text);
  written.push(file);
  return file;
}

after(() => {
  for (const file of written) fs.rmSync(file, { force: true });
});

async function lint(files: string[]): Promise<Array<{ file: string; rule: string | null; message: string }>> {
  const eslint = new ESLint({ cwd: ROOT });
  const results = await eslint.lintFiles(files);
  return results.flatMap((r) =>
    r.messages.map((m) => ({ file: path.basename(r.filePath), rule: m.ruleId, message: m.message })),
  );
}

void it('Boundaries: the lint run fails on an import cycle between modules', async () => {
  const a = probe(
    `src/meetings/${tag}-a.ts`,
    `import { b } from './${tag}-b.ts';\nexport const a = (): number => b() + 1;\n`,
  );
  const b = probe(
    `src/meetings/${tag}-b.ts`,
    `import { a } from './${tag}-a.ts';\nexport const b = (): number => (Date.now() > 0 ? 1 : a());\n`,
  );
  const messages = await lint([a, b]);
  const cycles = messages.filter((m) => m.rule === 'import-x/no-cycle');
  assert.deepEqual(
    cycles.map((m) => m.file).sort(),
    [`${tag}-a.ts`, `${tag}-b.ts`],
    `each side of the cycle is reported: ${JSON.stringify(messages)}`,
  );
});

void it('Boundaries: the lint run keeps Node built-ins, the database, the network and the I/O layers out of src/domain', async () => {
  const file = probe(
    `src/domain/${tag}-io.ts`,
    [
      `import { readFileSync } from 'node:fs';`,
      `import os from 'os';`,
      `import pg from 'pg';`,
      `import { sql } from 'kysely';`,
      `import { request } from 'undici';`,
      `import { openDatabase } from '../db/connect.ts';`,
      `import type { Transcriber } from '../ports.ts';`,
      `import type { Db } from '../db/schema.ts';`,
      `export const probe = [readFileSync, os, pg, sql, request, openDatabase];`,
      `export type Probe = [Transcriber, Db];`,
      '',
    ].join('\n'),
  );
  const messages = await lint([file]);
  const refused = messages
    .filter((m) => m.rule === '@typescript-eslint/no-restricted-imports')
    .map((m) => m.message);
  assert.equal(
    refused.length,
    6,
    `every runtime import from outside is refused: ${JSON.stringify(messages)}`,
  );
  assert.equal(refused.filter((m) => /no Node built-ins/.test(m)).length, 2);
  assert.equal(refused.filter((m) => /no database, network/.test(m)).length, 3);
  assert.equal(refused.filter((m) => /nothing outside itself/.test(m)).length, 1);
});

void it('Boundaries: the web app takes only types from the server (its statuses), never server code', async () => {
  const file = probe(
    `web/src/${tag}-web.ts`,
    [
      `import type { MeetingStatus } from '../../src/domain/status.ts';`,
      `import { MinutesStatus } from '../../src/domain/status.ts';`,
      `export const shown: MeetingStatus = 'complete';`,
      `export const minutes = MinutesStatus.written;`,
      '',
    ].join('\n'),
  );
  const messages = (await lint([file])).filter((m) => m.rule === '@typescript-eslint/no-restricted-imports');
  assert.equal(messages.length, 1, `only the value import is refused: ${JSON.stringify(messages)}`);
  assert.match(messages[0]!.message, /only types/);
});

void it('Boundaries: the lint run keeps SQL out of HTTP routes and CLI commands (they call the modules that own the tables)', async () => {
  const text = [
    `import { sql } from 'kysely';`,
    `import type { Kysely } from 'kysely';`,
    `import type { Database } from '../db/schema.ts';`,
    `export async function probe(db: Kysely<Database>): Promise<unknown[]> {`,
    `  const a = await sql\`select 1\`.execute(db);`,
    `  const b = await db.selectFrom('meetings').select('id').execute();`,
    `  await db.updateTable('meetings').set({ title: 'x' }).execute();`,
    `  return [a, b, sql.raw('1')];`,
    `}`,
    '',
  ].join('\n');
  const route = probe(`src/api/${tag}-route.ts`, text);
  const command = probe(`src/cli/${tag}-command.ts`, text);
  const messages = await lint([route, command]);
  for (const name of [`${tag}-route.ts`, `${tag}-command.ts`]) {
    const mine = messages.filter((m) => m.file === name);
    const imports = mine.filter((m) => m.rule === '@typescript-eslint/no-restricted-imports');
    const syntax = mine.filter((m) => m.rule === 'no-restricted-syntax');
    assert.equal(
      imports.length,
      1,
      `only the value import of kysely is refused in ${name}: ${JSON.stringify(mine)}`,
    );
    assert.equal(
      syntax.length,
      4,
      `the sql tag, sql.raw, selectFrom and updateTable are each refused in ${name}: ${JSON.stringify(mine)}`,
    );
    assert.ok(syntax.every((m) => /call the module that owns the table/.test(m.message)));
  }
});

void it('Boundaries: a module with queries is a store (*-store.ts, *-rows.ts): a use case that writes SQL fails the lint run', async () => {
  const text = [
    `import { sql } from 'kysely';`,
    `import type { Db } from '../db/schema.ts';`,
    `export async function probe(db: Db): Promise<unknown[]> {`,
    `  const a = await sql\`select 1\`.execute(db);`,
    `  const b = await db.insertInto('workspaces').values({ id: 'x', name: 'y' }).execute();`,
    `  return [a, b];`,
    `}`,
    '',
  ].join('\n');
  const useCase = probe(`src/meetings/${tag}-use.ts`, text);
  const store = probe(`src/meetings/${tag}-store.ts`, text);
  const messages = (await lint([useCase, store])).filter((m) => m.rule === 'no-restricted-syntax');
  assert.deepEqual(
    messages.map((m) => m.file),
    [`${tag}-use.ts`, `${tag}-use.ts`],
    `the sql tag and the insert are refused in the use case, nothing in the store: ${JSON.stringify(messages)}`,
  );
  assert.ok(messages.every((m) => /SQL lives in the stores/.test(m.message)));
});

void it('Boundaries: a store decides nothing a use case decides: it imports no use-case dependencies, no outbox and no store of another folder', async () => {
  const store = probe(
    `src/meetings/${tag}-rows.ts`,
    [
      `import type { MeetingDeps } from './deps.ts';`,
      `import { emitEvent } from '../events/outbox-store.ts';`,
      `import { moveBotRecording } from '../bots/bot-recording-store.ts';`,
      `import type { BotRecordingRow } from '../db/schema.ts';`,
      `import { recordAudit } from '../jobs/audit-store.ts';`,
      `import { windowById } from './window-rows.ts';`,
      `export const probe = [emitEvent, moveBotRecording, recordAudit, windowById];`,
      `export type Probe = [MeetingDeps, BotRecordingRow];`,
      '',
    ].join('\n'),
  );
  // The same imports in a use case are its business.
  const useCase = probe(
    `src/meetings/${tag}-case.ts`,
    [
      `import type { MeetingDeps } from './deps.ts';`,
      `import { emitEvent } from '../events/outbox-store.ts';`,
      `import { moveBotRecording } from '../bots/bot-recording-store.ts';`,
      `export const probe = [emitEvent, moveBotRecording];`,
      `export type Probe = MeetingDeps;`,
      '',
    ].join('\n'),
  );
  const messages = (await lint([store, useCase])).filter(
    (m) => m.rule === '@typescript-eslint/no-restricted-imports',
  );
  // Each refusal names the import and why; the use case, the audit trail, a type and a store of
  // the same folder are not refused.
  const refused = messages.map((m) => {
    const why = /use cases’ dependencies/.test(m.message)
      ? 'dependencies'
      : /no outbox event/.test(m.message)
        ? 'outbox'
        : /another folder/.test(m.message)
          ? 'other folder'
          : m.message;
    return `${m.file} ${/^'([^']+)'/.exec(m.message)?.[1]} ${why}`;
  });
  assert.deepEqual(
    refused.sort(),
    [
      `${tag}-rows.ts ../bots/bot-recording-store.ts other folder`,
      `${tag}-rows.ts ../events/outbox-store.ts other folder`,
      `${tag}-rows.ts ../events/outbox-store.ts outbox`,
      `${tag}-rows.ts ./deps.ts dependencies`,
    ],
    JSON.stringify(messages),
  );
});

void it('Readability: a function over 150 lines fails the lint run, in src, the web app and the simulation', async () => {
  const long = (name: string) =>
    [
      `export function ${name}(n: number): number {`,
      `  let x = n;`,
      ...Array.from({ length: 151 }, (_, i) => `  x += ${i};`),
      `  return x;`,
      `}`,
      `export function short(n: number): number {`,
      `  return n + 1;`,
      `}`,
      '',
    ].join('\n');
  const files = [
    probe(`src/meetings/${tag}-long.ts`, long('longUseCase')),
    probe(`sim/${tag}-long.ts`, long('longScenario')),
  ];
  const messages = (await lint(files)).filter((m) => m.rule === 'max-lines-per-function');
  assert.deepEqual(
    messages.map((m) => m.file).sort(),
    [`${tag}-long.ts`, `${tag}-long.ts`],
    JSON.stringify(messages),
  );
  assert.ok(
    messages.every((m) => /too many lines \(155\)/.test(m.message)),
    JSON.stringify(messages),
  );
});
