// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// J19 (review of issue 16): the close-out waits for an upload's split while its split job is
// pending or running, not merely while `windows_cut_at` is unset. A worker of an earlier release
// finishing a split during a rolling upgrade completes it without setting `windows_cut_at`; with
// the 0026 rule its meeting would wait for ever, and a resubmission could not ask for the split
// again (its completed job holds the key). A meeting already left so is closed out by a
// resubmission (POST /v1/meetings/{id}/resubmit), which now finds no split to wait for.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create or replace function verbatim_start_close_out(
  p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer
) returns text
language plpgsql as $$
declare
  m meetings;
  v_job jobs;
  v_delivery uuid := gen_random_uuid();
begin
  -- A meeting that is not processing never becomes processing again once it has windows.
  if not exists (select 1 from meetings where id = p_meeting and status = 'processing') then
    return 'not_started';
  end if;
  select * into m from meetings where id = p_meeting for no key update;
  if not found or m.status is distinct from 'processing' then
    return 'not_started';
  end if;
  -- J19: an upload's windows are cut while its recording is decoded; until the last one is cut,
  -- every window being settled does not mean the meeting is. The split still to finish is its
  -- job, pending or running: a split by a process older than 0026 completes without marking the
  -- meeting, and must not leave it waiting for ever.
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
    perform verbatim_enqueue('close-out-meeting',
      json_build_object('jobId', v_job.id, 'deliveryId', v_delivery),
      v_job.run_after, 5, v_delivery::text);
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
create or replace function verbatim_start_close_out(
  p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer
) returns text
language plpgsql as $$
declare
  m meetings;
  v_job jobs;
  v_delivery uuid := gen_random_uuid();
begin
  -- A meeting that is not processing never becomes processing again once it has windows.
  if not exists (select 1 from meetings where id = p_meeting and status = 'processing') then
    return 'not_started';
  end if;
  select * into m from meetings where id = p_meeting for no key update;
  if not found or m.status is distinct from 'processing' then
    return 'not_started';
  end if;
  -- J19: an upload's windows are cut while its recording is decoded; until the last one is cut,
  -- every window being settled does not mean the meeting is.
  if m.source in ('upload', 'bot') and m.windows_cut_at is null then
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
    perform verbatim_enqueue('close-out-meeting',
      json_build_object('jobId', v_job.id, 'deliveryId', v_delivery),
      v_job.run_after, 5, v_delivery::text);
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
