/**
 * P6: the backup drill. A running install with a finished meeting and one in flight is backed up
 * with `verbatim backup` (pg_dump as the owner, the local blob tree around it), restored with
 * `verbatim restore` into a new empty database and a new data dir, and started there: the finished
 * meeting, its transcript, its minutes and the API key are as they were, and the meeting that was
 * in flight finishes in the restored install.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import pg from 'pg';
import { ADMIN_URL, TEST_APP_LOGIN } from './support/db.ts';
import {
  freePort,
  SPEECH,
  speechWav,
  spawnVerbatim,
  startHarness,
  waitFor,
  waitForMeeting,
  type WorkerProcess,
} from './support/harness.ts';

function urlOf(database: string, user?: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  if (user) url.username = user;
  return url.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

void it('P6: a backup taken while a meeting is in flight restores into a fresh install: the finished meeting, transcript, minutes and key intact, and the one in flight finishes there', async () => {
  const h = await startHarness();
  const backupDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-backup-')), 'backup');
  const restoredDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-restored-'));
  const restoredDb = `vt_restore_${randomBytes(4).toString('hex')}`;
  let restored: WorkerProcess | null = null;
  try {
    const worker = h.spawnWorker();
    const upload = async (title: string) => {
      const created = await h.request('POST', '/v1/meetings', { source: 'upload', title });
      assert.equal(created.status, 201, created.text);
      const id = created.json.id as string;
      const put = await h.request('PUT', `/v1/meetings/${id}/recording`, speechWav(SPEECH), {
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 202, put.text);
      return id;
    };
    const finished = await upload('finished before the backup');
    await waitForMeeting(h, finished);
    const before = await waitFor('the minutes', async () => {
      const m = await h.request('GET', `/v1/meetings/${finished}`);
      return m.json.minutes.status === 'written' ? m.json : null;
    });
    const transcriptBefore = (await h.request('GET', `/v1/meetings/${finished}/transcript?format=txt`)).text;
    assert.match(transcriptBefore.toLowerCase(), /budget/);

    // No worker now: the next upload is accepted and waits, in flight, when the backup is taken.
    await worker.stop();
    const inFlight = await upload('in flight during the backup');

    const backup = spawnVerbatim(['backup', backupDir], h.env());
    assert.equal(await backup.exited, 0, backup.output());
    assert.match(backup.output(), /stored objects copied/);
    assert.doesNotMatch(backup.output(), /PGPASSWORD|password=/i);

    // A fresh install: a new empty database (the cluster's roles exist, as docs/security.md makes
    // them once) and a new data dir.
    await admin((c) => c.query(`create database ${restoredDb}`));
    const env = {
      ...h.env(),
      DATABASE_URL: urlOf(restoredDb, TEST_APP_LOGIN),
      VERBATIM_MIGRATION_DATABASE_URL: urlOf(restoredDb),
      VERBATIM_DATA_DIR: restoredDir,
      VERBATIM_FAULT_STATE_DIR: path.join(restoredDir, 'faults'),
    };
    const restore = spawnVerbatim(['restore', backupDir], env);
    assert.equal(await restore.exited, 0, restore.output());
    // Restoring again over it is refused: nothing already stored is overwritten.
    const again = spawnVerbatim(['restore', backupDir], env);
    assert.equal(await again.exited, 2, again.output());
    assert.match(again.output(), /the database is not empty/);

    const port = await freePort();
    restored = spawnVerbatim(['start'], { ...env, VERBATIM_PORT: String(port) });
    const base = `http://127.0.0.1:${port}`;
    const auth = { authorization: `Bearer ${h.apiKey}` };
    await waitFor(
      () => `the restored install to be ready:\n${restored!.output().slice(-2000)}`,
      async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200,
    );
    const get = async (url: string) => fetch(`${base}${url}`, { headers: auth });

    // The old key works; the finished meeting is as it was.
    const after = (await (await get(`/v1/meetings/${finished}`)).json()) as typeof before;
    assert.equal(after.status, 'complete');
    assert.deepEqual(after.minutes, before.minutes, 'the minutes as written');
    assert.equal(
      await (await get(`/v1/meetings/${finished}/transcript?format=txt`)).text(),
      transcriptBefore,
    );

    // The meeting in flight resumes in the restored install and is transcribed.
    await waitFor(
      () => `the in-flight meeting to finish:\n${restored!.output().slice(-3000)}`,
      async () => {
        const m = (await (await get(`/v1/meetings/${inFlight}`)).json()) as { status: string };
        assert.notEqual(m.status, 'failed', JSON.stringify(m));
        return m.status === 'complete';
      },
      180_000,
    );
    const text = await (await get(`/v1/meetings/${inFlight}/transcript?format=txt`)).text();
    assert.match(text.toLowerCase(), /budget/);
  } finally {
    await restored?.stop();
    await h.close();
    await admin((c) => c.query(`drop database if exists ${restoredDb} with (force)`));
    fs.rmSync(path.dirname(backupDir), { recursive: true, force: true });
    fs.rmSync(restoredDir, { recursive: true, force: true });
  }
});
