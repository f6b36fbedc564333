// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 35 (W1, W2, W4, R11): who said it.
// 1. speakers: a meeting's speakers, each from a source that knows it (a bot provider's
//    participant, a track, a channel, a recogniser's cluster), keyed within the meeting by the
//    source's own key (`participant:<name>`, `track:mic`, `channel:2`, `cluster:A`); the label is the
//    source's, the display name a person's; a merged speaker points at the one it was merged into.
//    `reference` (W3) is a short clip (≤ 10 s WAV) of a recogniser cluster's voice, given to a
//    diarizing recogniser with the next windows so the speaker keeps its identity; it is audio,
//    so it goes when the meeting's audio goes.
// 2. speaker_turns: a meeting's speaker timeline (from the bot provider), replaced whole on import.
// 3. segments: `speaker_key`, the speaker a source gave the segment's own audio (its track, its
//    channel, the recogniser's cluster), and `words`, the recogniser's word times relative to the
//    segment's start ([[startMs, endMs, text], ...]), where it gave them: a segment spanning a
//    change of speaker is split there when it is read (src/domain/speakers.ts).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table speakers (
  id uuid primary key default gen_random_uuid(),
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id) on delete cascade,
  key text not null,
  source text not null check (source in ('participant', 'track', 'channel', 'recogniser')),
  label text not null,
  display_name text,
  user_id uuid,
  merged_into uuid references speakers(id) on delete set null,
  reference bytea,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint speakers_meeting_key unique (meeting_id, key),
  constraint speakers_not_self check (merged_into is distinct from id)
);
create table speaker_turns (
  id bigserial primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id) on delete cascade,
  speaker_id uuid not null references speakers(id) on delete cascade,
  start_ms integer not null,
  end_ms integer not null,
  constraint speaker_turns_order check (end_ms >= start_ms)
);
create index speaker_turns_meeting on speaker_turns (meeting_id, start_ms);
alter table segments add column speaker_key text, add column words jsonb;
-- 5. B11: an upload whose channels are its speakers (channels = 'speakers'): each cut window is
--    one window per channel, whose segments are that channel's speaker (windows.speaker_key).
alter table meetings add column channels text check (channels in ('speakers'));
-- 7. W7: the names and terms a workspace's meetings use, given to recognisers that take a prompt.
alter table workspaces add column vocabulary text[] not null default '{}';
alter table windows add column speaker_key text;

-- 4. The window commit writes a segment's speaker key and word times when it is given them (the
--    previous release's workers send neither: both stay null).
CREATE OR REPLACE FUNCTION verbatim_commit_window(p_window uuid, p_segments jsonb, p_actor text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
-- verbatim_commit_window(p_window, p_segments, p_actor) returns boolean
--
-- J5/J15: a window's transcript, as one compare-and-swap: its segments are written only if it
-- moves from pending to transcribed. Takes no fence of its own: its callers hold one.
--
-- Input:
--   p_window    the window
--   p_segments  jsonb array of {seq, start_ms, end_ms, text, speaker_key?, words?}, times from the
--               window's start; words [[start_ms, end_ms, text], ...] from the segment's start
--   p_actor     the actor of the audit row
-- Effects, when the window was pending:
--   windows: status pending -> transcribed, transcribed_at, segment_count
--   segments: one row per element, its times moved onto the meeting's timeline (+ window start),
--     with its speaker key and word times where given (W1, W2)
--   audit_events: one row (window, pending -> transcribed, details {segments})
-- Output:
--   true   the window was pending and is now transcribed
--   false  it was no longer pending (settled, superseded or gone): nothing written
declare
  w windows;
  n integer := jsonb_array_length(p_segments);
begin
  update windows set status = 'transcribed', transcribed_at = now(), segment_count = n
    where id = p_window and status = 'pending'
    returning * into w;
  if not found then
    return false;
  end if;
  insert into segments (workspace_id, meeting_id, window_id, seq, start_ms, end_ms, text, speaker_key, words)
    select w.workspace_id, w.meeting_id, w.id, s.seq, w.start_ms + s.start_ms, w.start_ms + s.end_ms, s.text,
           s.speaker_key, nullif(s.words, 'null'::jsonb)
    from jsonb_to_recordset(p_segments)
      as s(seq integer, start_ms integer, end_ms integer, text text, speaker_key text, words jsonb);
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, details)
    values (w.workspace_id, 'window', w.id::text, 'pending', 'transcribed', p_actor, jsonb_build_object('segments', n));
  return true;
end $function$;

