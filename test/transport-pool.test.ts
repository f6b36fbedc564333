import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import { TransportPool } from '../src/worker/transport-pool.ts';
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

void it('V8: a late second release of a transport connection never hands back the connection its next holder is using', async () => {
  const tdb = await createTestDatabase();
  const stacks: string[] = [];
  const pool = new TransportPool({ connectionString: tdb.url, max: 1 }, (stack) => stacks.push(stack));
  // As the worker's pool has: the drop below may terminate a connection pool.end() is still closing.
  pool.on('error', () => undefined);
  pool.on('connect', (c) => c.on('error', () => undefined));
  try {
    // A checks out with a callback, keeps its release, and releases.
    const first = await new Promise<{ done: (e?: unknown) => void; pid: number }>((resolve, reject) => {
      pool.connect((err, client, done) => {
        if (err || !client || !done) return reject(err ?? new Error('no client'));
        const pid = (client as unknown as { processID: number }).processID;
        resolve({ done, pid });
      });
    });
    first.done();
    // B gets the same connection and opens a transaction on it.
    const b = await pool.connect();
    assert.equal((b as unknown as { processID: number }).processID, first.pid, 'one connection, reused');
    await b.query('begin');
    await b.query('create temp table held_by_b (x int)');
    // A releases again, late: reported, and B keeps its connection.
    first.done();
    assert.equal(stacks.length, 1);
    assert.match(stacks[0]!, /released twice/);
    assert.equal(pool.idleCount, 0, 'B still holds the only connection');
    await b.query('commit');
    b.release();
    assert.equal(pool.idleCount, 1);
    assert.equal(stacks.length, 1, "B's own release is not a double one");
  } finally {
    await pool.end();
    await tdb.drop();
  }
});
