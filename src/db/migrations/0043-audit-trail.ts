// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U8): the workspace's audit trail. One row per thing done that an admin must be able to
// answer for: sign-ins and their failures, role changes and removals, invites, shares and share
// link opens, exports, deletions and key changes — who (a person, a key, a share link, or nobody
// known), what, when, and from which address. Rows of no workspace (a failed sign-in for an email
// nobody has) are read by the operator only (`verbatim audit`). People are not foreign keys: the
// trail outlives an account.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table audit_trail (
  id bigserial primary key,
  workspace_id uuid references workspaces(id) on delete cascade,
  at timestamptz not null default now(),
  action text not null,
  actor_kind text not null check (actor_kind in ('person', 'key', 'service', 'share_link', 'anonymous')),
  actor_user_id uuid,
  actor_key_id uuid,
  actor_label text,
  subject_type text,
  subject_id text,
  address text,
  detail jsonb not null default '{}'
);
create index audit_trail_workspace on audit_trail (workspace_id, id desc);

alter table audit_trail enable row level security;
create policy tenant_isolation on audit_trail to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert on audit_trail to verbatim_tenant;
grant usage on sequence audit_trail_id_seq to verbatim_tenant;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table audit_trail;`.execute(db);
}
