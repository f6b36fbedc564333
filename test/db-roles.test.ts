/**
 * S10 (issue 36 scope 6): the roles the app's statements run as. The app logs in as a role that owns
 * nothing; every connection it opens works as verbatim_all_workspaces (sweeps, workers, sign-in) or,
 * inside a tenant flow, verbatim_tenant; only the owner runs migrations. Everything here runs as
 * the app does: a real login of its own (TEST_APP_LOGIN), the app's pool, the app's statements.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { openApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import {
  ALL_WORKSPACES_ROLE,
  appConnectionString,
  describeLogin,
  loginIsPrivileged,
} from '../src/db/roles.ts';
import { runAsTenant } from '../src/db/tenant.ts';
import { createLogger } from '../src/log.ts';
import { PgMeetingStore } from '../src/meetings/pg-meeting-store.ts';
import { createTestDatabase, TEST_APP_LOGIN, type TestDatabase } from './support/db.ts';

/** A statement's SQLSTATE, or 'ok' when it ran. */
async function outcome(handle: DatabaseHandle, statement: string): Promise<string> {
  try {
    await handle.db.transaction().execute(async (trx) => {
      await sql.raw(statement).execute(trx);
    });
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

void describe('the database roles', () => {
  let tdb: TestDatabase;
  let app: DatabaseHandle;
  const a = randomUUID();
  const b = randomUUID();

  before(async () => {
    tdb = await createTestDatabase();
    // The app's own pool, logged in as the app's login (which owns nothing).
    app = openDatabase(tdb.appUrl, createLogger('silent'), 2);
    await tdb
      .owner()
      .insertInto('workspaces')
      .values([
        { id: a, name: 'a' },
        { id: b, name: 'b' },
      ])
      .execute();
    const store = new PgMeetingStore(tdb.owner());
    for (const ws of [a, b])
      await store.create(ws, { source: 'upload', language: null, windowMs: 60_000, title: 'walled' });
  });
  after(async () => {
    await app?.close();
    await tdb?.drop();
  });

  void it("S10: the app's connections work as verbatim_all_workspaces under a login that owns nothing; it reads every workspace through a policy, and may not change the schema", async () => {
    const who = (
      await sql<{
        current: string;
        login: string;
      }>`select current_user as current, session_user as login`.execute(app.db)
    ).rows[0];
    assert.deepEqual(who, { current: ALL_WORKSPACES_ROLE, login: TEST_APP_LOGIN });
    const login = await describeLogin(app.db);
    assert.deepEqual(
      { ...login, privileged: loginIsPrivileged(login) },
      {
        login: TEST_APP_LOGIN,
        superuser: false,
        bypassRls: false,
        owns: 0,
        current: ALL_WORKSPACES_ROLE,
        privileged: false,
      },
    );

    // Every workspace's rows, through the all_workspaces policies (row-level security is on).
    const seen = await app.db.selectFrom('meetings').select('workspace_id').execute();
    assert.deepEqual(new Set(seen.map((r) => r.workspace_id)), new Set([a, b]));

    // What only an owner may do is refused: 42501 insufficient privilege (or not the owner).
    const refused = {
      createTable: await outcome(app, 'create table s10_probe (x int)'),
      dropTable: await outcome(app, 'drop table meetings'),
      rlsOff: await outcome(app, 'alter table meetings disable row level security'),
      policy: await outcome(app, 'alter policy all_workspaces on meetings using (true)'),
      // It may read the migrator's table (migration 0061, for /readyz) but never write it.
      migrations: await outcome(app, "delete from kysely_migration where name = 'none'"),
      migrationsInsert: await outcome(
        app,
        "insert into kysely_migration (name, timestamp) values ('s10_probe', 'now')",
      ),
      function: await outcome(
        app,
        "create function verbatim_search_all() returns int language sql as 'select 1'",
      ),
    };
    assert.deepEqual(refused, {
      createTable: '42501',
      dropTable: '42501',
      rlsOff: '42501',
      policy: '42501',
      migrations: '42501',
      migrationsInsert: '42501',
      function: '42501',
    });

    // A grant by a role without the grant option gives nothing (Postgres only warns).
    assert.equal(await outcome(app, 'grant select on meetings to public'), 'ok');
    const granted = await sql<{
      yes: boolean;
    }>`select has_table_privilege('public', 'meetings', 'select') as yes`.execute(app.db);
    assert.equal(granted.rows[0]?.yes, false);

    // Leaving the role leads to the login itself, which inherits nothing: no table at all.
    assert.equal(await outcome(app, 'set local role none; select 1 from meetings limit 1'), '42501');
    // And a connection string cannot start it as anything else it was not granted.
    const url = new URL(tdb.appUrl);
    url.searchParams.set('options', '-c role=postgres');
    const other = new pg.Client({ connectionString: url.toString() });
    await assert.rejects(other.connect(), /permission denied to set role "postgres"/);
  });

  void it('S10: in a tenant flow the same login sees one workspace; the all-workspaces role comes back after it', async () => {
    const inFlow = await runAsTenant(a, () => app.db.selectFrom('meetings').select('workspace_id').execute());
    assert.deepEqual(
      inFlow.map((r) => r.workspace_id),
      [a],
    );
    const afterFlow = await sql<{ role: string }>`select current_user as role`.execute(app.db);
    assert.equal(afterFlow.rows[0]?.role, ALL_WORKSPACES_ROLE);
  });

  void it('S10: every table of the schema is granted to verbatim_all_workspaces, and every table under row-level security has a policy for it (a migration that forgets one fails here)', async () => {
    const owner = tdb.owner();
    const { rows } = await sql<{ table: string; granted: boolean; rls: boolean; policy: boolean }>`
      select c.relname as table,
             has_table_privilege(${ALL_WORKSPACES_ROLE}, c.oid, 'select, insert, update, delete') as granted,
             c.relrowsecurity as rls,
             exists (select 1 from pg_policy p join pg_roles r on r.oid = any (p.polroles)
                      where p.polrelid = c.oid and r.rolname = ${ALL_WORKSPACES_ROLE}) as policy
        from pg_class c
       where c.relnamespace in ('public'::regnamespace, 'graphile_worker'::regnamespace)
         and c.relkind in ('r', 'p') and c.relname not in ('kysely_migration', 'kysely_migration_lock')
       order by c.relname`.execute(owner);
    assert.ok(rows.length > 40, `the schema's tables: ${rows.length}`);
    const missing = rows.filter((r) => !r.granted || (r.rls && !r.policy)).map((r) => r.table);
    assert.deepEqual(missing, []);
  });

  void it('S10: the security-definer functions, reviewed: none runs for PUBLIC, each names its tables through the schema before pg_temp, and another role of the cluster is refused', async () => {
    const owner = tdb.owner();
    const { rows } = await sql<{ fn: string; public: boolean; path: string | null }>`
      select p.oid::regprocedure::text as fn,
             has_function_privilege('public', p.oid, 'execute') as public,
             (select c from unnest(p.proconfig) c where c like 'search_path=%') as path
        from pg_proc p
       where p.pronamespace = 'public'::regnamespace and p.prosecdef
       order by 1`.execute(owner);
    assert.ok(rows.length >= 4, JSON.stringify(rows));
    for (const r of rows) {
      assert.equal(r.public, false, `${r.fn} runs for PUBLIC`);
      assert.match(r.path ?? '', /^search_path=(public|pg_catalog), pg_temp$/, `${r.fn}: ${r.path}`);
    }
    // A login of the cluster that is not the app's: it may connect (PUBLIC may), but not search.
    const stranger = `s10_stranger_${randomUUID().slice(0, 8)}`;
    await sql.raw(`create role ${stranger} login`).execute(owner);
    try {
      const url = new URL(tdb.url);
      url.username = stranger;
      const client = new pg.Client({ connectionString: url.toString() });
      await client.connect();
      try {
        await client.query(`select set_config('verbatim.workspace_id', $1, false)`, [a]);
        await assert.rejects(
          client.query(
            `select * from verbatim_search('hello', null, null, null, null, 0, 10, 100, 3, null::text)`,
          ),
          /permission denied for function verbatim_search/,
        );
      } finally {
        await client.end();
      }
    } finally {
      await sql.raw(`drop role ${stranger}`).execute(owner);
    }
  });

  void it("S10: a login that could leave the app's roles is named at start; the app's own login is not", async (t) => {
    // One data dir for both starts: its secret key sealed the database's secrets at the first.
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-s10-'));
    t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const logs = async (env: Record<string, string>) => {
      let out = '';
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          out += chunk.toString();
          done();
        },
      });
      const started = await openApp(loadConfig({ VERBATIM_DATA_DIR: dataDir, ...env }), {
        logger: createLogger('warn', 'verbatim', sink),
      });
      await started.close();
      return out;
    };
    // The owner (a superuser here) as DATABASE_URL: it works, and says so.
    const asOwner = await logs({ DATABASE_URL: tdb.url });
    assert.match(asOwner, /the app's database login can leave its roles/);
    assert.doesNotMatch(asOwner, /password/i);
    // The app's login, with the owner only for migrations: nothing to say.
    const asApp = await logs({ DATABASE_URL: tdb.appUrl, VERBATIM_MIGRATION_DATABASE_URL: tdb.url });
    assert.doesNotMatch(asApp, /can leave its roles/);
  });

  void it('S10: the startup role is added to DATABASE_URL once, beside any options it had', () => {
    const once = appConnectionString('postgres://u:p@h:5432/d?options=-c%20statement_timeout%3D5000');
    assert.equal(appConnectionString(once), once);
    const options = new URL(once).searchParams.get('options');
    assert.equal(options, `-c statement_timeout=5000 -c role=${ALL_WORKSPACES_ROLE}`);
    assert.throws(() => appConnectionString('not a url'), /DATABASE_URL is not a URL/);
  });
});
