// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app
// (its way down re-applies 0027, a frozen migration itself).
//
// Issue 17 (item 5): a job row is inserted in one place. Until now the close-out's job was written
// by its own INSERT inside verbatim_start_close_out, a copy of PgJobStore.createJob with the
// close-out's queue, dedupe key, payload and budgets restated in SQL. Now:
// - verbatim_insert_job(spec, actor) inserts a pending job and its "created" audit row from the
//   spec the job catalog (src/jobs/catalog.ts) builds; PgJobStore.createJob calls it;
// - verbatim_start_close_out(meeting, actor, spec) and verbatim_complete_window_attempt(…, spec)
//   take the close-out's spec from the catalog and insert it through the same function;
// - the signatures of earlier releases stay, for workers of the release before this one during a
//   rolling upgrade, as thin wrappers that build the spec those workers could not pass. They are
//   the only place the close-out's rules are spelled in SQL, and go with the next release.
import { sql, type Kysely } from 'kysely';
import { up as restoreCloseOutOf0027 } from './0027-split-close-out-gate.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create function verbatim_insert_job(p_spec jsonb, p_actor text) returns setof jobs
language plpgsql as $$
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
end $$;

create function verbatim_start_close_out(p_meeting uuid, p_actor text, p_job jsonb) returns text
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

create function verbatim_complete_window_attempt(
  p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb, p_closeout jsonb
) returns text
language plpgsql as $$
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  -- Last, so the meeting lock is held only for the check and the commit.
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor, p_closeout);
end $$;

-- The previous release's signatures, for its workers during a rolling upgrade.
create or replace function verbatim_start_close_out(
  p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer
) returns text
language sql as $$
  select verbatim_start_close_out(p_meeting, p_actor, jsonb_build_object(
    'kind', 'close-out-meeting', 'queue', 'closeout', 'subjectType', 'meeting', 'subjectId', p_meeting,
    'meetingId', p_meeting, 'dedupeKey', 'close-out:' || p_meeting,
    'payload', jsonb_build_object('meetingId', p_meeting),
    'maxErrors', p_max_errors, 'maxReclaims', p_max_reclaims, 'delayMs', p_delay_ms));
$$;

create or replace function verbatim_complete_window_attempt(
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
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor,
    p_closeout_max_errors, p_closeout_max_reclaims, 0);
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_complete_window_attempt(uuid, uuid, uuid, text, jsonb, jsonb);
drop function verbatim_start_close_out(uuid, text, jsonb);
drop function verbatim_insert_job(jsonb, text);
`.execute(db);
  // The old signature's body as 0027 left it (the window wrapper above is 0002's body unchanged).
  await restoreCloseOutOf0027(db);
}
