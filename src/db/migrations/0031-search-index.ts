// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 18 (O2, O4): the search index, a consumer of meeting.transcribed and
// meeting.transcript_revised with a ledger of its own.
// - search_passages: one row per stretch of transcript (up to six consecutive segments or 30 s,
//   with each segment's time and length, so a hit is told at its segment) and per line of the
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
  kind text not null check (kind in ('transcript', 'minutes')),
  start_ms integer,
  end_ms integer,
  text text not null,
  -- transcript: the segments the text joins (with one space), each [start_ms, end_ms, characters].
  segments jsonb,
  lang regconfig not null,
  tsv tsvector generated always as (to_tsvector(lang, text)) stored
);
-- No pending list: every query would scan it linearly until a vacuum merged it (up to 4 MB of
-- entries). Inserts pay instead, and the consumer indexes far faster than meetings arrive.
create index search_passages_tsv on search_passages using gin (tsv) with (fastupdate = off);
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

-- O4: the meetings a query matches, best first. Security definer, reading the workspace from the
-- same setting the row-level policies read (verbatim.workspace_id, set by withTenant): a tenant
-- still sees only its own workspace (none when the setting is empty), but the text match can use
-- the GIN index. Under the policies it could not: the match operator is not leakproof, so every
-- passage of the workspace was read and tested first (about 330 ms a query at 1.4 million passages).
create function verbatim_search_meetings(
  p_query text, p_from timestamptz, p_to timestamptz, p_source text, p_status text,
  p_offset integer, p_limit integer, p_candidates integer
) returns table (
  meeting_id uuid, title text, created_at timestamptz, source text, status text,
  best float8, total float8, hits bigint
)
language sql stable security definer set search_path from current as $$
  with ws as (select nullif(current_setting('verbatim.workspace_id', true), '')::uuid as id),
  matched as (
    select p.meeting_id, ts_rank_cd(p.tsv, websearch_to_tsquery(p.lang, p_query)) as rank
      from ws, search_passages p join meetings m on m.id = p.meeting_id
     where p.workspace_id = ws.id and m.workspace_id = ws.id
       and ((p.lang = 'english'::regconfig and p.tsv @@ websearch_to_tsquery('english', p_query))
         or (p.lang = 'simple'::regconfig and p.tsv @@ websearch_to_tsquery('simple', p_query)))
       and (p_from is null or m.created_at >= p_from)
       and (p_to is null or m.created_at < p_to)
       and (p_source is null or m.source = p_source)
       and (p_status is null or m.status = p_status)
     limit p_candidates
  )
  select m.id, m.title, m.created_at, m.source, m.status, max(x.rank)::float8, sum(x.rank)::float8, count(*)
    from matched x join meetings m on m.id = x.meeting_id
   group by m.id
   order by 6 desc, 7 desc, m.created_at desc, m.id
  offset p_offset limit p_limit
$$;

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
drop function verbatim_search_meetings(text, timestamptz, timestamptz, text, text, integer, integer, integer);
drop index meetings_transcript_published;
drop table search_index_state;
drop table search_passages;
`.execute(db);
}
