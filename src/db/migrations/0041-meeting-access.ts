// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U4): a meeting has an owner (the person who made it; none for a service account's) and
// a visibility: private (its owner, and the workspace's admins and owners), workspace (every
// member), or shared (its owner, admins, and the members named in meeting_shares). The second wall
// beside the workspace's: a restrictive row-level policy on meetings, read from two settings the
// request's connection carries (src/db/tenant.ts): verbatim.user_id, and verbatim.see_all, which
// is 'off' only for a person whose role reads only what is theirs or shown to them. Search, which
// runs as security definer, applies the same function.
import { sql, type Kysely } from 'kysely';

const SEARCH_WITH_VISIBILITY = String.raw`
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

const SEARCH_BEFORE = String.raw`
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
`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings
  add column owner_user_id uuid references users(id) on delete set null,
  add column visibility text not null default 'workspace'
    constraint meetings_visibility check (visibility in ('private', 'workspace', 'shared'));

create table meeting_shares (
  meeting_id uuid not null references meetings(id) on delete cascade,
  user_id uuid not null references users(id) on delete cascade,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (meeting_id, user_id)
);
create index meeting_shares_user on meeting_shares (user_id);

create function verbatim_meeting_visible(p_visibility text, p_owner uuid, p_meeting uuid) returns boolean
language sql stable as $f$
-- verbatim_meeting_visible(p_visibility, p_owner, p_meeting) returns boolean
--
-- U4: whether the request's person may read a meeting. Everyone may when verbatim.see_all is not
-- 'off' (the system path, service accounts, admins and owners); otherwise a workspace meeting,
-- one's own, or one shared with one.
--
-- Input:
--   p_visibility, p_owner, p_meeting  the meeting's visibility, owner and id (a track's parent's
--                                     id: a track is shared with whom its meeting is)
--   verbatim.see_all, verbatim.user_id  settings of the request's connection
-- Output:
--   true when it may be read
  select coalesce(current_setting('verbatim.see_all', true), '') <> 'off'
      or p_visibility = 'workspace'
      or p_owner = nullif(current_setting('verbatim.user_id', true), '')::uuid
      or (p_visibility = 'shared' and exists (
            select 1 from meeting_shares s
             where s.meeting_id = p_meeting
               and s.user_id = nullif(current_setting('verbatim.user_id', true), '')::uuid))
$f$;

do $$
declare
  ws constant text := $w$nullif(current_setting('verbatim.workspace_id', true), '')::uuid$w$;
begin
  alter table meeting_shares enable row level security;
  execute format('create policy tenant_isolation on meeting_shares to verbatim_tenant using (workspace_id = %s) with check (workspace_id = %s)', ws, ws);
  grant select, insert, update, delete on meeting_shares to verbatim_tenant;
  create policy meeting_access on meetings as restrictive to verbatim_tenant
    using (verbatim_meeting_visible(visibility, owner_user_id, coalesce(parent_id, id)));
end $$;
`.execute(db);
  await sql.raw(SEARCH_WITH_VISIBILITY).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql.raw(SEARCH_BEFORE).execute(db);
  await sql`
drop policy meeting_access on meetings;
drop table meeting_shares;
drop function verbatim_meeting_visible(text, uuid, uuid);
alter table meetings drop column visibility, drop column owner_user_id;
`.execute(db);
}
