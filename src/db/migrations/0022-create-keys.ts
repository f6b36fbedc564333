// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 14: a client whose create answer was lost sends the create again with the same
// Idempotency-Key and gets the meeting it already made, not a second one. A key outlives its
// meeting (the link is cleared when the meeting is deleted), so a late retry of a create whose
// meeting was since deleted is told so rather than making a new one. Keys are per workspace, under
// the same row-level security as the workspace's other rows.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table meeting_create_keys (
  workspace_id uuid not null references workspaces(id),
  key text not null,
  meeting_id uuid references meetings(id) on delete set null,
  created_at timestamptz not null default now(),
  primary key (workspace_id, key)
);
create index meeting_create_keys_meeting on meeting_create_keys (meeting_id);

alter table meeting_create_keys enable row level security;
create policy tenant_isolation on meeting_create_keys to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on meeting_create_keys to verbatim_tenant;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table meeting_create_keys;`.execute(db);
}
