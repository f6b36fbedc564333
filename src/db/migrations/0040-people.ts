// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U1–U3, U6): people, not only keys. A user belongs to workspaces with a role (owner,
// admin, member, viewer); signs in with a password (argon2id) or, later, single sign-on; and holds
// sessions: opaque ids stored hashed, with idle and absolute expiry (the CSRF token is derived from
// the session's secret, so nothing more is stored).
// Failed sign-ins are counted per email (whether or not it is a user's, so a lockout tells nothing)
// in sign_in_throttle. A setup link makes the first owner; an invite link makes a member. An API key
// now belongs to a user or, with no user, to a service account (its name), and carries scopes.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table users (
  id uuid primary key,
  email text not null,
  name text not null,
  password_hash text,
  created_at timestamptz not null default now(),
  disabled_at timestamptz,
  constraint users_email_lower check (email = lower(email))
);
create unique index users_email on users (email);

create table memberships (
  workspace_id uuid not null references workspaces(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  role text not null check (role in ('owner', 'admin', 'member', 'viewer')),
  created_at timestamptz not null default now(),
  primary key (workspace_id, user_id)
);
create index memberships_user on memberships (user_id);

create table sessions (
  id uuid primary key,
  id_hash text not null unique,
  user_id uuid not null references users(id) on delete cascade,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  address text
);
create index sessions_user on sessions (user_id) where revoked_at is null;

create table sign_in_throttle (
  key text primary key,
  failures integer not null default 0,
  locked_until timestamptz,
  updated_at timestamptz not null default now()
);

create table access_links (
  id uuid primary key,
  token_hash text not null unique,
  kind text not null check (kind in ('setup', 'invite')),
  workspace_id uuid not null references workspaces(id) on delete cascade,
  role text not null check (role in ('owner', 'admin', 'member', 'viewer')),
  created_by uuid references users(id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  used_by uuid references users(id) on delete set null
);
create index access_links_workspace on access_links (workspace_id, created_at);

alter table api_keys
  add column user_id uuid references users(id) on delete cascade,
  add column scopes text[] not null default '{read,write,admin,keys}',
  add constraint api_keys_scopes check (scopes <@ '{read,write,admin,keys}'::text[]);
create index api_keys_user on api_keys (user_id) where user_id is not null;

-- S10: the tenant role sees its workspace's memberships, sessions and links, and the users who are
-- its members; it cannot add a user (sign-up goes through the system path, by a link).
do $$
declare
  ws constant text := $w$nullif(current_setting('verbatim.workspace_id', true), '')::uuid$w$;
  t text;
begin
  foreach t in array array['memberships', 'sessions', 'access_links'] loop
    execute format('alter table %I enable row level security', t);
    execute format('create policy tenant_isolation on %I to verbatim_tenant using (workspace_id = %s) with check (workspace_id = %s)', t, ws, ws);
    execute format('grant select, insert, update, delete on %I to verbatim_tenant', t);
  end loop;
  alter table users enable row level security;
  execute format('create policy tenant_isolation on users to verbatim_tenant
    using (exists (select 1 from memberships m where m.user_id = users.id and m.workspace_id = %s))', ws);
  grant select on users to verbatim_tenant;
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index api_keys_user;
alter table api_keys drop constraint api_keys_scopes, drop column scopes, drop column user_id;
drop policy tenant_isolation on users;
drop table access_links;
drop table sign_in_throttle;
drop table sessions;
drop table memberships;
drop table users;
`.execute(db);
}
