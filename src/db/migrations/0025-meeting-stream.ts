// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 15 (L23): a meeting's changes as a stream its clients follow live. Triggers write one row
// per change in the changing transaction (a meeting's row updated, a window settled, superseded or
// moved by a repair) and NOTIFY the meeting's id; the rows name what changed, the stream reads the
// rows themselves. The workspace id is not a foreign key: a key would make every write here wait
// on a workspace row locked for a key revocation; the meeting's key (cascading) is enough.
//
// Writers take no lock for the stream: a row is born without a position (`seq` null). Positions are
// handed out after commit, by whoever reads the stream, under a per-meeting advisory lock, in the
// order the rows were made. So a meeting's positions are gapless and only ever given to committed
// rows: a reader at position N has seen every change positioned up to N, and misses none later.
//
// Drafts (L22): a provisional transcription of each chunk while the meeting is live, kept apart from
// the segments and dropped by trigger once a window covering it commits its final words. Shed
// drafts (the drafts queue fell behind real time) are counted on the meeting.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table meeting_stream (
  id bigserial primary key,
  workspace_id uuid not null,
  meeting_id uuid not null references meetings(id) on delete cascade,
  seq bigint,
  kind text not null check (kind in ('meeting', 'window', 'draft')),
  ref uuid,
  created_at timestamptz not null default now()
);
create unique index meeting_stream_position on meeting_stream (meeting_id, seq);
create index meeting_stream_unpositioned on meeting_stream (meeting_id, id) where seq is null;

alter table meeting_stream enable row level security;
create policy tenant_isolation on meeting_stream to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on meeting_stream to verbatim_tenant;
grant usage on sequence meeting_stream_id_seq to verbatim_tenant;

create table drafts (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null,
  meeting_id uuid not null references meetings(id) on delete cascade,
  chunk_seq integer not null,
  start_ms bigint not null,
  end_ms bigint not null,
  text text not null,
  created_at timestamptz not null default now(),
  unique (meeting_id, chunk_seq)
);
alter table drafts enable row level security;
create policy tenant_isolation on drafts to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on drafts to verbatim_tenant;

alter table meetings add column drafts_shed integer not null default 0;

create function verbatim_stream_change() returns trigger language plpgsql as $$
begin
  if tg_table_name = 'meetings' then
    insert into meeting_stream (workspace_id, meeting_id, kind) values (new.workspace_id, new.id, 'meeting');
    perform pg_notify('verbatim_stream', new.id::text);
  else
    insert into meeting_stream (workspace_id, meeting_id, kind, ref)
      values (new.workspace_id, new.meeting_id, case tg_table_name when 'drafts' then 'draft' else 'window' end, new.id);
    perform pg_notify('verbatim_stream', new.meeting_id::text);
  end if;
  return null;
end $$;

-- A window's final words replace the drafts whose middle falls inside it.
create function verbatim_drop_drafts() returns trigger language plpgsql as $$
begin
  delete from drafts
   where meeting_id = new.meeting_id
     and (start_ms + end_ms) / 2 >= new.start_ms and (start_ms + end_ms) / 2 < new.end_ms;
  return null;
end $$;
create trigger windows_drop_drafts_insert after insert on windows
  for each row when (new.status = 'transcribed') execute function verbatim_drop_drafts();
create trigger windows_drop_drafts_update after update of status on windows
  for each row when (new.status = 'transcribed' and old.status is distinct from new.status)
  execute function verbatim_drop_drafts();
-- Once the transcript is published, the drafts have nothing left to stand in for.
create function verbatim_drop_meeting_drafts() returns trigger language plpgsql as $$
begin
  delete from drafts where meeting_id = new.id;
  return null;
end $$;
create trigger meetings_drop_drafts after update of transcript_completed_at on meetings
  for each row when (new.transcript_completed_at is not null and old.transcript_completed_at is null)
  execute function verbatim_drop_meeting_drafts();
create trigger drafts_stream after insert on drafts
  for each row execute function verbatim_stream_change();

create trigger meetings_stream after update on meetings
  for each row when (old.* is distinct from new.*) execute function verbatim_stream_change();
create trigger windows_stream_insert after insert on windows
  for each row when (new.status <> 'pending') execute function verbatim_stream_change();
create trigger windows_stream_update after update of status, start_ms, end_ms on windows
  for each row when ((old.status, old.start_ms, old.end_ms) is distinct from (new.status, new.start_ms, new.end_ms))
  execute function verbatim_stream_change();

-- What was transcribed before this migration: each settled window once, so a stream read from the
-- start holds the whole meeting.
insert into meeting_stream (workspace_id, meeting_id, kind, ref)
  select workspace_id, meeting_id, 'window', id from windows
   where status <> 'pending'
   order by meeting_id, start_ms, index;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop trigger drafts_stream on drafts;
drop trigger meetings_drop_drafts on meetings;
drop function verbatim_drop_meeting_drafts();
drop trigger windows_drop_drafts_update on windows;
drop trigger windows_drop_drafts_insert on windows;
drop function verbatim_drop_drafts();
drop trigger windows_stream_update on windows;
drop trigger windows_stream_insert on windows;
drop trigger meetings_stream on meetings;
drop function verbatim_stream_change();
drop table meeting_stream;
drop table drafts;
alter table meetings drop column drafts_shed;
`.execute(db);
}
