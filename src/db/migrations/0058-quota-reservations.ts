// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F1). A recording whose length its head says reserves the bytes of its windows when it
// is accepted: other uploads are admitted against that reservation, the split spends it window by
// window, and it ends with the split (or the meeting). Only a meeting being processed holds one.
// A table of its own, not a column of meetings: every change of a meetings row is a stream event.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table quota_reservations (
  meeting_id uuid primary key references meetings (id) on delete cascade,
  workspace_id uuid not null references workspaces (id),
  bytes bigint not null check (bytes >= 0)
);
create index quota_reservations_workspace on quota_reservations (workspace_id);
alter table quota_reservations enable row level security;
create policy all_workspaces on quota_reservations as permissive for all to verbatim_all_workspaces
  using (true) with check (true);
create policy tenant_isolation on quota_reservations as permissive for all to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on table quota_reservations to verbatim_all_workspaces;
grant select, insert, update, delete on table quota_reservations to verbatim_tenant;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table quota_reservations`.execute(db);
}
