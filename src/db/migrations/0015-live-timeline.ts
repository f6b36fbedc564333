// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// L19-L21: a live meeting's timeline is never closed to its own audio (docs/live-meetings.md).
// Chunks get a position on the timeline once every sequence number before them is placed; a
// sequence number that did not arrive in time is a reserved gap, which its chunk may still fill
// later, when a repair re-cuts and re-transcribes the windows it touches. Live windows read their
// audio from the chunks (no window copy), so cutting needs no blob I/O.
//
// Workers older than this migration must be stopped before it runs: verbatim_commit_window now
// takes segment times relative to the window's start.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- Where a chunk sits on the meeting's timeline (16 kHz samples); null until every sequence number
-- before it is placed (a stored chunk or a reserved gap).
alter table chunks add column start_samples bigint;
-- The chunk's energy per 10 ms (float32, little-endian), for placing window boundaries in quiet
-- stretches (L18) without reading the audio back.
alter table chunks add column energy bytea;
-- A WebM piece read without the piece before it (the reader started at its next cluster): its
-- original bytes are kept until that piece arrives, so nothing of it is lost.
alter table chunks add column decoded_after_gap boolean not null default false;
-- A WebM piece that could not be decoded at all (its stretch has no audio).
alter table chunks add column undecodable boolean not null default false;
create index chunks_position on chunks (meeting_id, start_samples) where start_samples is not null;
create index chunks_unplaced on chunks (meeting_id, seq) where start_samples is null;

-- A run of sequence numbers that had not arrived when the timeline went on past them, reserved as
-- silence of the nominal chunk length. When one of them arrives, the run is split and its own
-- one-number gap is marked arrived until a repair places the chunk and re-transcribes around it.
create table timeline_gaps (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id),
  first_seq integer not null check (first_seq >= 0),
  end_seq integer not null,
  start_samples bigint not null check (start_samples >= 0),
  samples bigint not null check (samples >= 0),
  arrived_at timestamptz,
  created_at timestamptz not null default now(),
  check (end_seq > first_seq),
  check (arrived_at is null or end_seq = first_seq + 1),
  unique (meeting_id, first_seq)
);
create index timeline_gaps_position on timeline_gaps (meeting_id, start_samples);
create index timeline_gaps_arrived on timeline_gaps (meeting_id) where arrived_at is not null;

