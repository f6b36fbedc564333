// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U2, U5). Single sign-on: a person is matched by their provider's issuer and subject
// (user_identities); a sign-in in flight is a row keyed by the hash of its `state`, holding its
// PKCE verifier and nonce until the provider sends the browser back (used once, ten minutes).
// Share links: a read-only link to one meeting, stored as the hash of its token, expiring and
// revocable. The meeting policy's function learns a third kind of viewer: `verbatim.see_all`
// set to `meeting:<id>` sees that one meeting (and its tracks, which the policy judges by their
// parent) and nothing else.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table user_identities (
  issuer text not null,
  subject text not null,
  user_id uuid not null references users(id) on delete cascade,
  email text,
  created_at timestamptz not null default now(),
  last_used_at timestamptz not null default now(),
  primary key (issuer, subject)
);
create index user_identities_user on user_identities (user_id);

create table sso_flows (
  state_hash text primary key,
  code_verifier text not null,
  nonce text not null,
  return_to text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index sso_flows_expires on sso_flows (expires_at);

create table share_links (
  id uuid primary key,
  token_hash text not null unique,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  meeting_id uuid not null references meetings(id) on delete cascade,
  created_by uuid references users(id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  opens integer not null default 0,
  last_opened_at timestamptz
);
create index share_links_meeting on share_links (meeting_id, created_at);

alter table share_links enable row level security;
create policy tenant_isolation on share_links to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on share_links to verbatim_tenant;

create or replace function verbatim_meeting_visible(p_visibility text, p_owner uuid, p_meeting uuid) returns boolean
language sql stable as $f$
-- verbatim_meeting_visible(p_visibility, p_owner, p_meeting) returns boolean
--
-- U4/U5: whether the request's reader may read a meeting. A share link's reader
-- (verbatim.see_all = 'meeting:<id>') reads that one meeting and nothing else. Otherwise everyone
-- may when verbatim.see_all is not 'off' (the system path, service accounts, admins and owners);
-- else a workspace meeting, one's own, or one shared with one.
--
-- Input:
--   p_visibility, p_owner, p_meeting  the meeting's visibility, owner and id (a track's parent's
--                                     id: a track is shared with whom its meeting is)
--   verbatim.see_all, verbatim.user_id  settings of the request's connection
-- Output:
--   true when it may be read
  select case
    when coalesce(current_setting('verbatim.see_all', true), '') like 'meeting:%'
      then p_meeting::text = substr(current_setting('verbatim.see_all', true), 9)
    else coalesce(current_setting('verbatim.see_all', true), '') <> 'off'
      or p_visibility = 'workspace'
      or p_owner = nullif(current_setting('verbatim.user_id', true), '')::uuid
      or (p_visibility = 'shared' and exists (
            select 1 from meeting_shares s
             where s.meeting_id = p_meeting
               and s.user_id = nullif(current_setting('verbatim.user_id', true), '')::uuid))
  end
$f$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
create or replace function verbatim_meeting_visible(p_visibility text, p_owner uuid, p_meeting uuid) returns boolean
language sql stable as $f$
  select coalesce(current_setting('verbatim.see_all', true), '') <> 'off'
      or p_visibility = 'workspace'
      or p_owner = nullif(current_setting('verbatim.user_id', true), '')::uuid
      or (p_visibility = 'shared' and exists (
            select 1 from meeting_shares s
             where s.meeting_id = p_meeting
               and s.user_id = nullif(current_setting('verbatim.user_id', true), '')::uuid))
$f$;
drop table share_links;
drop table sso_flows;
drop table user_identities;
`.execute(db);
}
