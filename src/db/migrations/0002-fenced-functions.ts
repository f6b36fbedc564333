// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Row locks are FOR NO KEY UPDATE: they serialise writers of a row like FOR UPDATE, but do not
// conflict with the KEY SHARE locks that inserting rows which reference it (segments, attempts)
// take — with FOR UPDATE, two windows of one meeting committing at once deadlock.
//
// The fenced writes as SQL functions, so the hottest path — committing one transcribed window — is
// one round trip instead of a dozen (docs/hot-path.md). The application calls these same functions
// for every fenced write, so each rule is written once.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- The close-out check looks only at a meeting's pending windows.
create index windows_pending on windows (meeting_id) where status = 'pending';

-- J3: locks the job and checks that the token is its current running attempt; raises VB001 if not.
create function verbatim_fence(p_job uuid, p_attempt uuid, p_token uuid) returns jobs
language plpgsql as $$
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
end $$;

-- J5: closes the running attempt as completed and completes its job, with both audit rows.
create function verbatim_complete_attempt(p_job uuid, p_attempt uuid, p_actor text) returns void
language plpgsql as $$
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
end $$;

-- J15/L18: a pending window becomes transcribed with its segments, once. It does not lock the
-- meeting, so windows of one meeting commit in parallel; verbatim_start_close_out serialises the
-- one decision that needs it. Lock order on this path: job, window, meeting — so nothing may lock
-- a meeting and then a window whose job is still active.
create function verbatim_commit_window(p_window uuid, p_segments jsonb, p_actor text) returns boolean
language plpgsql as $$
declare
  w windows;
  n integer := jsonb_array_length(p_segments);
begin
  select * into w from windows where id = p_window;
  update windows set status = 'transcribed', transcribed_at = now(), segment_count = n
    where id = p_window and status = 'pending';
  if not found then
    return false;
  end if;
  insert into segments (workspace_id, meeting_id, window_id, seq, start_ms, end_ms, text)
    select w.workspace_id, w.meeting_id, w.id, s.seq, s.start_ms, s.end_ms, s.text
    from jsonb_to_recordset(p_segments) as s(seq integer, start_ms integer, end_ms integer, text text);
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, details)
    values (w.workspace_id, 'window', w.id::text, 'pending', 'transcribed', p_actor, jsonb_build_object('segments', n));
  return true;
end $$;

-- Once no window of a processing meeting is still being attempted, the meeting moves to finalizing
-- and its close-out job is created and delivered. Call it after the caller's own window is settled:
-- the meeting lock, held to commit, makes the last two windows' checks run one after the other, so
-- the second sees the first committed and neither can miss the close-out. The delivery is added behind a savepoint (the
-- exception block): if it fails, the rest commits and the rescue sweep re-drives the job (J9).
-- Mirrors PgJobStore.createJob and enqueueDelivery (transport max_attempts 5, job_key = delivery id).
-- Returns 'not_started', 'started', or 'undelivered' (started, but the delivery could not be added:
-- the caller logs it, and the rescue sweep re-drives the job).
create function verbatim_start_close_out(
  p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer
) returns text
language plpgsql as $$
declare
  m meetings;
  v_job jobs;
  v_delivery uuid := gen_random_uuid();
begin
  select * into m from meetings where id = p_meeting for no key update;
  if not found or m.status is distinct from 'processing' then
    return 'not_started';
  end if;
  if exists (
    select 1 from windows w
    where w.meeting_id = p_meeting and w.status = 'pending'
      and exists (select 1 from jobs j where j.subject_id = w.id and j.status in ('pending', 'running'))
  ) then
    return 'not_started';
  end if;
  update meetings set status = 'finalizing', finalizing_at = now(), revision = revision + 1, updated_at = now()
    where id = p_meeting;
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, reason)
    values (m.workspace_id, 'meeting', p_meeting::text, 'processing', 'finalizing', p_actor, 'every window settled');
  insert into jobs (id, workspace_id, kind, queue, subject_type, subject_id, meeting_id, dedupe_key, status,
                    payload, max_errors, max_reclaims, run_after, delivery_id)
    values (gen_random_uuid(), m.workspace_id, 'close-out-meeting', 'closeout', 'meeting', p_meeting, p_meeting,
            'close-out:' || p_meeting, 'pending', jsonb_build_object('meetingId', p_meeting), p_max_errors,
            p_max_reclaims, now() + p_delay_ms * interval '1 millisecond', v_delivery)
    on conflict (dedupe_key) do nothing
    returning * into v_job;
  if v_job.id is null then
    return 'started';
  end if;
  insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, reason)
    values (m.workspace_id, 'job', v_job.id::text, null, 'pending', p_actor, 'close-out-meeting created');
  begin
    perform graphile_worker.add_job('close-out-meeting',
      json_build_object('jobId', v_job.id, 'deliveryId', v_delivery),
      run_at => v_job.run_after, max_attempts => 5, job_key => v_delivery::text);
    update jobs set delivered_at = now() where id = v_job.id;
  exception when others then
    return 'undelivered';
  end;
  return 'started';
end $$;

-- The hot path: fence, commit the window, start the close-out if it was the last, complete — one
-- statement, one transaction.
create function verbatim_complete_window_attempt(
  p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb,
  p_closeout_max_errors integer, p_closeout_max_reclaims integer
) returns text
language plpgsql as $$
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  -- Last, so the meeting lock is held only for the check and the commit.
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor,
    p_closeout_max_errors, p_closeout_max_reclaims, 0);
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_complete_window_attempt, verbatim_start_close_out, verbatim_commit_window,
  verbatim_complete_attempt, verbatim_fence;
drop index windows_pending;
`.execute(db);
}
