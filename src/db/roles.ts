import { sql } from 'kysely';
import type pg from 'pg';
import type { Db } from './schema.ts';

/**
 * S10 (issue 36 scope 6): the roles the app's statements run as, each named for what it may do.
 *
 * - verbatim_all_workspaces (migration 0046): every connection the app opens starts as it: the
 *   system path (workers, sweeps, sign-in) reads and writes every workspace's rows through
 *   row-level policies written for it. It owns nothing: no schema change, no policy turned off.
 * - verbatim_tenant (migration 0018): a tenant flow switches to it for one workspace's rows.
 * - the owner: the role that runs the migrations (VERBATIM_MIGRATION_DATABASE_URL, or DATABASE_URL),
 *   and only they.
 *
 * The login role of DATABASE_URL should own nothing (in embedded mode it is `verbatim_app`,
 * `ensureAppLogin`): a login that owns the tables could leave the role it was given (SET ROLE NONE).
 * docs/security.md, "Database roles".
 */
export const ALL_WORKSPACES_ROLE = 'verbatim_all_workspaces';

/** The login role embedded mode gives the app: it owns nothing and is neither superuser nor BYPASSRLS. */
export const EMBEDDED_APP_LOGIN = 'verbatim_app';

/**
 * The connection string every app connection uses: DATABASE_URL with the startup option that makes
 * the session's role verbatim_all_workspaces, so even RESET ROLE returns to it. Idempotent.
 */
export function appConnectionString(connectionString: string): string {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new Error('DATABASE_URL is not a URL (postgres://user:password@host:port/database)');
  }
  const options = url.searchParams.get('options') ?? '';
  if (/(^|\s)-c\s*role=/.test(options)) return connectionString;
  url.searchParams.set('options', `${options} -c role=${ALL_WORKSPACES_ROLE}`.trim());
  return url.toString();
}

/**
 * The transport's tables (graphile-worker's schema, made by its own migrations after ours) for the
 * app's role. Run by the owner after every migration: a graphile-worker upgrade may add tables.
 */
export async function grantTransport(client: pg.ClientBase): Promise<void> {
  // Processes starting together would GRANT the same rows at once ("tuple concurrently updated",
  // found by the simulation): one at a time, under a transaction-scoped advisory lock.
  await client.query(`
begin;
select pg_advisory_xact_lock(hashtext('verbatim.grant-transport'));
grant usage on schema graphile_worker to ${ALL_WORKSPACES_ROLE};
grant select, insert, update, delete on all tables in schema graphile_worker to ${ALL_WORKSPACES_ROLE};
grant usage, select, update on all sequences in schema graphile_worker to ${ALL_WORKSPACES_ROLE};
grant execute on all functions in schema graphile_worker to ${ALL_WORKSPACES_ROLE};
-- graphile-worker turns row-level security on for its private tables (and writes no policy): the
-- app's role reaches their rows through a policy of its own, as it does ours.
do $$
declare
  t text;
begin
  for t in
    select c.relname from pg_class c
     where c.relnamespace = 'graphile_worker'::regnamespace and c.relkind in ('r', 'p') and c.relrowsecurity
       and not exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'all_workspaces')
  loop
    execute format('create policy all_workspaces on graphile_worker.%I to ${ALL_WORKSPACES_ROLE} using (true) with check (true)', t);
  end loop;
end $$;
commit;`);
}

/**
 * Embedded mode: the login the app connects with, made (or its password set) by the superuser after
 * the migrations: it owns nothing, may switch only to the two app roles, and inherits nothing, so a
 * connection without the startup role can read no table at all.
 */
export async function ensureAppLogin(
  superuser: pg.ClientBase,
  login: string,
  password: string,
): Promise<void> {
  const name = quoteIdent(login);
  const exists = await superuser.query('select 1 from pg_roles where rolname = $1', [login]);
  if (!exists.rowCount) {
    await superuser.query(
      `create role ${name} login noinherit nosuperuser nobypassrls nocreatedb nocreaterole noreplication`,
    );
  }
  // ALTER ROLE takes no bind parameters: the password is a quoted literal (random base64url, no quote).
  await superuser.query(
    `alter role ${name} login noinherit nosuperuser nobypassrls nocreatedb nocreaterole noreplication password ${quoteLiteral(password)}`,
  );
  await superuser.query(`grant ${ALL_WORKSPACES_ROLE}, verbatim_tenant to ${name}`);
}

export interface LoginRole {
  login: string;
  superuser: boolean;
  bypassRls: boolean;
  /** Tables, functions or schemas of the app's schema this login owns (it could change them). */
  owns: number;
  /** The role the connection's statements run as. */
  current: string;
}

/** What the app's login may do beyond its roles: read at start (a warning) and by the health report. */
export async function describeLogin(db: Db): Promise<LoginRole> {
  const { rows } = await sql<{
    login: string;
    superuser: boolean;
    bypass_rls: boolean;
    owns: number;
    current: string;
  }>`
    select r.rolname as login, r.rolsuper as superuser, r.rolbypassrls as bypass_rls,
           ((select count(*) from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relowner = r.oid)
          + (select count(*) from pg_proc p where p.pronamespace = current_schema()::regnamespace and p.proowner = r.oid)
          + (select count(*) from pg_namespace n where n.oid = current_schema()::regnamespace and n.nspowner = r.oid))::int as owns,
           current_user::text as current
      from pg_roles r where r.rolname = session_user`.execute(db);
  const row = rows[0];
  if (!row) throw new Error('the database does not know its own session user');
  return {
    login: row.login,
    superuser: row.superuser,
    bypassRls: row.bypass_rls,
    owns: row.owns,
    current: row.current,
  };
}

/** Whether the login could leave the app's roles and act beyond row-level security. */
export function loginIsPrivileged(role: LoginRole): boolean {
  return role.superuser || role.bypassRls || role.owns > 0;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}
