import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { migrateToLatest } from '../../src/db/migrate.ts';

export const ADMIN_URL = process.env.VERBATIM_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function urlFor(database: string, adminUrl = ADMIN_URL): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** The template's name changes whenever a migration does, so a stale template is never used. */
function templateName(): string {
  const dir = path.resolve(import.meta.dirname, '../../src/db/migrations');
  const hash = createHash('sha256');
  for (const f of fs.readdirSync(dir).sort()) hash.update(f).update(fs.readFileSync(path.join(dir, f)));
  // The list of migrations that run lives in migrate.ts: a file added to the folder but not yet
  // listed there must not produce the same template as the listed one.
  hash.update(fs.readFileSync(path.resolve(dir, '../migrate.ts')));
  hash.update(
    JSON.stringify(JSON.parse(fs.readFileSync('node_modules/graphile-worker/package.json', 'utf8')).version),
  );
  return `verbatim_tpl_${hash.digest('hex').slice(0, 12)}`;
}

async function ensureTemplate(admin: pg.Client, name: string, adminUrl: string): Promise<void> {
  await admin.query('select pg_advisory_lock(4242)');
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount) return;
    const building = `${name}_building`;
    await admin.query(`drop database if exists ${building}`);
    await admin.query(`create database ${building}`);
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: urlFor(building, adminUrl) }) }),
    });
    await migrateToLatest(db, urlFor(building, adminUrl));
    await db.destroy();
    await admin.query(`alter database ${building} rename to ${name}`);
  } finally {
    await admin.query('select pg_advisory_unlock(4242)');
  }
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database per test file, cloned from a migrated template (fast and isolated). */
export async function createTestDatabase(adminUrl = ADMIN_URL): Promise<TestDatabase> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const template = templateName();
  try {
    await ensureTemplate(admin, template, adminUrl);
    const name = `vt_${randomBytes(5).toString('hex')}`;
    await admin.query(`create database ${name} template ${template}`);
    return {
      url: urlFor(name, adminUrl),
      name,
      drop: async () => {
        const c = new pg.Client({ connectionString: adminUrl });
        await c.connect();
        await c.query(`drop database if exists ${name} with (force)`);
        await c.end();
      },
    };
  } finally {
    await admin.end();
  }
}
