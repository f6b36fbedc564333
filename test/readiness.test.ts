// P2: /readyz says whether this process can serve: the database, this release's migrations and a
// writable blob store, each named when it fails, with no detail a caller should not see.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { sql } from 'kysely';
import { startHarness } from './support/harness.ts';

void it('P2: /readyz is 200 on a good install, and 503 naming the check when a migration is not applied or the blob store refuses writes; it recovers when they are put right', async () => {
  const h = await startHarness();
  try {
    const ready = async () => {
      const res = await h.api.inject({ method: 'GET', url: '/readyz' });
      return { status: res.statusCode, body: res.json<Record<string, string>>() };
    };
    assert.deepEqual(await ready(), {
      status: 200,
      body: { status: 'ready', database: 'ok', migrations: 'ok', storage: 'ok' },
    });

    // A migration of this release not applied (as before `verbatim migrate` on an upgrade).
    const owner = h.db.owner();
    const { rows } = await sql<{
      name: string;
      timestamp: string;
    }>`select name, timestamp from kysely_migration
        order by name desc limit 1`.execute(owner);
    const last = rows[0]!;
    await sql`delete from kysely_migration where name = ${last.name}`.execute(owner);
    const behind = await ready();
    assert.equal(behind.status, 503);
    assert.equal(behind.body.status, 'unavailable');
    assert.match(
      behind.body.migrations!,
      new RegExp(`1 not applied \\(first ${last.name}\\).*verbatim migrate`),
    );
    assert.equal(behind.body.storage, 'ok');
    await sql`insert into kysely_migration (name, timestamp) values (${last.name}, ${last.timestamp})`.execute(
      owner,
    );
    assert.equal((await ready()).status, 200);

    // The blob store refuses writes: its root is a file now.
    const root = path.join(h.dataDir, 'blobs');
    const aside = `${root}.aside`;
    fs.renameSync(root, aside);
    fs.writeFileSync(root, 'not a directory');
    try {
      const broken = await ready();
      assert.equal(broken.status, 503);
      assert.equal(broken.body.storage, 'not writable (the log says why)');
      assert.equal(broken.body.database, 'ok');
      assert.ok(!JSON.stringify(broken.body).includes(h.dataDir), 'no path in the answer');
    } finally {
      fs.rmSync(root);
      fs.renameSync(aside, root);
    }
    assert.equal((await ready()).status, 200);
    const leftovers = fs.readdirSync(path.join(root, 'readyz'));
    assert.deepEqual(leftovers, [], 'each probe deletes what it wrote');
  } finally {
    await h.close();
  }
});
