// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 scope 6 (S10): the app no longer works as the role that owns the tables. Every
// connection the app opens takes the role verbatim_all_workspaces (src/db/roles.ts); a tenant flow
// then switches to verbatim_tenant as before. verbatim_all_workspaces is named for what it may do:
// read and write the rows of every workspace (workers, sweeps, sign-in), through row-level
// policies written for it, never by bypassing them. It owns nothing, so it cannot change the
// schema, drop a table, turn a policy off or grant itself more.
//
// The security-definer functions, reviewed under the new roles:
// - verbatim_search (ten arguments) could be run by any role of the cluster (PUBLIC), reading the
//   passages of whatever workspace that role named in its own settings: now only the two app roles.
// - verbatim_search and verbatim_passages_added named their tables through a search_path that puts
//   pg_temp first: a caller's temporary table could stand in for one of ours. Their search_path is
//   now the schema, then pg_temp, as verbatim_enqueue's and verbatim_unqueue's already was
//   (pg_catalog, pg_temp); those two are granted to verbatim_all_workspaces too.
//
// Later migrations grant their new tables to both roles themselves (test/db-roles.test.ts fails a
// table that one forgets). Roles are cluster-wide: created only if missing.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'verbatim_all_workspaces') then
    begin
      create role verbatim_all_workspaces nologin nobypassrls nosuperuser noinherit nocreatedb nocreaterole;
    exception
      when duplicate_object or unique_violation then null;
      when insufficient_privilege then
        raise exception 'cannot create role verbatim_all_workspaces as %', current_user
          using hint = 'create it once as an administrator: create role verbatim_all_workspaces nologin nobypassrls; '
                       'grant verbatim_all_workspaces to ' || current_user || ';';
    end;
  end if;
  if exists (select 1 from pg_roles where rolname = 'verbatim_all_workspaces'
              and (rolsuper or rolbypassrls or rolcreaterole or rolcreatedb)) then
    raise exception 'role verbatim_all_workspaces must not be a superuser nor have BYPASSRLS, CREATEROLE or CREATEDB';
  end if;
  if not (select rolsuper from pg_roles where rolname = current_user)
     and not pg_has_role(current_user, 'verbatim_all_workspaces', 'MEMBER') then
    begin
      execute format('grant verbatim_all_workspaces to %I', current_user);
    exception when insufficient_privilege then
      raise exception 'cannot grant role verbatim_all_workspaces to %', current_user
        using hint = 'grant it once as an administrator: grant verbatim_all_workspaces to ' || current_user || ';';
    end;
  end if;
end $$;

do $$
declare
  t text;
  f text;
begin
  execute format('grant usage on schema %I to verbatim_all_workspaces', current_schema());
  for t in
    select c.relname from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
       and c.relname not in ('kysely_migration', 'kysely_migration_lock')
     order by c.relname
  loop
    execute format('grant select, insert, update, delete on %I to verbatim_all_workspaces', t);
  end loop;
  for t in
    select c.relname from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p') and c.relrowsecurity
     order by c.relname
  loop
    execute format('create policy all_workspaces on %I to verbatim_all_workspaces using (true) with check (true)', t);
  end loop;
  for t in
    select c.relname from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relkind = 'S'
  loop
    execute format('grant usage, select, update on sequence %I to verbatim_all_workspaces', t);
  end loop;
  for t in
    select c.relname from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relkind in ('v', 'm')
  loop
    execute format('grant select on %I to verbatim_all_workspaces', t);
  end loop;

  -- The security-definer functions: only the two app roles may run them, and their tables are
  -- named through the schema before pg_temp.
  for f in
    select p.oid::regprocedure::text from pg_proc p
     where p.pronamespace = current_schema()::regnamespace and p.prosecdef
  loop
    execute format('revoke execute on function %s from public', f);
    execute format('grant execute on function %s to verbatim_tenant, verbatim_all_workspaces', f);
  end loop;
  for f in
    select p.oid::regprocedure::text from pg_proc p
     where p.pronamespace = current_schema()::regnamespace and p.prosecdef
       and not exists (select 1 from unnest(p.proconfig) c where c like 'search_path=%pg_temp')
  loop
    execute format('alter function %s set search_path = %I, pg_temp', f, current_schema());
  end loop;
end $$;
`.execute(db);
}

/** The role stays: it is cluster-wide and other databases in the cluster may still use it. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
declare
  t text;
  f text;
begin
  for f in
    select p.oid::regprocedure::text from pg_proc p
     where p.pronamespace = current_schema()::regnamespace and p.prosecdef
       and p.proname in ('verbatim_search', 'verbatim_passages_added')
  loop
    execute format('alter function %s set search_path = "$user", public', f);
    execute format('revoke execute on function %s from verbatim_tenant', f);
    execute format('grant execute on function %s to public', f);
  end loop;
  for t in
    select c.relname from pg_class c
     where c.relnamespace = current_schema()::regnamespace
       and exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'all_workspaces')
  loop
    execute format('drop policy all_workspaces on %I', t);
  end loop;
  execute format('revoke all on all tables in schema %I from verbatim_all_workspaces', current_schema());
  execute format('revoke all on all sequences in schema %I from verbatim_all_workspaces', current_schema());
  execute format('revoke all on all functions in schema %I from verbatim_all_workspaces', current_schema());
  execute format('revoke usage on schema %I from verbatim_all_workspaces', current_schema());
end $$;
`.execute(db);
}
