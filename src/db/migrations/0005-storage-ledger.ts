// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- B4/B6: the quota guards: 'global' and one row per workspace (its id), locked global first.
create table storage_guards (scope text primary key);
insert into storage_guards (scope) values ('global');

-- B2/B3/B5: the durable cleanup outbox for stored objects. A row exists from before an object's
-- first byte (staged) until it is referenced, or from its hand-off for deletion (pending) until the
-- delete succeeded. Its bytes count against the quotas for as long as it exists (B6).
create table object_cleanups (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid,
  object_key text not null unique,
  bytes bigint not null check (bytes >= 0),
  state text not null check (state in ('staged', 'pending')),
  reason text not null,
  reserve_until timestamptz,
  attempts integer not null default 0 check (attempts >= 0),
  next_attempt_at timestamptz not null default now(),
  lease_owner text,
  lease_expires_at timestamptz,
  delete_fenced_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check (state <> 'staged' or reserve_until is not null)
);
create index object_cleanups_due on object_cleanups (next_attempt_at) where state = 'pending';
create index object_cleanups_staged on object_cleanups (reserve_until) where state = 'staged';
create index object_cleanups_workspace on object_cleanups (workspace_id);

-- B4: set under the guards right before the physical delete; never cleared.
alter table blobs add column delete_fenced_at timestamptz;
create index blobs_live_bytes on blobs (workspace_id) include (size_bytes) where deleted_at is null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index blobs_live_bytes;
alter table blobs drop column delete_fenced_at;
drop table object_cleanups;
drop table storage_guards;
`.execute(db);
}
