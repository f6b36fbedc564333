import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import { createTestDatabase } from './support/db.ts';

const script = path.join(import.meta.dirname, 'support', 'listen-race.ts');

function race(url: string, kind: 'plain' | 'transport') {
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, url, kind], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

void it('V8: graphile-worker releasing its LISTEN client twice (a stop while the connection is cut) does not end the worker', async () => {
  const tdb = await createTestDatabase();
  try {
    // What the library does on a plain pool, under the worker's process guards: the second
    // release throws where nobody awaits it, and the process exits.
    const plain = race(tdb.url, 'plain');
    assert.equal(plain.status, 1, `a plain pool ends the process (stdout: ${plain.stdout})`);
    assert.match(plain.stdout, /already been released/);
    assert.match(plain.stdout, /unhandled rejection; exiting/);

    // The worker's transport pool: the second release is reported once, and the pool goes on.
    const transport = race(tdb.url, 'transport');
    assert.equal(transport.status, 0, `stdout: ${transport.stdout}\nstderr: ${transport.stderr}`);
    const summary = JSON.parse(transport.stdout.trim().split('\n').at(-1)!) as {
      releases: number;
      doubles: number;
      queryAfter: number;
    };
    assert.deepEqual(summary, { releases: 2, doubles: 1, queryAfter: 1 });
  } finally {
    await tdb.drop();
  }
});
