import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { openDatabase } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from './support/db.ts';

void it('L12: after every pooled connection is cut (as in a failover) the next checkouts still get live ones', async () => {
  const tdb = await createTestDatabase();
  const handle = openDatabase(tdb.url, createLogger('silent'), 4);
  const admin = new pg.Client({ connectionString: tdb.url });
  await admin.connect();
  try {
    // Warm the pool with several idle connections, then cut them all as a failover would.
    await Promise.all([1, 2, 3, 4].map(() => sql`select pg_sleep(0.05)`.execute(handle.db)));
    assert.ok(handle.pool.pool.idleCount >= 2, 'idle connections are waiting in the pool');
    const cut = await admin.query(
      'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    assert.ok((cut.rowCount ?? 0) >= 2);
    // Every checkout after the cut still gets a live connection.
    for (let i = 0; i < 6; i++) {
      const r = await sql<{ one: number }>`select 1 as one`.execute(handle.db);
      assert.equal(r.rows[0]!.one, 1);
    }
  } finally {
    await admin.end();
    await handle.close();
    await tdb.drop();
  }
});

void it('L12: checkout fails within the deadline when no live connection can be had', async () => {
  const handle = openDatabase('postgres://postgres@127.0.0.1:1/none', createLogger('silent'), 2);
  try {
    const started = Date.now();
    await assert.rejects(sql`select 1`.execute(handle.db), /no live database connection within 5000 ms/);
    assert.ok(Date.now() - started < 10_000);
  } finally {
    await handle.close();
  }
});
