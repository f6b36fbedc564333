// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U4), found in review: the nine-argument verbatim_search (and verbatim_search_meetings,
// which calls it) were security-definer functions that read every meeting of the workspace, not
// only those the caller may read. The app calls the ten-argument one; these two stay for callers
// that name them, and now read through it (and so through verbatim_meeting_visible), as invokers.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
CREATE OR REPLACE FUNCTION verbatim_search(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer, p_hits integer)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint, passage_ids bigint[])
 LANGUAGE sql
 STABLE SECURITY INVOKER
 SET search_path FROM CURRENT
AS $function$
-- verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates,
--   p_hits) returns table
--
-- O4/U4: the ten-argument verbatim_search with no speaker filter: the meetings of the caller's
-- workspace a query matches that the caller may read, best first, each with its best passages.
--
-- Input:
--   as the ten-argument verbatim_search, without p_speaker
-- Effects:
--   none
-- Output:
--   its rows
  select * from verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit,
                                p_candidates, p_hits, null::text)
$function$;
`.execute(db);
}

/** The nine-argument function as migration 0044 left it (its dump, header included). */
const BEFORE = String.raw`
CREATE OR REPLACE FUNCTION public.verbatim_search(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer, p_hits integer)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint, passage_ids bigint[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO '$user', 'public'
 SET max_parallel_workers_per_gather TO '0'
AS $function$
-- verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates,
--   p_hits) returns table
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
        v_english, v_simple, p_hits;
end
$function$;
`;

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql.raw(BEFORE).execute(db);
}
