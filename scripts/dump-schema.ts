/**
 * Writes src/db/schema.sql: migrates a scratch database from nothing, dumps its schema
 * (src/db/schema-dump.ts) and drops it. test/schema-drift.test.ts fails while the file and the
 * migrations disagree.
 *
 *   npm run db:schema                    writes src/db/schema.sql
 *   npm run db:schema -- --stdout        prints the dump instead
 *   npm run db:schema -- --from <url>    prints the dump of that database as it is (no migration):
 *                                        `diff` it with src/db/schema.sql to see how a database drifted
 *
 * Postgres: VERBATIM_TEST_PG (default postgres://postgres@127.0.0.1:5432/postgres), as the tests.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../src/db/migrate.ts';
import { dumpSchema } from '../src/db/schema-dump.ts';

export const SCHEMA_FILE = path.resolve(import.meta.dirname, '../src/db/schema.sql');

const adminUrl = process.env.VERBATIM_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function urlFor(database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

async function dumpOf(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await dumpSchema(client);
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const from = process.argv.indexOf('--from');
  if (from !== -1) {
    const url = process.argv[from + 1];
    if (!url) throw new Error('--from needs a connection string');
    process.stdout.write(await dumpOf(url));
    return;
  }
  const name = `verbatim_schema_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
    try {
      const pool = new pg.Pool({ connectionString: urlFor(name), max: 2 });
      pool.on('error', () => undefined);
      const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
      try {
        await migrateToLatest(db, urlFor(name));
      } finally {
        await db.destroy();
      }
      const text = await dumpOf(urlFor(name));
      if (process.argv.includes('--stdout')) {
        process.stdout.write(text);
      } else {
        fs.writeFileSync(SCHEMA_FILE, text);
        console.log(
          `wrote ${path.relative(process.cwd(), SCHEMA_FILE)} (${text.split('\n').length - 1} lines)`,
        );
      }
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
    }
  } finally {
    await admin.end();
  }
}

await main();
