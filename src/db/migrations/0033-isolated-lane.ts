// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 33 (J20): no innocent window is given up. A job over its reclaim cap, or a window over its
// error budget, is isolated instead of failed: it runs alone, in a process of its own, on a slow
// backoff, its input kept; only a job whose isolated runner dies several runs in a row is poison.
//
// 1. jobs: `isolated_at` (when it entered the isolated lane, null for an ordinary job), why
//    (`isolation_reason`: reclaim_cap_exceeded or error_budget_spent), how many isolated runs it
//    has had (`isolated_runs`, which sets its backoff) and how many of the last ones in a row
//    ended with their runner's death (`runner_deaths`, the poison count).
// 2. windows: `audio_released_at`: the audio of a window with no transcript is held after its
//    meeting ended (L16 as amended by J20) until this is set, by an operator's release or at the
//    held-audio retention bound.
// 3. A window is "in flight" (worth waiting for, and holding an upload's close-out back) when a job
//    is working on it and that job is not an isolated one waiting out its backoff: such a window
//    is held, and its meeting completes meanwhile with the gap shown. One definition, in SQL,
//    for the close-out gate below and the stores' counts (verbatim_window_in_flight).
import { sql, type Kysely } from 'kysely';
import { up as restoreCloseOutOf0030 } from './0030-one-job-insert.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table jobs
  add column isolated_at timestamptz,
  add column isolation_reason text,
  add column isolated_runs integer not null default 0,
  add column runner_deaths integer not null default 0;
create index jobs_isolated_active on jobs (run_after) where isolated_at is not null and status in ('pending', 'running');

alter table windows add column audio_released_at timestamptz;
-- The meeting's counts ask for failed windows whose audio is kept on every chunk (L21): few, so
-- a partial index keeps that O(failed windows), not O(windows).
create index windows_failed on windows (meeting_id) where status = 'failed';

-- A job at work on the window, other than an isolated one waiting out its backoff (a held window).
create function verbatim_window_in_flight(p_window uuid) returns boolean
language sql stable as $$
  select exists (
    select 1 from jobs j
     where j.subject_id = p_window and j.status in ('pending', 'running')
       and not (j.isolated_at is not null and j.status = 'pending' and j.run_after > now()))
$$;

-- A window held: its job is isolated and waits out its backoff.
create function verbatim_window_held(p_window uuid) returns boolean
language sql stable as $$
  select exists (
    select 1 from jobs j
     where j.subject_id = p_window and j.isolated_at is not null and j.status = 'pending'
       and j.run_after > now())
$$;

create or replace function verbatim_start_close_out(p_meeting uuid, p_actor text, p_job jsonb) returns text
language plpgsql as $$
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
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_start_close_out(uuid, text, jsonb);
drop function verbatim_window_held(uuid);
drop function verbatim_window_in_flight(uuid);
drop index windows_failed;
alter table windows drop column audio_released_at;
drop index jobs_isolated_active;
alter table jobs drop column isolated_at, drop column isolation_reason, drop column isolated_runs,
  drop column runner_deaths;
`.execute(db);
  // 0030's body of the three-argument close-out start (and its helpers, recreated unchanged).
  await sql`drop function verbatim_complete_window_attempt(uuid, uuid, uuid, text, jsonb, jsonb);
drop function verbatim_insert_job(jsonb, text);`.execute(db);
  await restoreCloseOutOf0030(db);
}
