// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table workspaces (
  id uuid primary key,
  name text not null,
  created_at timestamptz not null default now()
);

create table api_keys (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  name text not null,
  prefix text not null unique,
  key_hash text not null,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

create table meetings (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  source text not null check (source in ('live', 'upload', 'bot')),
  title text not null,
  language text,
  status text not null check (status in ('created', 'recording', 'processing', 'finalizing', 'complete', 'failed')),
  window_ms integer not null,
  duration_ms integer,
  revision integer not null default 0,
  failure_code text,
  failure_message text,
  minutes_status text not null default 'none'
    check (minutes_status in ('none', 'pending', 'written', 'unavailable', 'failed')),
  minutes_code text,
  minutes_message text,
  minutes jsonb,
  transcript_completed_at timestamptz,
  closeout_wait_started_at timestamptz,
  untranscribed_in_flight integer,
  untranscribed_exhausted integer,
  audio_deleted_at timestamptz,
  created_at timestamptz not null default now(),
  recording_at timestamptz,
  processing_at timestamptz,
  finalizing_at timestamptz,
  completed_at timestamptz,
  failed_at timestamptz,
  minutes_written_at timestamptz,
  updated_at timestamptz not null default now()
);
create index meetings_workspace_created on meetings (workspace_id, created_at desc);

create table blobs (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null,
  kind text not null check (kind in ('recording', 'window', 'chunk')),
  object_key text not null unique,
  sha256 text not null,
  size_bytes bigint not null,
  content_type text,
  created_at timestamptz not null default now(),
  deleted_at timestamptz
);
create index blobs_meeting on blobs (meeting_id);

create table windows (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id),
  index integer not null,
  start_ms integer not null,
  end_ms integer not null check (end_ms > start_ms),
  blob_id uuid references blobs(id),
  status text not null check (status in ('pending', 'transcribed', 'failed', 'missing')),
  failure_code text,
  failure_message text,
  segment_count integer,
  created_at timestamptz not null default now(),
  transcribed_at timestamptz,
  failed_at timestamptz,
  missing_at timestamptz,
  unique (meeting_id, index)
);

create table segments (
  id bigserial primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id),
  window_id uuid not null references windows(id),
  seq integer not null,
  start_ms integer not null,
  end_ms integer not null,
  text text not null,
  unique (window_id, seq)
);
create index segments_meeting on segments (meeting_id, start_ms);

create table jobs (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  kind text not null,
  queue text not null,
  subject_type text not null,
  subject_id uuid not null,
  meeting_id uuid,
  dedupe_key text unique,
  status text not null check (status in ('pending', 'running', 'completed', 'failed', 'canceled', 'superseded')),
  payload jsonb not null default '{}',
  input_revision integer not null default 0,
  attempt_count integer not null default 0,
  error_count integer not null default 0,
  reclaim_count integer not null default 0,
  wait_count integer not null default 0,
  max_errors integer not null,
  max_reclaims integer not null,
  run_after timestamptz not null default now(),
  delivery_id uuid not null,
  delivered_at timestamptz,
  dispatch_claimed_at timestamptz,
  current_attempt_id uuid,
  last_error_kind text,
  last_error_code text,
  last_error_message text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  running_at timestamptz,
  pending_at timestamptz not null default now(),
  completed_at timestamptz,
  failed_at timestamptz,
  canceled_at timestamptz,
  superseded_at timestamptz
);
create index jobs_status_queue on jobs (status, queue, run_after);
create index jobs_subject on jobs (subject_id, kind);
create index jobs_meeting on jobs (meeting_id);

create table job_attempts (
  id uuid primary key,
  job_id uuid not null references jobs(id),
  workspace_id uuid not null references workspaces(id),
  attempt_no integer not null,
  status text not null check (status in
    ('running', 'completed', 'retryable_failed', 'failed', 'canceled', 'superseded', 'lease_expired')),
  context jsonb not null,
  input_revision integer not null,
  owner text not null,
  token uuid not null,
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now(),
  lease_expires_at timestamptz not null,
  ended_at timestamptz,
  error_kind text,
  error_code text,
  error_message text,
  unique (job_id, attempt_no)
);
create unique index job_attempts_one_running on job_attempts (job_id) where status = 'running';
create index job_attempts_running_lease on job_attempts (lease_expires_at) where status = 'running';

-- J4: an attempt moves only from running to one outcome; its identity, token and context never change.
create function job_attempts_guard() returns trigger language plpgsql as $$
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
end $$;
create trigger job_attempts_guard before update on job_attempts for each row execute function job_attempts_guard();

create function job_attempts_no_delete() returns trigger language plpgsql as $$
begin
  if current_setting('verbatim.deleting_meeting', true) = 'on' then
    return old;
  end if;
  raise exception 'attempt rows are audit evidence and are not deleted' using errcode = 'check_violation';
end $$;
create trigger job_attempts_no_delete before delete on job_attempts for each row execute function job_attempts_no_delete();

create table workers (
  id text primary key,
  hostname text not null,
  pid integer not null,
  pool_ids text[] not null default '{}',
  started_at timestamptz not null default now(),
  heartbeat_at timestamptz not null default now(),
  stopped_at timestamptz,
  declared_dead_at timestamptz
);

create table audit_events (
  id bigserial primary key,
  workspace_id uuid,
  subject_type text not null,
  subject_id text not null,
  from_status text,
  to_status text not null,
  actor text not null,
  reason text,
  details jsonb,
  at timestamptz not null default clock_timestamp()
);
create index audit_subject on audit_events (subject_id, id);

create table outbox (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  event_type text not null,
  consumer text not null,
  subject_id uuid not null,
  payload jsonb not null,
  status text not null check (status in ('pending', 'delivered', 'failed')),
  attempt_count integer not null default 0,
  max_attempts integer not null,
  next_attempt_at timestamptz not null default now(),
  lease_owner text,
  lease_expires_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  delivered_at timestamptz,
  failed_at timestamptz
);
create index outbox_due on outbox (next_attempt_at) where status = 'pending';
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop table outbox, audit_events, workers, job_attempts, jobs, segments, windows, blobs, meetings, api_keys, workspaces;
drop function job_attempts_guard, job_attempts_no_delete;
`.execute(db);
}
