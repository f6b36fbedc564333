// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 18 (O4): searches stay fast when their words are common.
//
// 1. Quoted phrases. A phrase such as "budget review" matched, in the GIN index, every passage
//    holding both words; Postgres then read each of those passages to check the words' positions:
//    tens of thousands of rows when the words are common (bench (j): phrase p95 about 280 ms).
//    Now every passage has a row in search_phrase_pairs holding, as lexemes, each pair of its
//    lexemes at adjacent positions ('budget review'), with a GIN index of its own. A query's
//    adjacent phrase pairs (verbatim_phrase_pairs) are looked up there first, which the index
//    answers exactly, so only passages that hold the pair are read and position-checked.
//    The pairs are a necessary condition of the phrase, never a substitute: a passage matching
//    'a' <-> 'b' has a at some position p and b at p + 1, hence the pair 'a b'. Nothing that
//    matched before is missed. Queries with `or`, a negated group, or a stop word inside a phrase
//    (a distance other than one) get no pairs and run as before. A separate table, not more
//    lexemes in search_passages.tsv: wider passages slowed every other query by about half.
//    A trigger fills it, so no passage is ever without its pairs.
// 2. The meeting query (now verbatim_search) is planned with the query's words known (plpgsql
//    EXECUTE). As a SQL function it was planned for any words: a word found in most passages was
//    looked up as a rare one would be, with a bitmap of every passage holding it (about 70 ms),
//    where reading passages in order until enough match takes about 10.
// 3. It also returns each meeting's best passages among those it ranked, so the hits shown are
//    read by id. Before, the hits were matched and ranked again over every passage of the meetings
//    shown (15-40 ms for a common word).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create function verbatim_tsvector_pairs(t tsvector) returns tsvector
language sql immutable strict parallel safe as $$
  with w as (select u.lexeme, p from unnest(t) u, unnest(u.positions) p)
  select coalesce(array_to_tsvector(array_agg(distinct a.lexeme || ' ' || b.lexeme)), ''::tsvector)
    from w a join w b on b.p = a.p + 1
   -- A lexeme holds at most 2047 bytes. A longer pair is left out here and in every query
   -- (verbatim_phrase_pairs), so a passage of two long words is still indexed.
   where octet_length(a.lexeme) + octet_length(b.lexeme) < 2047
$$;

-- The pair lexemes a query's phrases require, as a conjunction, or null when there is none or the
-- query is not a conjunction at its top (an 'or' or a negated group). Lexemes keep their quoted
-- form: the quoting of 'a b' is the quoting of a and of b joined by a space.
create function verbatim_phrase_pairs(q tsquery) returns tsquery
language plpgsql immutable strict parallel safe as $$
declare
  tok text;
  last text := null;
  adjacent boolean := false;
  negated boolean := false;
  pairs text[] := '{}';
begin
  for tok in
    select m[1] from regexp_matches(q::text, $re$('(?:[^']|'')*'(?::[*A-D]+)?|<->|<[0-9]+>|[&|!()])$re$, 'g') m
  loop
    if tok = '|' then
      return null;
    elsif tok = '!' then
      negated := true; last := null; adjacent := false;
    elsif tok = '(' and negated then
      return null;
    elsif tok = '<->' then
      adjacent := last is not null;
    elsif left(tok, 1) = '''' then
      if negated or right(tok, 1) <> '''' then
        -- a negated word, or one with a prefix or weight mark: part of no pair
        last := null;
      else
        -- Quoted, a lexeme is never shorter than itself: a pair left out of the passages (2047
        -- bytes or more) is left out here too, and at worst a few more are, which only widens.
        if adjacent and octet_length(last) + octet_length(tok) - 4 < 2047 then
          pairs := pairs || ('''' || substr(last, 2, length(last) - 2) || ' ' || substr(tok, 2, length(tok) - 2) || '''');
        end if;
        last := tok;
      end if;
      negated := false; adjacent := false;
    else
      last := null; adjacent := false; negated := false;
    end if;
  end loop;
  if cardinality(pairs) = 0 then
    return null;
  end if;
  return array_to_string(pairs, ' & ')::tsquery;
end
$$;

create table search_phrase_pairs (
  passage_id bigint primary key references search_passages(id) on delete cascade,
  workspace_id uuid not null,
  pairs tsvector not null
);
create index search_phrase_pairs_pairs on search_phrase_pairs using gin (pairs) with (fastupdate = off);

-- Security definer: passages may be written as the tenant role, which only reads this table.
create function verbatim_passages_added() returns trigger
language plpgsql security definer set search_path from current as $$
begin
  insert into search_phrase_pairs (passage_id, workspace_id, pairs)
    select id, workspace_id, verbatim_tsvector_pairs(tsv) from added
  on conflict (passage_id) do update set pairs = excluded.pairs, workspace_id = excluded.workspace_id;
  return null;
end
$$;
create trigger search_passages_pairs_added after insert on search_passages
  referencing new table as added for each statement execute function verbatim_passages_added();
create trigger search_passages_pairs_changed after update on search_passages
  referencing new table as added for each statement execute function verbatim_passages_added();

insert into search_phrase_pairs (passage_id, workspace_id, pairs)
  select id, workspace_id, verbatim_tsvector_pairs(tsv) from search_passages;

do $$
begin
  if exists (select 1 from pg_roles where rolname = 'verbatim_tenant') then
    alter table search_phrase_pairs enable row level security;
    create policy tenant_isolation on search_phrase_pairs to verbatim_tenant
      using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
    grant select on search_phrase_pairs to verbatim_tenant;
  end if;
end $$;

-- The meetings a query matches, best first, each with its best passages (up to p_hits, best
-- first): the hits shown are read by id, not matched again over the meeting's every passage.
create function verbatim_search(
  p_query text, p_from timestamptz, p_to timestamptz, p_source text, p_status text,
  p_offset integer, p_limit integer, p_candidates integer, p_hits integer
) returns table (
  meeting_id uuid, title text, created_at timestamptz, source text, status text,
  best float8, total float8, hits bigint, passage_ids bigint[]
)
language plpgsql stable security definer set search_path from current
  -- Parallel workers cost more to start than the few thousand passages a query reads.
  set max_parallel_workers_per_gather = 0 as $fn$
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
$fn$;

-- Kept, with its result as before, for the api processes of the previous release during a
-- rolling upgrade; it goes with the next release.
drop function verbatim_search_meetings(text, timestamptz, timestamptz, text, text, integer, integer, integer);
create function verbatim_search_meetings(
  p_query text, p_from timestamptz, p_to timestamptz, p_source text, p_status text,
  p_offset integer, p_limit integer, p_candidates integer
) returns table (
  meeting_id uuid, title text, created_at timestamptz, source text, status text,
  best float8, total float8, hits bigint
)
language sql stable as $$
  select meeting_id, title, created_at, source, status, best, total, hits
    from verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates, 0)
$$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_search_meetings(text, timestamptz, timestamptz, text, text, integer, integer, integer);
drop function verbatim_search(text, timestamptz, timestamptz, text, text, integer, integer, integer, integer);
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
drop trigger search_passages_pairs_added on search_passages;
drop trigger search_passages_pairs_changed on search_passages;
drop function verbatim_passages_added();
drop table search_phrase_pairs;
drop function verbatim_phrase_pairs(tsquery);
drop function verbatim_tsvector_pairs(tsvector);
`.execute(db);
}
