import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import pg from 'pg';
import { ADMIN_URL, createTestDatabase } from './support/db.ts';
import { waitFor } from './support/harness.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

void it('V8: a terminated backend under a pg connection nobody listens to does not end the process (found by the simulation: an api process exited on an uncaught pg error while a library’s pool was closing at start-up)', async () => {
  const tdb = await createTestDatabase();
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'test/support/guarded-client.ts'), tdb.url],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    const pid = await waitFor('the child’s backend', async () => Number(/pid (\d+)/.exec(out)?.[1]) || null);
    const r = await admin.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [pid]);
    assert.equal(r.rows[0]!.ok, true);
    assert.equal(await code, 0, `the process died: ${out.slice(-1500)}`);
    assert.match(out, /lived/);
    assert.match(out, /lost its database connection; continuing/);
  } finally {
    await admin.end();
    await tdb.drop();
  }
});
