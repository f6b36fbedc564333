// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F4). Each workspace's budget of ask calls: a token bucket kept in Postgres, so the limit
// holds across keys and across api processes. Refilled by time when taken (src/search/ask-budget.ts).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table ask_budget (
  workspace_id uuid primary key references workspaces(id) on delete cascade,
  tokens double precision not null,
  at timestamptz not null default now()
);

alter table ask_budget enable row level security;
create policy tenant_isolation on ask_budget to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on ask_budget to verbatim_tenant;
grant select, insert, update, delete on ask_budget to verbatim_all_workspaces;
create policy all_workspaces on ask_budget to verbatim_all_workspaces using (true) with check (true);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table ask_budget`.execute(db);
}
