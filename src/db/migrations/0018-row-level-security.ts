// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 13 scope 8 (S10): row-level security as a second wall behind every `where workspace_id`.
// Tenant reads run as the role verbatim_tenant (SET LOCAL ROLE in src/db/tenant.ts), whose rows are
// limited to the workspace named by the transaction setting `verbatim.workspace_id`. The connection
// user owns the tables and so is not subject to these policies: that is the system path workers and
// sweeps use on purpose (docs/security.md, "Row-level security").
//
// Roles are cluster-wide and tests build many databases in one cluster: the role is created only if
// missing (tolerating a concurrent creator), and everything else here is per database.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
begin
  if not exists (select 1 from pg_roles where rolname = 'verbatim_tenant') then
    begin
      create role verbatim_tenant nologin nobypassrls nosuperuser noinherit;
    exception
      when duplicate_object or unique_violation then null;
      when insufficient_privilege then
        raise exception 'cannot create role verbatim_tenant as %', current_user
          using hint = 'create it once as an administrator: create role verbatim_tenant nologin nobypassrls; '
                       'grant verbatim_tenant to ' || current_user || ';';
    end;
  end if;
  -- A tenant role that bypasses RLS would make every policy below decoration.
  if exists (select 1 from pg_roles where rolname = 'verbatim_tenant' and (rolsuper or rolbypassrls)) then
    raise exception 'role verbatim_tenant must not be a superuser nor have BYPASSRLS';
  end if;
  -- SET ROLE needs membership; a superuser has it already.
  if not (select rolsuper from pg_roles where rolname = current_user)
     and not pg_has_role(current_user, 'verbatim_tenant', 'MEMBER') then
    begin
      execute format('grant verbatim_tenant to %I', current_user);
    exception when insufficient_privilege then
      raise exception 'cannot grant role verbatim_tenant to %', current_user
        using hint = 'grant it once as an administrator: grant verbatim_tenant to ' || current_user || ';';
    end;
  end if;
end $$;

do $$
declare
  ws constant text := $w$nullif(current_setting('verbatim.workspace_id', true), '')::uuid$w$;
  t text;
  s text;
begin
  execute format('grant usage on schema %I to verbatim_tenant', current_schema());

  -- Every table with a workspace_id column: the tenant sees and writes only its own rows. Tables
  -- without one (workers, provider_budgets, provider_calls, storage_guards, the migration tables)
  -- get no grant at all, so a tenant path that touches them fails loudly instead of reading them.
  for t in
    select c.relname from pg_class c
      join pg_attribute a on a.attrelid = c.oid and a.attname = 'workspace_id' and not a.attisdropped
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
     order by c.relname
  loop
    execute format('alter table %I enable row level security', t);
    execute format('create policy tenant_isolation on %I to verbatim_tenant using (workspace_id = %s) with check (workspace_id = %s)', t, ws, ws);
    execute format('grant select, insert, update, delete on %I to verbatim_tenant', t);
    for s in
      select seq.relname from pg_depend d join pg_class seq on seq.oid = d.objid and seq.relkind = 'S'
       where d.refobjid = format('%I', t)::regclass and d.deptype in ('a', 'i')
    loop
      execute format('grant usage on sequence %I to verbatim_tenant', s);
    end loop;
  end loop;

  -- The workspace itself: the tenant sees its own row only (bot settings), and cannot add one.
  alter table workspaces enable row level security;
  execute format('create policy tenant_isolation on workspaces to verbatim_tenant using (id = %s)', ws);
  grant select, update on workspaces to verbatim_tenant;

  -- Child tables reached only through a parent: the tenant's rows are those of its own parents.
  alter table window_tallies enable row level security;
  execute format('create policy tenant_isolation on window_tallies to verbatim_tenant
    using (exists (select 1 from meetings m where m.id = window_tallies.meeting_id and m.workspace_id = %s))
    with check (exists (select 1 from meetings m where m.id = window_tallies.meeting_id and m.workspace_id = %s))', ws, ws);
  grant select, insert, update, delete on window_tallies to verbatim_tenant;

  alter table calendar_events enable row level security;
  execute format('create policy tenant_isolation on calendar_events to verbatim_tenant
    using (exists (select 1 from calendar_feeds f where f.id = calendar_events.feed_id and f.workspace_id = %s))
    with check (exists (select 1 from calendar_feeds f where f.id = calendar_events.feed_id and f.workspace_id = %s))', ws, ws);
  grant select, insert, update, delete on calendar_events to verbatim_tenant;

  alter table webhook_attempts enable row level security;
  execute format('create policy tenant_isolation on webhook_attempts to verbatim_tenant
    using (exists (select 1 from webhook_deliveries d where d.id = webhook_attempts.delivery_id and d.workspace_id = %s))
    with check (exists (select 1 from webhook_deliveries d where d.id = webhook_attempts.delivery_id and d.workspace_id = %s))', ws, ws);
  grant select, insert, update, delete on webhook_attempts to verbatim_tenant;
  grant usage on sequence webhook_attempts_id_seq to verbatim_tenant;
end $$;
`.execute(db);
}

/** The role stays: it is cluster-wide and other databases in the cluster may still use it. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
declare
  t text;
begin
  for t in
    select c.relname from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
       and exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'tenant_isolation')
  loop
    execute format('drop policy tenant_isolation on %I', t);
    execute format('alter table %I disable row level security', t);
  end loop;
  execute format('revoke all on all tables in schema %I from verbatim_tenant', current_schema());
  execute format('revoke all on all sequences in schema %I from verbatim_tenant', current_schema());
  execute format('revoke usage on schema %I from verbatim_tenant', current_schema());
end $$;
`.execute(db);
}
