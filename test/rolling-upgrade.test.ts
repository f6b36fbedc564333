/**
 * P5: releases side by side on one database. A release's process started on a database that a
 * newer release has migrated (an old worker restarted mid-upgrade) starts and works: the newer
 * migrations only expand the schema (docs/deploy.md, Rolling upgrades).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase } from './support/db.ts';
import {
  freePort,
  SPEECH,
  spawnVerbatim,
  startHarness,
  waitFor,
  waitForMeeting,
  type WorkerProcess,
} from './support/harness.ts';
import { chunksOf, LIVE_ENV, putChunk } from './support/live.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * The previous release, built from its commit (CHANGELOG.md's latest tagged entry names it, so a
 * checkout without tags finds it too): its sources from git, this checkout's node_modules when its
 * lockfile is the same (else its own `npm ci`), its server compiled. Kept in the temp dir by commit.
 */
function previousRelease(): { version: string; commit: string; cli: string } {
  const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
  const m = /^## (v\d+\.\d+\.\d+) — \S+ \(commit ([0-9a-f]{7,40})\)/m.exec(changelog);
  assert.ok(m, 'CHANGELOG.md names the last release and its commit');
  const [, version, commit] = m as unknown as [string, string, string];
  const dir = path.join(os.tmpdir(), `verbatim-release-${commit}`);
  const cli = path.join(dir, 'dist/cli/main.js');
  if (!fs.existsSync(cli)) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('sh', ['-c', `git -C "${ROOT}" archive ${commit} | tar -x -C "${dir}"`]);
    const sameLock =
      fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8') ===
      fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8');
    if (sameLock) fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
    else execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir });
    execFileSync(
      process.execPath,
      [path.join(dir, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: dir,
      },
    );
  }
  return { version, commit, cli };
}

/** One of the previous release's processes, with the harness's settings. */
const spawnRelease = (cli: string, args: string[], env: Record<string, string>) =>
  spawnVerbatim(args, env, cli);

/** Stops a process as a rolling upgrade does: SIGTERM, then its drain. */
async function terminate(p: WorkerProcess): Promise<void> {
  if (p.proc.exitCode !== null || p.proc.signalCode !== null) return;
  p.proc.kill('SIGTERM');
  await p.exited;
}

/** Lines a process logged at error level or worse (pino: 50 and 60). */
const errorsIn = (output: string) => output.split('\n').filter((l) => /"level":(50|60)/.test(l));

void it('P5: the previous release’s api and worker beside this release’s during a live meeting, as a rolling upgrade replaces them: every chunk accepted, every window transcribed, no error', async () => {
  const release = previousRelease();
  const h = await startHarness({ env: LIVE_ENV });
  const old: WorkerProcess[] = [];
  try {
    const env = h.env(LIVE_ENV);
    const oldWorker = spawnRelease(release.cli, ['worker'], env);
    old.push(oldWorker);
    const port = await freePort();
    const oldApi = spawnRelease(release.cli, ['api'], { ...env, VERBATIM_PORT: String(port) });
    old.push(oldApi);
    const oldBase = `http://127.0.0.1:${port}`;
    await waitFor(
      `${release.version}'s api`,
      async () => (await fetch(`${oldBase}/readyz`).catch(() => null))?.ok,
    );
    const auth = { authorization: `Bearer ${h.apiKey}` };
    const viaOld = (method: string, url: string, body: Buffer | string, type: string) =>
      fetch(`${oldBase}${url}`, { method, headers: { ...auth, 'content-type': type }, body });

    // The meeting starts on the previous release alone.
    const created = await viaOld(
      'POST',
      '/v1/meetings',
      JSON.stringify({ source: 'live', title: 'upgrade' }),
      'application/json',
    );
    assert.equal(created.status, 201);
    const id = ((await created.json()) as { id: string }).id;
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const half = Math.ceil(chunks.length / 2);
    for (let seq = 0; seq < half; seq++) {
      const res = await viaOld('PUT', `/v1/meetings/${id}/chunks/${seq}`, chunks[seq]!, 'audio/wav');
      assert.equal(res.status, 201, await res.text());
    }
    await waitFor('a window transcribed by the previous release’s worker', async () => {
      const m = await h.request('GET', `/v1/meetings/${id}`);
      return m.json.windows.done >= 1;
    });

    // The upgrade: this release's worker joins (its api is the harness's); chunks go to both apis.
    h.spawnWorker(LIVE_ENV);
    for (let seq = half; seq < chunks.length; seq++) {
      const res =
        seq % 2 === 0
          ? await viaOld('PUT', `/v1/meetings/${id}/chunks/${seq}`, chunks[seq]!, 'audio/wav')
          : await putChunk(h, id, seq, chunks[seq]!);
      assert.equal(
        res.status,
        201,
        seq % 2 === 0 ? await (res as Response).text() : (res as { text: string }).text,
      );
    }
    // The previous release's processes are replaced mid-meeting.
    await terminate(oldWorker);
    await terminate(oldApi);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    const done = await waitForMeeting(h, id);
    assert.equal(done.windows.done, done.windows.total, JSON.stringify(done.windows));
    assert.equal(done.windows.exhausted + done.windows.missing, 0);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    for (const word of ['budget', 'marketing', 'finance']) assert.ok(text.includes(word), text);

    // Both releases' workers did part of it.
    const owners = (
      await sql<{ owner: string }>`select distinct owner from job_attempts`.execute(h.db.owner())
    ).rows.map((r) => r.owner);
    assert.ok(
      owners.some((o) => o.includes(`-${oldWorker.pid}-`)),
      `the previous release's worker ran attempts: ${owners.join(', ')}`,
    );
    assert.ok(
      owners.some((o) => !o.includes(`-${oldWorker.pid}-`)),
      `this release's worker ran attempts: ${owners.join(', ')}`,
    );
    for (const p of old) assert.deepEqual(errorsIn(p.output()), [], `${release.version} logged no error`);
    assert.deepEqual(errorsIn(h.logs()), [], 'this release logged no error');
  } finally {
    for (const p of old) await terminate(p);
    await h.close();
  }
});

void it('P5: a process started on a database a newer release migrated runs on it; one whose database lacks its own migrations beside unknown ones is refused, naming both', async () => {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-ahead-'));
  try {
    const env = {
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dataDir,
    };
    // A newer release's migration, applied after all of this release's.
    await sql`insert into kysely_migration (name, timestamp) values ('9999-from-a-newer-release', now())`.execute(
      db.owner(),
    );
    const started = spawnVerbatim(['migrate'], env);
    assert.equal(await started.exited, 0, started.output());
    const rows = await sql<{
      name: string;
    }>`select name from kysely_migration where name like '9999%'`.execute(db.owner());
    assert.equal(rows.rows.length, 1, 'the newer release’s migration is kept');

    // One of this release's own migrations gone beside the unknown one: another line of releases.
    await sql`delete from kysely_migration where name = '0061-readiness-grant'`.execute(db.owner());
    const refused = spawnVerbatim(['migrate'], env);
    assert.equal(await refused.exited, 1, refused.output());
    assert.match(
      refused.output(),
      /does not know \(9999-from-a-newer-release\) and lacks ones it does \(0061-readiness-grant\)/,
    );
  } finally {
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