-- The frontier: every sequence number below next_seq is placed, and they end at placed_samples.
alter table meetings add column next_seq integer not null default 0;
alter table meetings add column placed_samples bigint not null default 0;
-- How many seqs are reserved and have not arrived (the runs' sizes summed), kept as runs change, so
-- reading it does not grow with the number of runs.
alter table meetings add column missing_count integer not null default 0 check (missing_count >= 0);
-- Since when a chunk beyond the frontier has waited for the one at it (the gap patience clock).
alter table meetings add column frontier_blocked_at timestamptz;
-- L20: the number of chunks End declared; a sequence number at or beyond it is refused.
alter table meetings add column declared_chunks integer check (declared_chunks >= 0);
-- Set when the close-out cut the last stretch: after it, new audio is cut by repairs only.
alter table meetings add column timeline_closed_at timestamptz;
-- How many times a published transcript was revised (API: revision), and which revision the
-- minutes describe.
alter table meetings add column transcript_revision integer not null default 0;
alter table meetings add column minutes_revision integer;
alter table meetings add column last_repair_at timestamptz;
alter table meetings add column repair_failure_code text;
alter table meetings add column repair_failure_message text;

-- Live windows: their stretch in samples, read from the chunks at transcription time.
alter table windows add column start_samples bigint;
alter table windows add column end_samples bigint;
alter table windows add column superseded_at timestamptz;
alter table windows drop constraint windows_status_check;
alter table windows add constraint windows_status_check
  check (status in ('pending', 'transcribed', 'failed', 'missing', 'superseded'));
create index windows_position on windows (meeting_id, start_samples)
  where start_samples is not null and status <> 'superseded';

-- Window counts per meeting, kept by a trigger that runs at commit (after every other lock the
-- transaction takes, so it adds no lock-order hazard), so reading them does not grow with the
-- meeting. Superseded windows are not counted.
create table window_tallies (
  meeting_id uuid primary key references meetings(id) on delete cascade,
  total integer not null default 0,
  pending integer not null default 0,
  transcribed integer not null default 0,
  failed integer not null default 0,
  missing integer not null default 0
);

create function window_tallies_apply(p_meeting uuid, p_status text, p_sign integer) returns void
language plpgsql as $$
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
end $$;

create function window_tallies_track() returns trigger language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    perform window_tallies_apply(old.meeting_id, old.status, -1);
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    perform window_tallies_apply(new.meeting_id, new.status, 1);
  end if;
  return null;
end $$;
create constraint trigger window_tallies_track after insert or update of status or delete on windows
  deferrable initially deferred for each row execute function window_tallies_track();

insert into window_tallies (meeting_id, total, pending, transcribed, failed, missing)
select meeting_id, count(*),
  count(*) filter (where status = 'pending'), count(*) filter (where status = 'transcribed'),
  count(*) filter (where status = 'failed'), count(*) filter (where status = 'missing')
from windows group by meeting_id;

-- Segment times are given relative to the window and made absolute here, from the window as it
-- is when the commit holds it: a repair may have moved the window since the worker read it.
create or replace function verbatim_commit_window(p_window uuid, p_segments jsonb, p_actor text) returns boolean
language plpgsql as $$
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
end $$;

-- Only an upload that is processing starts its close-out from its last window, so only then is the
-- meeting locked: a live window's commit (job, then window) never waits for the meeting, which a
-- repair holds while it moves windows (lock order: docs/live-meetings.md).
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

-- Existing live meetings: windows get their stretch in samples, chunks their positions, and the
-- chunks settled as missing become gaps (at the default 5 s chunk length, the length they were
-- reserved with).
update windows w set start_samples = round(w.start_ms * 16), end_samples = round(w.end_ms * 16)
  from meetings m where m.id = w.meeting_id and m.source = 'live';
update windows w set end_samples = m.cut_samples
  from meetings m
  where m.id = w.meeting_id and m.source = 'live' and abs(w.end_samples - m.cut_samples) <= 16
    and not exists (select 1 from windows n where n.meeting_id = w.meeting_id and n.start_samples > w.start_samples);
with seqs as (
  select m.id as meeting_id, m.workspace_id, g.seq, c.id as chunk_id,
         (g.seq = any (m.missing_chunks) and c.id is null) as missing,
         case when g.seq = any (m.missing_chunks) and c.id is null then 80000 else c.samples end as len
    from meetings m
    cross join lateral generate_series(0, coalesce((select max(seq) from chunks x where x.meeting_id = m.id), -1)) as g(seq)
    left join chunks c on c.meeting_id = m.id and c.seq = g.seq
   where m.source = 'live'
), placed as (
  select *, coalesce(sum(len) over (partition by meeting_id order by seq), 0) - len as start,
         bool_and(len is not null) over (partition by meeting_id order by seq) as known
    from seqs
), chunk_positions as (
  update chunks c set start_samples = p.start,
         undecodable = (c.samples = 0 and c.seq = any (m.missing_chunks))
    from placed p, meetings m
   where p.chunk_id = c.id and p.known and m.id = c.meeting_id
  returning c.id
), gaps as (
  insert into timeline_gaps (id, workspace_id, meeting_id, first_seq, end_seq, start_samples, samples)
  select gen_random_uuid(), workspace_id, meeting_id, seq, seq + 1, start, len from placed where missing and known
  returning id
)
update meetings m set next_seq = f.next_seq, placed_samples = f.placed
  from (select meeting_id, coalesce(max(seq) filter (where known), -1) + 1 as next_seq,
               coalesce(sum(len) filter (where known), 0) as placed
          from placed group by meeting_id) f
 where f.meeting_id = m.id;
update meetings m set missing_count = g.n
  from (select meeting_id, sum(end_seq - first_seq)::int as n from timeline_gaps where arrived_at is null
        group by meeting_id) g
 where g.meeting_id = m.id;
update meetings set timeline_closed_at = coalesce(transcript_completed_at, now())
  where source = 'live' and (status in ('complete', 'failed') or transcript_completed_at is not null);
update meetings set minutes_revision = 0 where minutes_status = 'written';
alter table meetings drop column missing_chunks;
`.execute(db);
}

export function down(): Promise<void> {
  return Promise.reject(new Error('0015-live-timeline cannot be undone: missing-chunk lists became gaps'));
}
