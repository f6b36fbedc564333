import assert from 'node:assert/strict';
import net from 'node:net';
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

/**
 * A TCP relay to the test Postgres whose `cut()` makes every connection open so far dead the way a
 * failover leaves them, but silently: the client side hears nothing until it next writes, and then
 * gets a reset. So the pool cannot have weeded them out on its own before the checkout (as it may
 * with a real termination, whose notice can arrive first): only the checkout's validation can.
 */
async function silentCutRelay(target: { host: string; port: number }) {
  const open = new Set<{ client: net.Socket; upstream: net.Socket; cut: boolean }>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    const pair = { client, upstream, cut: false };
    open.add(pair);
    client.on('data', (d) => {
      if (pair.cut) client.resetAndDestroy();
      else upstream.write(d);
    });
    upstream.on('data', (d) => client.write(d));
    upstream.on('close', () => {
      if (!pair.cut) client.destroy();
    });
    client.on('close', () => {
      upstream.destroy();
      open.delete(pair);
    });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut(): number {
      let n = 0;
      for (const pair of open) {
        if (pair.cut) continue;
        pair.cut = true;
        pair.upstream.destroy();
        n++;
      }
      return n;
    },
    async close() {
      for (const pair of open) pair.client.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

void it('L12: connections a failover killed without a word are found dead at checkout and replaced: every query after the cut succeeds', async () => {
  const tdb = await createTestDatabase();
  const target = new URL(tdb.url);
  const relay = await silentCutRelay({ host: target.hostname, port: Number(target.port || 5432) });
  const viaRelay = new URL(tdb.url);
  viaRelay.port = String(relay.port);
  const handle = openDatabase(viaRelay.toString(), createLogger('silent'), 4);
  try {
    await Promise.all([1, 2, 3, 4].map(() => sql`select pg_sleep(0.05)`.execute(handle.db)));
    const idle = handle.pool.pool.idleCount;
    assert.ok(idle >= 2, 'idle connections are waiting in the pool');
    assert.equal(relay.cut(), handle.pool.pool.totalCount, 'every pooled connection is cut');
    assert.equal(handle.pool.pool.idleCount, idle, 'the pool has not noticed: they still look idle');
    for (let i = 0; i < 6; i++) {
      const r = await sql<{ one: number }>`select 1 as one`.execute(handle.db);
      assert.equal(r.rows[0]!.one, 1, `query ${i} after the cut`);
    }
  } finally {
    await handle.close();
    await relay.close();
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
