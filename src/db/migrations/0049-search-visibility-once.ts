// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36, bench (n): verbatim_search asked verbatim_meeting_visible about every meeting of the
// workspace, once per row and not inlined: 7.7 ms of a 25 ms query at 2,000 meetings, for a key
// that may read them all. The rule is now read once from the settings and written into the query:
// nothing for a caller who sees everything, the meeting's id for a share link, and for a member a
// condition with a hashed sub-select of the meetings shared with them. The same rule as
// verbatim_meeting_visible (migration 0042), which the row-level policy still applies. And the
// query's words are parsed once per language, not once per candidate passage for its rank.
import { sql, type Kysely } from 'kysely';

const SEARCH = String.raw`
CREATE OR REPLACE FUNCTION verbatim_search(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer, p_hits integer, p_speaker text)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint, passage_ids bigint[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
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
--   verbatim.see_all, verbatim.user_id  settings: U4, only the meetings the caller may read
--                          (verbatim_meeting_visible's rule, read once and written into the query:
--                          a share link's one meeting; every meeting when see_all is not 'off';
--                          else the workspace's, one's own and those shared with one)
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
  v_see text := coalesce(current_setting('verbatim.see_all', true), '');
  v_user uuid := nullif(current_setting('verbatim.user_id', true), '')::uuid;
  -- U4, as verbatim_meeting_visible decides it, decided once here and not once per meeting.
  v_visible text := case
    when v_see like 'meeting:%' then 'm.id::text = $15'
    when v_see <> 'off' then 'true'
    else $v$(m.visibility = 'workspace' or m.owner_user_id = $14
              or (m.visibility = 'shared' and m.id in (select s.meeting_id from meeting_shares s where s.user_id = $14)))$v$
  end;
begin
  if v_ws is null then
    return;
  end if;
  return query execute format($q$
  with matched as (
    select p.id, p.start_ms, p.meeting_id, ts_rank_cd(p.tsv, case when p.lang = 'english'::regconfig then $16 else $17 end) as rank
      from %s search_passages p join meetings m on m.id = p.meeting_id
     where %s p.workspace_id = $8 and m.workspace_id = $8
       and ((p.lang = 'english'::regconfig and p.tsv @@ $16)
         or (p.lang = 'simple'::regconfig and p.tsv @@ $17))
       and ($2::timestamptz is null or m.created_at >= $2)
       and ($3::timestamptz is null or m.created_at < $3)
       and ($4::text is null or m.source = $4)
       and ($5::text is null or m.status = $5)
       and ($13::text is null or lower(p.speaker) = lower($13))
       and %s
     limit $7
  )
  select m.id, m.title, m.created_at, m.source, m.status, max(x.rank)::float8, sum(x.rank)::float8, count(*),
         (array_agg(x.id order by x.rank desc, x.start_ms nulls last, x.id))[1:$12]
    from matched x join meetings m on m.id = x.meeting_id
   group by m.id
   order by 6 desc, 7 desc, m.created_at desc, m.id
  offset $6 limit $9$q$,
    case when v_pairs then 'search_phrase_pairs pp,' else '' end,
    case when v_pairs then 'pp.passage_id = p.id and pp.workspace_id = $8 and pp.pairs @@ ($10 || $11) and' else '' end,
    v_visible)
  using p_query, p_from, p_to, p_source, p_status, p_offset, p_candidates, v_ws, p_limit,
        v_english, v_simple, p_hits, p_speaker, v_user, substr(v_see, 9),
        websearch_to_tsquery('english', p_query), websearch_to_tsquery('simple', p_query);
end
$function$;
`;

const BEFORE = String.raw`
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
--   verbatim.see_all, verbatim.user_id  settings: U4, only the meetings the caller may read
--                          (verbatim_meeting_visible)
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
       and verbatim_meeting_visible(m.visibility, m.owner_user_id, m.id)
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
`;

/** The function's search_path, as migration 0046 left every security-definer function's. */
async function pinSearchPath(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
begin
  execute format('alter function verbatim_search(text, timestamptz, timestamptz, text, text, integer, integer, integer, integer, text) set search_path = %I, pg_temp', current_schema());
end $$;
`.execute(db);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql.raw(SEARCH).execute(db);
  await pinSearchPath(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql.raw(BEFORE).execute(db);
  await pinSearchPath(db);
}
