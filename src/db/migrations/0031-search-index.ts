// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 18 (O2, O4): the search index, a consumer of meeting.transcribed and
// meeting.transcript_revised with a ledger of its own.
// - search_passages: one row per transcript segment (its time, its text) and per line of the
//   minutes, with the text search configuration its meeting's language calls for ('english' with
//   stemming, 'simple' for other languages) and the tsvector built from it. Rows go with their
//   meeting (on delete cascade: in the transaction that deletes it).
// - search_index_state: per meeting, the transcript revision and the minutes the index holds. The
//   ledger is the set of meetings whose published transcript (or minutes) is ahead of it.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table search_passages (
  id bigserial primary key,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  meeting_id uuid not null references meetings(id) on delete cascade,
  kind text not null check (kind in ('segment', 'minutes')),
  start_ms integer,
  end_ms integer,
  text text not null,
  lang regconfig not null,
  tsv tsvector generated always as (to_tsvector(lang, text)) stored
);
create index search_passages_tsv on search_passages using gin (tsv);
create index search_passages_meeting on search_passages (meeting_id, start_ms);
create index search_passages_workspace on search_passages (workspace_id);

create table search_index_state (
  meeting_id uuid primary key references meetings(id) on delete cascade,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  transcript_revision integer not null,
  minutes_written_at timestamptz,
  passages integer not null,
  indexed_at timestamptz not null default now()
);

-- The ledger's question, asked of meetings: published transcripts the index is behind on.
create index meetings_transcript_published on meetings (transcript_completed_at)
  where transcript_completed_at is not null;

do $$
declare
  ws constant text := $w$nullif(current_setting('verbatim.workspace_id', true), '')::uuid$w$;
  t text;
begin
  if not exists (select 1 from pg_roles where rolname = 'verbatim_tenant') then
    return;
  end if;
  foreach t in array array['search_passages', 'search_index_state'] loop
    execute format('alter table %I enable row level security', t);
    execute format('create policy tenant_isolation on %I to verbatim_tenant using (workspace_id = %s) with check (workspace_id = %s)', t, ws, ws);
    execute format('grant select, insert, update, delete on %I to verbatim_tenant', t);
  end loop;
  grant usage on sequence search_passages_id_seq to verbatim_tenant;
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index meetings_transcript_published;
drop table search_index_state;
drop table search_passages;
`.execute(db);
}
