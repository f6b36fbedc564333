// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 34 (scope 4): every function opens with a header naming its inputs, effects and outputs
// (as BullMQ's command scripts do), inside its body, so src/db/schema.sql shows it.
//
// Each definition below is pg_get_functiondef's of a database migrated to 0033, with two changes
// that keep it independent of where it runs: the name is not schema-qualified (like every other
// migration's), and `SET search_path FROM CURRENT` stands where pg_get_functiondef prints the
// value 0031/0032 captured with those same words. `up` puts the header first in each body, and
// nothing else changes: the body after it is byte for byte the one 0033 left, and a dump before
// and after differs only by the headers (test/schema-drift.test.ts). `down` runs the definitions
// as they are. CREATE OR REPLACE keeps each function's owner, grants and dependents.
import { sql, type Kysely } from 'kysely';

interface Documented {
  /** Comment lines, each ending with a newline. */
  header: string;
  /** A CREATE OR REPLACE FUNCTION statement as pg_get_functiondef prints it. */
  definition: string;
}

/** Where pg_get_functiondef's body opens: the header goes right after this. */
const BODY_OPENS = 'AS $function$\n';

const FUNCTIONS: Documented[] = [
  {
    header: `-- job_attempts_guard() returns trigger
--
-- An attempt's row changes only while it runs, and then only in its outcome: an ended attempt
-- is audit evidence.
--
-- Trigger: before update on job_attempts, for each row.
-- Input:
--   old, new  the attempt before and after the update
-- Effects:
--   new.ended_at := now() when the attempt leaves running without an end time
-- Output:
--   new (the update goes ahead)
-- Raises:
--   check_violation  the attempt had already ended, or the update changes its id, job, number,
--                    token, context, owner, input revision or start time
`,
    definition: `CREATE OR REPLACE FUNCTION job_attempts_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if old.status <> 'running' then
    raise exception 'attempt % is closed as %; only running -> outcome is permitted', old.id, old.status
      using errcode = 'check_violation';
  end if;
  if new.id <> old.id or new.job_id <> old.job_id or new.attempt_no <> old.attempt_no
     or new.token <> old.token or new.context <> old.context or new.owner <> old.owner
     or new.input_revision <> old.input_revision or new.started_at <> old.started_at then
    raise exception 'attempt % identity, token and context are immutable', old.id using errcode = 'check_violation';
  end if;
  if new.status <> 'running' and new.ended_at is null then
    new.ended_at := now();
  end if;
  return new;
end $function$`,
  },
  {
    header: `-- job_attempts_no_delete() returns trigger
--
-- Attempt rows are audit evidence and are not deleted.
--
-- Trigger: before delete on job_attempts, for each row.
-- Input:
--   old                        the attempt
--   verbatim.deleting_meeting  setting: 'on' lets the delete through
-- Output:
--   old (the delete goes ahead) when verbatim.deleting_meeting is 'on'
-- Raises:
--   check_violation  otherwise
`,
    definition: `CREATE OR REPLACE FUNCTION job_attempts_no_delete()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if current_setting('verbatim.deleting_meeting', true) = 'on' then
    return old;
  end if;
  raise exception 'attempt rows are audit evidence and are not deleted' using errcode = 'check_violation';
end $function$`,
  },
  {
    header: `-- verbatim_commit_window(p_window, p_segments, p_actor) returns boolean
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
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_commit_window(p_window uuid, p_segments jsonb, p_actor text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
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
end $function$`,
  },
  {
    header: `-- verbatim_complete_attempt(p_job, p_attempt, p_actor) returns void
--
-- J5: a running attempt and its job end completed. Checks no token: call it in the transaction
-- that passed verbatim_fence.
--
-- Input:
--   p_job      the job
--   p_attempt  its running attempt
--   p_actor    the actor of the audit rows
-- Effects:
--   job_attempts: status running -> completed, ended_at
--   jobs: status running -> completed, current_attempt_id null, completed_at, updated_at
--   audit_events: two rows (attempt running -> completed, details {jobId}; job running -> completed)
-- Raises:
--   VB001  the attempt is not a running attempt of this job (nothing written)
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_complete_attempt(p_job uuid, p_attempt uuid, p_actor text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  j jobs;
begin
  update job_attempts set status = 'completed', ended_at = now()
    where id = p_attempt and job_id = p_job and status = 'running';
  if not found then
    raise exception 'attempt % is not running', p_attempt using errcode = 'VB001';
  end if;
  update jobs set status = 'completed', current_attempt_id = null, completed_at = now(), updated_at = now()
    where id = p_job and status = 'running'
    returning * into j;
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, details)
  values
    (j.workspace_id, 'attempt', p_attempt::text, 'running', 'completed', p_actor, jsonb_build_object('jobId', p_job)),
    (j.workspace_id, 'job', p_job::text, 'running', 'completed', p_actor, null);
end $function$`,
  },
  {
    header: `-- verbatim_complete_window_attempt(p_job, p_attempt, p_token, p_actor, p_segments, p_closeout)
--   returns text
--
-- J5, the hot path in one statement (docs/hot-path.md): a transcribe-window attempt's fence, its
-- window's transcript, the attempt's and the job's completion, then its meeting's close-out if
-- the window was the last one unsettled.
--
-- Input:
--   p_job, p_attempt, p_token  the attempt, as verbatim_fence takes it
--   p_actor                    the actor of the audit rows
--   p_segments                 the window's segments, as verbatim_commit_window takes them
--   p_closeout                 the close-out job's spec, as verbatim_start_close_out takes it
-- Effects, in this order:
--   verbatim_fence; verbatim_commit_window on the payload's windowId (a window no longer pending
--   keeps what it has, and the job completes all the same); verbatim_complete_attempt;
--   verbatim_start_close_out on the payload's meetingId (last: the meeting's lock is held only
--   for its check and the commit)
-- Output:
--   verbatim_start_close_out's: 'not_started', 'started' or 'undelivered'
-- Raises:
--   VB001  the attempt no longer holds the job (nothing written)
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_complete_window_attempt(p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb, p_closeout jsonb)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  -- Last, so the meeting lock is held only for the check and the commit.
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor, p_closeout);
end $function$`,
  },
  {
    header: `-- verbatim_complete_window_attempt(p_job, p_attempt, p_token, p_actor, p_segments,
--   p_closeout_max_errors, p_closeout_max_reclaims) returns text
--
-- The previous release's signature, for its workers during a rolling upgrade: the six-argument
-- form, the close-out's spec built by the five-argument verbatim_start_close_out.
--
-- Input:
--   p_closeout_max_errors, p_closeout_max_reclaims  the close-out job's budgets (no delay)
--   the others                                      as the six-argument form
-- Effects, Output, Raises:
--   as the six-argument form
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_complete_window_attempt(p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb, p_closeout_max_errors integer, p_closeout_max_reclaims integer)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor,
    p_closeout_max_errors, p_closeout_max_reclaims, 0);
end $function$`,
  },
  {
    header: `-- verbatim_drop_drafts() returns trigger
--
-- L22: a window's final words replace the drafts they cover.
--
-- Trigger: after insert on windows when the new row is transcribed, and after update of status
-- on windows when it becomes transcribed; for each row.
-- Input:
--   new  the transcribed window
-- Effects:
--   drafts: the meeting's drafts whose midpoint lies in [new.start_ms, new.end_ms) deleted
-- Output:
--   null
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_drop_drafts()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  delete from drafts
   where meeting_id = new.meeting_id
     and (start_ms + end_ms) / 2 >= new.start_ms and (start_ms + end_ms) / 2 < new.end_ms;
  return null;
end $function$`,
  },
  {
    header: `-- verbatim_drop_meeting_drafts() returns trigger
--
-- L22: a meeting's drafts go once its transcript is complete.
--
-- Trigger: after update of transcript_completed_at on meetings when it is first set, for each row.
-- Input:
--   new  the meeting
-- Effects:
--   drafts: every draft of the meeting deleted
-- Output:
--   null
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_drop_meeting_drafts()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  delete from drafts where meeting_id = new.id;
  return null;
end $function$`,
  },
  {
    header: `-- verbatim_enqueue(p_identifier, p_payload, p_run_at, p_max_attempts, p_job_key) returns void
--
-- S10: graphile-worker's add_job for the tenant role, which has no privilege on the queue's own
-- tables. Security definer; only verbatim_tenant (and the owner) may execute it.
--
-- Input:
--   p_identifier    the task: a job's kind, or the outbox's dispatch task
--   p_payload       the task's payload (a job's: {jobId, deliveryId})
--   p_run_at        when it may run first (null: now)
--   p_max_attempts  graphile-worker's own tries of a handler that throws
--   p_job_key       graphile-worker's job key (a job's delivery_id): a queued job with the same
--                   key is replaced, not doubled
-- Effects:
--   graphile_worker: the task queued
-- Raises:
--   what add_job raises; callers enqueue behind a savepoint, and a job whose delivery failed
--   stays undelivered for the rescue sweep
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_enqueue(p_identifier text, p_payload json, p_run_at timestamp with time zone, p_max_attempts integer, p_job_key text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
begin
  perform graphile_worker.add_job(p_identifier, p_payload, run_at => p_run_at,
                                  max_attempts => p_max_attempts, job_key => p_job_key);
end $function$`,
  },
  {
    header: `-- verbatim_fence(p_job, p_attempt, p_token) returns jobs
--
-- J3: the fence of every write made for a job's attempt: the job's row is locked (for no key
-- update, until the transaction ends) only while the attempt still holds it.
--
-- Input:
--   p_job      the job
--   p_attempt  the attempt that claims it (jobs.current_attempt_id)
--   p_token    the attempt's token (job_attempts.token)
-- Effects:
--   the job's row locked; nothing written
-- Output:
--   the job's row: running, its current attempt p_attempt, running with token p_token
-- Raises:
--   VB001  the attempt no longer holds the job (it ended or was reclaimed, or the token is
--          stale); src/jobs/pg-job-store.ts reports it as LostLeaseError
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_fence(p_job uuid, p_attempt uuid, p_token uuid)
 RETURNS jobs
 LANGUAGE plpgsql
AS $function$
declare
  j jobs;
begin
  select * into j from jobs
    where id = p_job and status = 'running' and current_attempt_id = p_attempt
    for no key update;
  if not found or not exists (
    select 1 from job_attempts a where a.id = p_attempt and a.token = p_token and a.status = 'running'
  ) then
    raise exception 'attempt % no longer holds job %', p_attempt, p_job using errcode = 'VB001';
  end if;
  return j;
end $function$`,
  },
  {
    header: `-- verbatim_insert_job(p_spec, p_actor) returns setof jobs
--
-- The one place a job row is inserted (PgJobStore.createJob, verbatim_start_close_out): pending,
-- with its "created" audit row. Its delivery is the caller's to enqueue.
--
-- Input:
--   p_spec   jsonb the job catalog builds (src/jobs/catalog.ts): workspaceId, kind, queue,
--            subjectType, subjectId, meetingId, dedupeKey, payload (default {}), inputRevision
--            (default 0), maxErrors, maxReclaims, delayMs (default 0)
--   p_actor  the actor of the audit row
-- Effects, unless a job with this dedupe_key exists:
--   jobs: one row, status pending, run_after now() + delayMs, new id and delivery_id
--   audit_events: one row (job, null -> pending, reason '<kind> created')
-- Output:
--   the new job's row
--   no row  a job with this dedupe_key exists (nothing written)
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_insert_job(p_spec jsonb, p_actor text)
 RETURNS SETOF jobs
 LANGUAGE plpgsql
AS $function$
declare
  v_job jobs;
begin
  insert into jobs (id, workspace_id, kind, queue, subject_type, subject_id, meeting_id, dedupe_key, status,
                    payload, input_revision, max_errors, max_reclaims, run_after, delivery_id)
    values (gen_random_uuid(), (p_spec->>'workspaceId')::uuid, p_spec->>'kind', p_spec->>'queue',
            p_spec->>'subjectType', (p_spec->>'subjectId')::uuid, (p_spec->>'meetingId')::uuid,
            p_spec->>'dedupeKey', 'pending', coalesce(p_spec->'payload', '{}'::jsonb),
            coalesce((p_spec->>'inputRevision')::int, 0), (p_spec->>'maxErrors')::int,
            (p_spec->>'maxReclaims')::int,
            now() + coalesce((p_spec->>'delayMs')::int, 0) * interval '1 millisecond', gen_random_uuid())
    on conflict (dedupe_key) do nothing
    returning * into v_job;
  if v_job.id is null then
    return;
  end if;
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, reason)
    values (v_job.workspace_id, 'job', v_job.id::text, null, 'pending', p_actor, v_job.kind || ' created');
  return next v_job;
end $function$`,
  },
  {
    header: `-- verbatim_passages_added() returns trigger
--
-- O4: no search passage is without its phrase pairs. Security definer: the tenant role writes
-- passages but may only read search_phrase_pairs.
--
-- Trigger: after insert and after update on search_passages, for each statement, the new rows
-- as the transition table "added".
-- Effects:
--   search_phrase_pairs: each added passage's row (verbatim_tsvector_pairs of its tsv) inserted
--   or replaced
-- Output:
--   null
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_passages_added()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path FROM CURRENT
AS $function$
begin
  insert into search_phrase_pairs (passage_id, workspace_id, pairs)
    select id, workspace_id, verbatim_tsvector_pairs(tsv) from added
  on conflict (passage_id) do update set pairs = excluded.pairs, workspace_id = excluded.workspace_id;
  return null;
end
$function$`,
  },
  {
    header: `-- verbatim_phrase_pairs(q) returns tsquery
--
-- O4: the adjacent-word pairs a query requires, to look up in search_phrase_pairs before any
-- passage is read. A necessary condition, never a substitute: a passage matching q holds every
-- pair returned, so the look-up misses nothing.
--
-- Input:
--   q  a tsquery (websearch_to_tsquery of the user's words)
-- Output:
--   'a b' & 'c d' ...  each two quoted lexemes joined by <-> (distance one), neither negated nor
--                      marked (prefix, weight), under 2047 bytes together, as one pair lexeme
--   null               no such pair, or q has an or (|) or a negated group
-- Immutable and strict (null when q is null).
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_phrase_pairs(q tsquery)
 RETURNS tsquery
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
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
$function$`,
  },
  {
    header: `-- verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates,
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
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_search(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer, p_hits integer)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint, passage_ids bigint[])
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path FROM CURRENT
 SET max_parallel_workers_per_gather TO '0'
AS $function$
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
$function$`,
  },
  {
    header: `-- verbatim_search_meetings(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit,
--   p_candidates) returns table
--
-- The previous release's search, for its api processes during a rolling upgrade:
-- verbatim_search without passage ids.
--
-- Input, Output:
--   as verbatim_search, without p_hits and passage_ids
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_search_meetings(p_query text, p_from timestamp with time zone, p_to timestamp with time zone, p_source text, p_status text, p_offset integer, p_limit integer, p_candidates integer)
 RETURNS TABLE(meeting_id uuid, title text, created_at timestamp with time zone, source text, status text, best double precision, total double precision, hits bigint)
 LANGUAGE sql
 STABLE
AS $function$
  select meeting_id, title, created_at, source, status, best, total, hits
    from verbatim_search(p_query, p_from, p_to, p_source, p_status, p_offset, p_limit, p_candidates, 0)
$function$`,
  },
  {
    header: `-- verbatim_start_close_out(p_meeting, p_actor, p_job) returns text
--
-- J5/J19/J20: a processing meeting whose windows are all settled or held moves to finalizing,
-- and its close-out job is created and delivered, in the caller's transaction.
--
-- Input:
--   p_meeting  the meeting
--   p_actor    the actor of the audit rows
--   p_job      the close-out job's spec from the job catalog (src/jobs/catalog.ts); its
--              workspaceId is the meeting's
-- Effects, when it starts:
--   the meeting's row locked (for no key update)
--   meetings: status processing -> finalizing, finalizing_at, revision + 1, updated_at
--   audit_events: one row (meeting, processing -> finalizing, reason 'every window settled', or
--                 'every window settled or held' when a held window is still pending)
--   verbatim_insert_job(p_job); then verbatim_enqueue and jobs.delivered_at, behind a
--   subtransaction: a failed enqueue undoes only those two
-- Output:
--   'not_started'  nothing written: the meeting is not processing; or it is an upload's or a
--                  bot's whose split job is pending or running and its windows not all cut;
--                  or a pending window is in flight (verbatim_window_in_flight)
--   'started'      finalizing, and the close-out job delivered (or one with its dedupe key
--                  already existed)
--   'undelivered'  finalizing, and the job inserted but not enqueued: the rescue sweep
--                  delivers it
-- Raises:
--   insufficient_privilege  from the enqueue: a missing grant is a bug, not an outage
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_start_close_out(p_meeting uuid, p_actor text, p_job jsonb)
 RETURNS text
 LANGUAGE plpgsql
AS $function$
declare
  m meetings;
  v_job jobs;
begin
  -- A meeting that is not processing never becomes processing again once it has windows.
  if not exists (select 1 from meetings where id = p_meeting and status = 'processing') then
    return 'not_started';
  end if;
  select * into m from meetings where id = p_meeting for no key update;
  if not found or m.status is distinct from 'processing' then
    return 'not_started';
  end if;
  -- J19: while an upload's split job is pending or running, windows are still being cut.
  if m.source in ('upload', 'bot') and m.windows_cut_at is null and exists (
    select 1 from jobs j where j.meeting_id = p_meeting and j.kind = 'split-recording'
      and j.status in ('pending', 'running')
  ) then
    return 'not_started';
  end if;
  -- J20: a held window (isolated, waiting out its backoff) does not hold the meeting back.
  if exists (
    select 1 from windows w
    where w.meeting_id = p_meeting and w.status = 'pending' and verbatim_window_in_flight(w.id)
  ) then
    return 'not_started';
  end if;
  update meetings set status = 'finalizing', finalizing_at = now(), revision = revision + 1, updated_at = now()
    where id = p_meeting;
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, reason)
    values (m.workspace_id, 'meeting', p_meeting::text, 'processing', 'finalizing', p_actor,
            case when exists (select 1 from windows w where w.meeting_id = p_meeting and w.status = 'pending')
                 then 'every window settled or held' else 'every window settled' end);
  select * into v_job
    from verbatim_insert_job(p_job || jsonb_build_object('workspaceId', m.workspace_id), p_actor);
  if not found then
    return 'started';
  end if;
  begin
    perform verbatim_enqueue(v_job.kind,
      json_build_object('jobId', v_job.id, 'deliveryId', v_job.delivery_id),
      v_job.run_after, 5, v_job.delivery_id::text);
    update jobs set delivered_at = now() where id = v_job.id;
  exception
    -- A privilege missing is a bug, not an outage: it must not be swallowed as one.
    when insufficient_privilege then raise;
    when others then return 'undelivered';
  end;
  return 'started';
end $function$`,
  },
  {
    header: `-- verbatim_start_close_out(p_meeting, p_actor, p_max_errors, p_max_reclaims, p_delay_ms)
--   returns text
--
-- The previous release's signature, for its workers during a rolling upgrade: the
-- three-argument form with the close-out-meeting spec those workers could not pass (queue
-- closeout, dedupe key 'close-out:<meeting>', payload {meetingId}).
--
-- Input:
--   p_max_errors, p_max_reclaims  the close-out job's budgets
--   p_delay_ms                    its delay
--   the others                    as the three-argument form
-- Effects, Output, Raises:
--   as the three-argument form
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_start_close_out(p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer)
 RETURNS text
 LANGUAGE sql
AS $function$
  select verbatim_start_close_out(p_meeting, p_actor, jsonb_build_object(
    'kind', 'close-out-meeting', 'queue', 'closeout', 'subjectType', 'meeting', 'subjectId', p_meeting,
    'meetingId', p_meeting, 'dedupeKey', 'close-out:' || p_meeting,
    'payload', jsonb_build_object('meetingId', p_meeting),
    'maxErrors', p_max_errors, 'maxReclaims', p_max_reclaims, 'delayMs', p_delay_ms));
$function$`,
  },
  {
    header: `-- verbatim_stream_change() returns trigger
--
-- L23: each change to a meeting is a row of its stream, and wakes the stream's readers.
--
-- Trigger: after update on meetings when the row changed; after insert on windows when not
-- pending, and after update of status, start_ms or end_ms on windows when one changed; after
-- insert on drafts; for each row.
-- Input:
--   new            the meeting, window or draft
--   tg_table_name  which of them
-- Effects:
--   meeting_stream: one row (kind 'meeting', 'window' or 'draft'; ref the window's or draft's
--                   id), without a position: readers number rows after commit
--   NOTIFY verbatim_stream with the meeting's id (sent at commit)
-- Output:
--   null
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_stream_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
end $function$`,
  },
  {
    header: `-- verbatim_tsvector_pairs(t) returns tsvector
--
-- O4: a passage's phrase pairs: each two lexemes at adjacent positions, as one lexeme 'a b'.
--
-- Input:
--   t  the passage's tsvector
-- Output:
--   the pairs, without positions ('' when there is none). A pair of 2047 bytes or more (the
--   limit of a lexeme) is left out, as verbatim_phrase_pairs leaves it out of every query.
-- Immutable and strict (null when t is null).
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_tsvector_pairs(t tsvector)
 RETURNS tsvector
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$
  with w as (select u.lexeme, p from unnest(t) u, unnest(u.positions) p)
  select coalesce(array_to_tsvector(array_agg(distinct a.lexeme || ' ' || b.lexeme)), ''::tsvector)
    from w a join w b on b.p = a.p + 1
   -- A lexeme holds at most 2047 bytes. A longer pair is left out here and in every query
   -- (verbatim_phrase_pairs), so a passage of two long words is still indexed.
   where octet_length(a.lexeme) + octet_length(b.lexeme) < 2047
$function$`,
  },
  {
    header: `-- verbatim_unqueue(p_job_key) returns void
--
-- S10: graphile-worker's remove_job for the tenant role, which has no privilege on the queue's
-- own tables. Security definer; only verbatim_tenant (and the owner) may execute it.
--
-- Input:
--   p_job_key  the queued task's key (a job's delivery_id)
-- Effects:
--   graphile_worker: the task removed; one a worker holds is left to finish, its key cleared
--   and its retries spent
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_unqueue(p_job_key text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
begin
  perform graphile_worker.remove_job(p_job_key);
end $function$`,
  },
  {
    header: `-- verbatim_window_held(p_window) returns boolean
--
-- J20: the window is held: its job is isolated and waits out its backoff. A held window does
-- not hold its meeting's close-out back.
--
-- Input:
--   p_window  the window (jobs.subject_id)
-- Output:
--   true when an isolated job of the window is pending with run_after still ahead
-- Stable.
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_window_held(p_window uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  select exists (
    select 1 from jobs j
     where j.subject_id = p_window and j.isolated_at is not null and j.status = 'pending'
       and j.run_after > now())
$function$`,
  },
  {
    header: `-- verbatim_window_in_flight(p_window) returns boolean
--
-- J20: a job is at work on the window, worth waiting for: the one definition used by the
-- close-out's gate (verbatim_start_close_out) and the stores' counts.
--
-- Input:
--   p_window  the window (jobs.subject_id)
-- Output:
--   true when a job of the window is pending or running and is not held (verbatim_window_held)
-- Stable.
`,
    definition: `CREATE OR REPLACE FUNCTION verbatim_window_in_flight(p_window uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  select exists (
    select 1 from jobs j
     where j.subject_id = p_window and j.status in ('pending', 'running')
       and not (j.isolated_at is not null and j.status = 'pending' and j.run_after > now()))
$function$`,
  },
  {
    header: `-- window_tallies_apply(p_meeting, p_status, p_sign) returns void
--
-- A window counted into (p_sign 1) or out of (-1) its meeting's tallies.
--
-- Input:
--   p_meeting  the window's meeting
--   p_status   the window's status; superseded windows are not counted (nothing done)
--   p_sign     1 or -1
-- Effects:
--   window_tallies: the meeting's row created, or its total and its p_status count moved by
--   p_sign; nothing when the meeting no longer exists
`,
    definition: `CREATE OR REPLACE FUNCTION window_tallies_apply(p_meeting uuid, p_status text, p_sign integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  if p_status = 'superseded' then
    return;
  end if;
  insert into window_tallies (meeting_id, total, pending, transcribed, failed, missing)
  select p_meeting, p_sign,
    case when p_status = 'pending' then p_sign else 0 end,
    case when p_status = 'transcribed' then p_sign else 0 end,
    case when p_status = 'failed' then p_sign else 0 end,
    case when p_status = 'missing' then p_sign else 0 end
  where exists (select 1 from meetings where id = p_meeting)
  on conflict (meeting_id) do update set
    total = window_tallies.total + excluded.total,
    pending = window_tallies.pending + excluded.pending,
    transcribed = window_tallies.transcribed + excluded.transcribed,
    failed = window_tallies.failed + excluded.failed,
    missing = window_tallies.missing + excluded.missing;
end $function$`,
  },
  {
    header: `-- window_tallies_track() returns trigger
--
-- Keeps window_tallies (per meeting: windows in all and by status, superseded ones not counted),
-- so reading a meeting's counts does not grow with the meeting.
--
-- Trigger: constraint trigger after insert, delete or update of status on windows, deferred to
-- commit (after every other lock the transaction takes: no lock-order hazard), for each row.
-- Effects:
--   window_tallies_apply(old, -1) on update and delete, then (new, 1) on insert and update
-- Output:
--   null
`,
    definition: `CREATE OR REPLACE FUNCTION window_tallies_track()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform window_tallies_apply(old.meeting_id, old.status, -1);
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform window_tallies_apply(new.meeting_id, new.status, 1);
  end if;
  return null;
end $function$`,
  },
];

function withHeader({ header, definition }: Documented): string {
  const at = definition.indexOf(BODY_OPENS);
  if (at === -1 || definition.indexOf(BODY_OPENS, at + 1) !== -1) {
    throw new Error(`no single body opening in: ${definition.slice(0, 80)}`);
  }
  const cut = at + BODY_OPENS.length;
  return definition.slice(0, cut) + header + definition.slice(cut);
}

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const f of FUNCTIONS) await sql.raw(withHeader(f)).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const f of FUNCTIONS) await sql.raw(f.definition).execute(db);
}
