// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F2). A workspace's request budgets, kept in Postgres so a limit holds across its keys,
// its people and every api process: a token bucket per workspace and budget name, refilled by the
// database's clock when taken (src/workspaces/workspace-budget-store.ts).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table workspace_budgets (
  workspace_id uuid not null references workspaces(id) on delete cascade,
  name text not null,
  tokens double precision not null,
  at timestamptz not null default now(),
  primary key (workspace_id, name)
);

alter table workspace_budgets enable row level security;
create policy tenant_isolation on workspace_budgets to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on workspace_budgets to verbatim_tenant;
grant select, insert, update, delete on workspace_budgets to verbatim_all_workspaces;
create policy all_workspaces on workspace_budgets to verbatim_all_workspaces using (true) with check (true);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table workspace_budgets`.execute(db);
}