-- 6. W6: a transcript passage is what one speaker said (null: unknown), named as at indexing (a
--    rename revises the transcript, which re-indexes it); search can be narrowed to a speaker.
--    The nine-argument verbatim_search stays for the previous release's api processes.
alter table search_passages add column speaker text;
CREATE OR REPLACE FUNCTION verbatim_search(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer, p_hits integer, p_speaker text)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint, passage_ids bigint[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path FROM CURRENT
 SET max_parallel_workers_per_gather TO '0'
AS $function$
-- verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates,
--   p_hits, p_speaker) returns table
--
-- O4: the meetings of the caller's workspace a query matches, best first, each with its best
-- passages. Security definer, so the text match can use the GIN index (under the row-level
-- policies every passage of the workspace would be read first); the workspace is read from the
-- setting the policies read, so a tenant still sees only its own. Planned per query (EXECUTE),
-- with its words known; no parallel workers.
--
-- Input:
--   p_query                the user's words (websearch syntax), matched in 'english' and in
--                          'simple', each passage in its own configuration
--   p_from, p_to           meetings created in [p_from, p_to) (null: no bound)
--   p_source, p_status     meetings of this source, in this status (null: any)
--   p_offset, p_limit      the page of meetings
--   p_candidates           at most this many matching passages are ranked
--   p_hits                 at most this many passage ids per meeting
--   p_speaker              W6: only passages this speaker said (their name, any case; null: anyone)
--   verbatim.workspace_id  setting: the workspace (empty or unset: no rows)
-- Output, one row per meeting, by best desc, total desc, created_at desc, id:
--   meeting_id, title, created_at, source, status  the meeting's
--   best, total   the highest and the summed ts_rank_cd of its matching passages
--   hits          how many of its passages are among the candidates
--   passage_ids   its best passages among them, best first (rank, start, id)
-- When both configurations give the query phrase pairs (verbatim_phrase_pairs), only passages
-- whose search_phrase_pairs hold them are read.
declare
  v_ws uuid := nullif(current_setting('verbatim.workspace_id', true), '')::uuid;
  v_english tsquery := verbatim_phrase_pairs(websearch_to_tsquery('english', p_query));
  v_simple tsquery := verbatim_phrase_pairs(websearch_to_tsquery('simple', p_query));
  -- Both configurations' pairs, or none: a passage of either language needs its own.
  v_pairs boolean := v_english is not null and v_simple is not null;
begin
  if v_ws is null then
    return;
  end if;
  return query execute format($q$
  with matched as (
    select p.id, p.start_ms, p.meeting_id, ts_rank_cd(p.tsv, websearch_to_tsquery(p.lang, $1)) as rank
      from %s search_passages p join meetings m on m.id = p.meeting_id
     where %s p.workspace_id = $8 and m.workspace_id = $8
       and ((p.lang = 'english'::regconfig and p.tsv @@ websearch_to_tsquery('english', $1))
         or (p.lang = 'simple'::regconfig and p.tsv @@ websearch_to_tsquery('simple', $1)))
       and ($2::timestamptz is null or m.created_at >= $2)
       and ($3::timestamptz is null or m.created_at < $3)
       and ($4::text is null or m.source = $4)
       and ($5::text is null or m.status = $5)
       and ($13::text is null or lower(p.speaker) = lower($13))
     limit $7
  )
  select m.id, m.title, m.created_at, m.source, m.status, max(x.rank)::float8, sum(x.rank)::float8, count(*),
         (array_agg(x.id order by x.rank desc, x.start_ms nulls last, x.id))[1:$12]
    from matched x join meetings m on m.id = x.meeting_id
   group by m.id
   order by 6 desc, 7 desc, m.created_at desc, m.id
  offset $6 limit $9$q$,
    case when v_pairs then 'search_phrase_pairs pp,' else '' end,
    case when v_pairs then 'pp.passage_id = p.id and pp.workspace_id = $8 and pp.pairs @@ ($10 || $11) and' else '' end)
  using p_query, p_from, p_to, p_source, p_status, p_offset, p_candidates, v_ws, p_limit,
        v_english, v_simple, p_hits, p_speaker;
end
$function$;

do $$
declare
  ws constant text := $w$nullif(current_setting('verbatim.workspace_id', true), '')::uuid$w$;
  t text;
begin
  if not exists (select 1 from pg_roles where rolname = 'verbatim_tenant') then
    return;
  end if;
  foreach t in array array['speakers', 'speaker_turns'] loop
    execute format('alter table %I enable row level security', t);
    execute format('create policy tenant_isolation on %I to verbatim_tenant using (workspace_id = %s) with check (workspace_id = %s)', t, ws, ws);
    execute format('grant select, insert, update, delete on %I to verbatim_tenant', t);
  end loop;
  grant usage on sequence speaker_turns_id_seq to verbatim_tenant;
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_search(text, timestamptz, timestamptz, text, text, integer, integer, integer, integer, text);
alter table search_passages drop column speaker;
CREATE OR REPLACE FUNCTION verbatim_commit_window(p_window uuid, p_segments jsonb, p_actor text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
-- verbatim_commit_window(p_window, p_segments, p_actor) returns boolean
--
-- J5/J15: a window's transcript, as one compare-and-swap: its segments are written only if it
-- moves from pending to transcribed. Takes no fence of its own: its callers hold one.
--
-- Input:
--   p_window    the window
--   p_segments  jsonb array of {seq, start_ms, end_ms, text}, times from the window's start
--   p_actor     the actor of the audit row
-- Effects, when the window was pending:
--   windows: status pending -> transcribed, transcribed_at, segment_count
--   segments: one row per element, its times moved onto the meeting's timeline (+ window start)
--   audit_events: one row (window, pending -> transcribed, details {segments})
-- Output:
--   true   the window was pending and is now transcribed
--   false  it was no longer pending (settled, superseded or gone): nothing written
declare
  w windows;
  n integer := jsonb_array_length(p_segments);
begin
  update windows set status = 'transcribed', transcribed_at = now(), segment_count = n
    where id = p_window and status = 'pending'
    returning * into w;
  if not found then
    return false;
  end if;
  insert into segments (workspace_id, meeting_id, window_id, seq, start_ms, end_ms, text)
    select w.workspace_id, w.meeting_id, w.id, s.seq, w.start_ms + s.start_ms, w.start_ms + s.end_ms, s.text
    from jsonb_to_recordset(p_segments) as s(seq integer, start_ms integer, end_ms integer, text text);
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, details)
    values (w.workspace_id, 'window', w.id::text, 'pending', 'transcribed', p_actor, jsonb_build_object('segments', n));
  return true;
end $function$;
drop table speaker_turns, speakers;
alter table segments drop column speaker_key, drop column words;
alter table meetings drop column channels;
alter table workspaces drop column vocabulary;
alter table windows drop column speaker_key;
`.execute(db);
}
