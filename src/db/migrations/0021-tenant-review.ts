// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 13 (S10), after review of 0018/0019:
// - verbatim_start_close_out (last defined in 0015) called graphile_worker.add_job directly; called
//   from a tenant request (resubmit) the add was refused and swallowed as "undelivered". It now
//   enqueues through verbatim_enqueue and lets a missing privilege raise.
// - On PostgreSQL 16 and later a role's membership may lack the SET option (a CREATEROLE user is made
//   a member of the roles it creates without it), and SET ROLE then fails: grant it with SET.
// - storage_guards: the tenant may lock only the global guard and its own workspace's.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
do $$
begin
  if current_setting('server_version_num')::int >= 160000
     and not (select rolsuper from pg_roles where rolname = current_user)
     and not pg_has_role(current_user, 'verbatim_tenant', 'SET') then
    begin
      execute format('grant verbatim_tenant to %I with set true', current_user);
    exception when insufficient_privilege then
      raise exception 'role % may not SET ROLE verbatim_tenant', current_user
        using hint = 'grant it once as an administrator: grant verbatim_tenant to ' || current_user || ' with set true;';
    end;
  end if;
end $$;

alter table storage_guards enable row level security;
create policy tenant_isolation on storage_guards to verbatim_tenant
  using (scope in ('global', current_setting('verbatim.workspace_id', true)))
  with check (scope = current_setting('verbatim.workspace_id', true));

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
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop policy tenant_isolation on storage_guards;
alter table storage_guards disable row level security;

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
    perform graphile_worker.add_job('close-out-meeting',
      json_build_object('jobId', v_job.id, 'deliveryId', v_delivery),
      run_at => v_job.run_after, max_attempts => 5, job_key => v_delivery::text);
    update jobs set delivered_at = now() where id = v_job.id;
  exception when others then
    return 'undelivered';
  end;
  return 'started';
end $$;
`.execute(db);
}
