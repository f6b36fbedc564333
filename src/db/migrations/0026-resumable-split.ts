// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 16 (J19): a recording's windows are cut while it is decoded and committed one by one, so
// the close-out of an upload must wait until the last window is cut, not only until the windows
// cut so far are settled. `windows_cut_at` marks the end of the split; meetings split before this
// migration (they have windows and no split job still to run) are marked as cut.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings add column windows_cut_at timestamptz;
update meetings m set windows_cut_at = m.updated_at
  where exists (select 1 from windows w where w.meeting_id = m.id)
    and not exists (select 1 from jobs j where j.meeting_id = m.id and j.kind = 'split-recording'
                    and j.status in ('pending', 'running'));

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

alter table meetings drop column windows_cut_at;
`.execute(db);
}
