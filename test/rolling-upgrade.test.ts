/**
 * P5: releases side by side on one database. A release's process started on a database that a
 * newer release has migrated (an old worker restarted mid-upgrade) starts and works: the newer
 * migrations only expand the schema (docs/deploy.md, Rolling upgrades).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase } from './support/db.ts';
import { spawnVerbatim } from './support/harness.ts';

void it('P5: a process started on a database a newer release migrated runs on it; one whose database lacks its own migrations beside unknown ones is refused, naming both', async () => {
  const db = await createTestDatabase();
  try {
    const env = {
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: '/tmp',
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
  }
});
