// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F5). Fair claiming. graphile-worker, our transport, hands out the due message with the
// lowest priority first, then the oldest. Each job is now given a round in its workspace's lane of
// its queue when it becomes pending: one past the lane's last pending job, and never below the
// queue's lowest pending round (the round being served now). A workspace's nth waiting job is in
// the nth round from now, so a workspace with one due window waits behind at most one window of
// each other workspace, however many windows they hold. A live meeting's windows are in a class
// of their own, ahead of every batch window (and of repairs).
//
// graphile-worker keeps priority in a smallint: the message's priority is the job's round less its
// queue's base, clamped, and the base is moved up to the lowest pending round by the worker's sweep
// (verbatim_fair_rebase), which re-prices the waiting messages in the same transaction.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table jobs add column fair_class smallint not null default 1,
                 add column fair_round double precision not null default 0;
create index jobs_fair_lane on jobs (workspace_id, queue, fair_class, fair_round) where status = 'pending';
create index jobs_fair_floor on jobs (queue, fair_class, fair_round) where status = 'pending';

alter table workspaces add column fair_weight real not null default 1
  check (fair_weight >= 0.1 and fair_weight <= 100);

create table fair_clocks (
  queue text not null,
  fair_class smallint not null,
  base double precision not null default 0,
  rebased_at timestamptz,
  primary key (queue, fair_class)
);
insert into fair_clocks (queue, fair_class)
  select q, c from unnest(array['intake', 'transcription', 'closeout', 'minutes', 'bots']) q,
                   unnest(array[0, 1]::smallint[]) c;
grant select on fair_clocks to verbatim_all_workspaces;

create function verbatim_fair_round() returns trigger
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $f$
-- verbatim_fair_round() trigger, before insert or update of status on jobs
--
-- F5: a job that becomes pending takes its round in its workspace's lane of its queue.
-- Effects:
--   new.fair_class: 0 for a live meeting's window, 1 for everything else
--   new.fair_round: the lane's last pending round plus 1 / the workspace's weight, never below the
--                   queue's lowest pending round or its base; the lane's first job gets the latter
declare
  v_lane double precision;
  v_floor double precision;
  v_base double precision;
  v_weight real;
begin
  if new.status <> 'pending' or (tg_op = 'UPDATE' and old.status = 'pending') then
    return new;
  end if;
  new.fair_class := case
    when new.kind = 'transcribe-window' and exists (
      select 1 from public.meetings m where m.id = new.meeting_id and m.source = 'live') then 0
    else 1 end;
  select max(j.fair_round) into v_lane from public.jobs j
    where j.workspace_id = new.workspace_id and j.queue = new.queue and j.fair_class = new.fair_class
      and j.status = 'pending' and j.id <> new.id;
  select min(j.fair_round) into v_floor from public.jobs j
    where j.queue = new.queue and j.fair_class = new.fair_class and j.status = 'pending' and j.id <> new.id;
  select c.base into v_base from public.fair_clocks c
    where c.queue = new.queue and c.fair_class = new.fair_class;
  select w.fair_weight into v_weight from public.workspaces w where w.id = new.workspace_id;
  new.fair_round := greatest(coalesce(v_lane + 1.0 / coalesce(v_weight, 1), 0),
                             coalesce(v_floor, 0), coalesce(v_base, 0));
  return new;
end $f$;

create trigger jobs_fair_round before insert or update of status on jobs
  for each row execute function verbatim_fair_round();
revoke all on function verbatim_fair_round() from public;

create function verbatim_fair_priority(p_round double precision, p_class smallint, p_base double precision)
  returns int language sql immutable as $f$
-- verbatim_fair_priority(p_round, p_class, p_base) returns int
--
-- F5: a message's priority (graphile-worker's smallint, lowest first): live windows in
-- [-30000, -15000], everything else in [0, 30000]; rounds past the range share its end, in
-- order of age.
  select (case when p_class = 0 then -30000 else 0 end)
       + least(greatest(floor(p_round - coalesce(p_base, 0)), 0), 15000 + 15000 * (p_class)::int)::int
$f$;

create function verbatim_enqueue(p_identifier text, p_payload json, p_run_at timestamptz,
                                 p_max_attempts int, p_job_key text, p_job uuid) returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $f$
