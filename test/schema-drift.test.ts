// Issue 34: src/db/schema.sql is the schema the migrations build, so a diff shows the new body of
// a function, not only the migration that redefines it; and every function says what it does.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import pg from 'pg';
import { dumpSchema, SCHEMA_FILE } from '../scripts/schema-dump.ts';
import { createTestDatabase } from './support/db.ts';

void it('the migrations build exactly src/db/schema.sql (run npm run db:schema after a migration), and every function has a header', async () => {
  const tdb = await createTestDatabase();
  try {
    const built = (await dumpSchema(tdb.url)).split('\n');
    const committed = fs.readFileSync(SCHEMA_FILE, 'utf8').split('\n');
    const at = built.findIndex((line, i) => line !== committed[i]);
    assert.ok(
      at === -1 && built.length === committed.length,
      `src/db/schema.sql differs from what the migrations build, from line ${at + 1}:\n` +
        `  migrations: ${built[at] ?? '(end)'}\n  schema.sql: ${committed[at] ?? '(end)'}\n` +
        'run `npm run db:schema` and commit the result',
    );

    const client = new pg.Client({ connectionString: tdb.url });
    await client.connect();
    try {
      const bare = await client.query<{ name: string }>(
        `select p.oid::regprocedure::text as name from pg_proc p
          where p.pronamespace = 'public'::regnamespace and obj_description(p.oid, 'pg_proc') is null`,
      );
      assert.deepEqual(
        bare.rows.map((r) => r.name),
        [],
        'functions without a header (comment on function: arguments, effects, returns)',
      );
    } finally {
      await client.end();
    }
  } finally {
    await tdb.drop();
  }
});
