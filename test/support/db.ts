import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { ensureAppLogin } from '../../src/db/roles.ts';
import type { Database } from '../../src/db/schema.ts';

export const ADMIN_URL = process.env.VERBATIM_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/postgres';

function urlFor(database: string, adminUrl = ADMIN_URL): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** The login the app under test connects as (ensureAppLogin: owns nothing, no BYPASSRLS). */
export const TEST_APP_LOGIN = 'verbatim_app_test';

function appUrlFor(database: string, adminUrl = ADMIN_URL): string {
  const url = new URL(urlFor(database, adminUrl));
  url.username = TEST_APP_LOGIN;
  url.password = '';
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
  hash.update(fs.readFileSync(path.resolve(dir, '../roles.ts')));
  hash.update(
    JSON.stringify(JSON.parse(fs.readFileSync('node_modules/graphile-worker/package.json', 'utf8')).version),
  );
  return `verbatim_tpl_${hash.digest('hex').slice(0, 12)}`;
}

async function ensureTemplate(admin: pg.Client, name: string, adminUrl: string): Promise<void> {
  await admin.query('select pg_advisory_lock(4242)');
  try {
    const login = await admin.query('select 1 from pg_roles where rolname = $1', [TEST_APP_LOGIN]);
    const exists = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount && login.rowCount) return;
    if (exists.rowCount) {
      await ensureAppLogin(admin, TEST_APP_LOGIN, randomBytes(24).toString('base64url'));
      return;
    }
    const building = `${name}_building`;
    await admin.query(`drop database if exists ${building}`);
    await admin.query(`create database ${building}`);
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: urlFor(building, adminUrl) }) }),
    });
    await migrateToLatest(db, urlFor(building, adminUrl));
    await db.destroy();
    // S10: the app under test logs in as a role that owns nothing (trust auth here: the password is unused).
    await ensureAppLogin(admin, TEST_APP_LOGIN, randomBytes(24).toString('base64url'));
    await admin.query(`alter database ${building} rename to ${name}`);
  } finally {
    await admin.query('select pg_advisory_unlock(4242)');
  }
}

export interface TestDatabase {
  /** The owner's (superuser's) URL: migrations, and tests that read or break things directly. */
  url: string;
  /** S10: the app's login, which owns nothing (DATABASE_URL of the app under test). */
  appUrl: string;
  name: string;
  /**
   * A handle as the owner, outside the app's roles: for a test that changes the schema on purpose
   * (a probe trigger, a narrowed policy). Closed by drop().
   */
  owner(): Kysely<Database>;
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
    let owner: Kysely<Database> | null = null;
    const ownerPool = () => {
      const pool = new pg.Pool({ connectionString: urlFor(name, adminUrl), max: 2 });
      // drop() ends this pool, then drops the database with (force): a connection the pool has
      // let go but whose socket is still open is terminated by the drop, and that error, unheard,
      // was an uncaught exception failing whichever test ran next.
      pool.on('error', () => undefined);
      pool.on('connect', (client) => client.on('error', () => undefined));
      return pool;
    };
    return {
      owner: () => (owner ??= new Kysely<Database>({ dialect: new PostgresDialect({ pool: ownerPool() }) })),
      url: urlFor(name, adminUrl),
      appUrl: appUrlFor(name, adminUrl),
      name,
      drop: async () => {
        await owner?.destroy();
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
