// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F7). Event streams live in the api processes' memory, where they are counted and
// limited (F2). So that `verbatim status` and the operator page can show each workspace's open
// streams across every api process, each process writes its counts here (a row per workspace with
// streams open on it), refreshed while it runs and removed when it stops; a row not refreshed for a
// minute is a process that died and is not counted.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table stream_counts (
  workspace_id uuid not null references workspaces (id) on delete cascade,
  process_id text not null,
  open integer not null check (open > 0),
  updated_at timestamptz not null default now(),
  primary key (workspace_id, process_id)
);
create index stream_counts_process on stream_counts (process_id);
alter table stream_counts enable row level security;
create policy all_workspaces on stream_counts as permissive for all to verbatim_all_workspaces
  using (true) with check (true);
create policy tenant_isolation on stream_counts as permissive for all to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on table stream_counts to verbatim_all_workspaces;
grant select, insert, update, delete on table stream_counts to verbatim_tenant;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table stream_counts`.execute(db);
}