-- verbatim_enqueue(p_identifier, p_payload, p_run_at, p_max_attempts, p_job_key, p_job) returns void
--
-- S10, F5: graphile-worker's add_job for our job p_job, at the priority of its fair round. The
-- queue's clock is read for share, so a rebase (which takes it for update) never re-prices the
-- waiting messages between this read and this message's commit.
-- Effects:
--   graphile_worker: the task queued
-- Raises:
--   what add_job raises
declare
  v_job record;
  v_base double precision;
  v_priority int;
begin
  select j.queue, j.fair_class, j.fair_round into v_job from public.jobs j where j.id = p_job;
  if found then
    select c.base into v_base from public.fair_clocks c
      where c.queue = v_job.queue and c.fair_class = v_job.fair_class
      for share;
    v_priority := public.verbatim_fair_priority(v_job.fair_round, v_job.fair_class, v_base);
  end if;
  perform graphile_worker.add_job(p_identifier, p_payload, run_at => p_run_at,
                                  max_attempts => p_max_attempts, job_key => p_job_key,
                                  priority => coalesce(v_priority, 0));
end $f$;

revoke all on function verbatim_enqueue(text, json, timestamptz, int, text, uuid) from public;
grant execute on function verbatim_enqueue(text, json, timestamptz, int, text, uuid) to verbatim_tenant;
grant execute on function verbatim_enqueue(text, json, timestamptz, int, text, uuid) to verbatim_all_workspaces;

create function verbatim_fair_rebase(p_min_gap double precision) returns int
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $f$
-- verbatim_fair_rebase(p_min_gap) returns int
--
-- F5: keeps the waiting messages' priorities inside graphile-worker's smallint. For each queue and
-- class whose lowest pending round is p_min_gap or more above its base, the base becomes that
-- round and every waiting message of the class is re-priced from its job's round, in one
-- transaction with the clock held for update (an enqueue holds it for share).
-- Effects:
--   fair_clocks: base, rebased_at
--   graphile_worker._private_jobs: priority of the unlocked messages of pending jobs
-- Output:
--   how many classes were rebased; a clock held by enqueues past the lock timeout is left for
--   the next sweep
declare
  c record;
  v_floor double precision;
  n int := 0;
begin
  perform set_config('lock_timeout', '500ms', true);
  for c in select * from public.fair_clocks order by queue, fair_class loop
    select min(j.fair_round) into v_floor from public.jobs j
      where j.queue = c.queue and j.fair_class = c.fair_class and j.status = 'pending';
    if v_floor is null or v_floor - c.base < p_min_gap then
      continue;
    end if;
    begin
      perform 1 from public.fair_clocks k
        where k.queue = c.queue and k.fair_class = c.fair_class for update;
      select min(j.fair_round) into v_floor from public.jobs j
        where j.queue = c.queue and j.fair_class = c.fair_class and j.status = 'pending';
      update public.fair_clocks k set base = v_floor, rebased_at = now()
        where k.queue = c.queue and k.fair_class = c.fair_class;
      update graphile_worker._private_jobs g
        set priority = public.verbatim_fair_priority(j.fair_round, j.fair_class, v_floor)
        from public.jobs j
        where g.key = j.delivery_id::text and g.locked_at is null
          and j.queue = c.queue and j.fair_class = c.fair_class and j.status = 'pending';
      n := n + 1;
    exception when lock_not_available then
      null;
    end;
  end loop;
  return n;
end $f$;

revoke all on function verbatim_fair_rebase(double precision) from public;
grant execute on function verbatim_fair_rebase(double precision) to verbatim_all_workspaces;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_fair_rebase(double precision);
drop function verbatim_enqueue(text, json, timestamptz, int, text, uuid);
drop function verbatim_fair_priority(double precision, smallint, double precision);
drop trigger jobs_fair_round on jobs;
drop function verbatim_fair_round();
drop table fair_clocks;
alter table workspaces drop column fair_weight;
drop index jobs_fair_floor;
drop index jobs_fair_lane;
alter table jobs drop column fair_round, drop column fair_class;
`.execute(db);
}
