import { SearchStore } from '../search/search-store.ts';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db/schema.ts';
import { POISON } from '../jobs/pg-job-store.ts';
import { failedWithAudioKept } from '../meetings/pg-meeting-store.ts';
import { STREAM_COUNTS_FRESH_SECONDS } from './stream-count-store.ts';

export interface QueueStats {
  queue: string;
  pending: number;
  due: number;
  running: number;
  oldestPendingAgeSeconds: number;
}

/** X1/X2: per queue, how much waits and how long the oldest due job has waited. */
export async function queueStats(db: Db): Promise<QueueStats[]> {
  const rows = await db
    .selectFrom('jobs')
    .select([
      'queue',
      sql<number>`(count(*) filter (where status = 'pending'))::int`.as('pending'),
      sql<number>`(count(*) filter (where status = 'pending' and run_after <= now()))::int`.as('due'),
      sql<number>`(count(*) filter (where status = 'running'))::int`.as('running'),
      sql<number>`coalesce(extract(epoch from now() - min(run_after) filter (where status = 'pending' and run_after <= now())), 0)::float`.as(
        'oldestPendingAgeSeconds',
      ),
    ])
    .groupBy('queue')
    .orderBy('queue')
    .execute();
  return rows;
}

export interface HealthFigures {
  leasesReclaimed: number;
  jobsQuarantined: number;
  /** J20: jobs in the isolated lane now (pending or running alone). */
  jobsIsolated: number;
  /** J20: jobs that killed their isolated runner too many runs in a row. */
  jobsPoison: number;
  /** J20: windows with no transcript whose audio is held (awaiting transcription, or failed with audio kept). */
  heldStretches: number;
  /** J20: how long the oldest held stretch has been held (0 when none). */
  heldStretchOldestSeconds: number;
  jobsFailed: number;
  minutesOutagesInProgress: number;
  /**
   * Jobs of any kind (windows, repairs, imports, minutes) that have waited out a provider outage
   * and have not finished: a window whose recognition times out on every try shows here.
   */
  jobsWaitingOutOutages: number;
  outboxPending: number;
  outboxFailed: number;
  workersAlive: number;
  audioAwaitingDeletion: number;
  oldestOutboxPendingAgeSeconds: number;
  cleanupPending: number;
  cleanupFailing: number;
  cleanupStagedExpired: number;
  oldestCleanupPendingAgeSeconds: number;
  webhooksPending: number;
  webhooksFailed: number;
  /** F6: endpoints the system disabled after their deliveries failed for days. */
  webhookEndpointsDisabled: number;
  botRecordingsOverdue: number;
  botRecordingsErroring: number;
  calendarFeedsFailing: number;
  lateChunksRepairing: number;
  lateChunksStuck: number;
  draftsShed: number;
  /** O2: published meetings the search index is behind on, and how long the oldest has waited. */
  searchLedgerMeetings: number;
  searchLedgerOldestSeconds: number;
}

/** B9: stored bytes per workspace, pending deletions included (what the quotas count). */
export async function storedBytesByWorkspace(db: Db): Promise<Array<{ workspaceId: string; bytes: number }>> {
  const result = await sql<{ workspaceId: string; bytes: number }>`
    select workspace_id::text as "workspaceId", sum(bytes)::float8 as bytes from (
      select workspace_id, size_bytes as bytes from blobs where deleted_at is null
      union all
      select workspace_id, bytes from object_cleanups) held
    group by workspace_id order by workspace_id`.execute(db);
  return result.rows;
}

/** F7: what one workspace uses now and this month; operators read it, metrics never name it. */
export interface WorkspaceUsage {
  workspaceId: string;
  name: string;
  /** F5: its share of each queue beside the others'. */
  weight: number;
  storedBytes: number;
  /** F1: bytes set aside for the windows of recordings being split (not stored yet). */
  reservedBytes: number;
  /** Transcription windows waiting to be claimed, and its jobs running now. */
  queuedWindows: number;
  runningJobs: number;
  /** Audio transcribed since the first of this month (UTC), in hours. */
  hoursThisMonth: number;
  /** Its cap on those hours, when an operator set one. */
  monthlyHoursCap: number | null;
  /** F5: at most this many of its batch jobs run at once, when an operator set it. */
  maxRunningJobs: number | null;
  /** F7: its event streams open on every api process that reported in the last minute. */
  openStreams: number;
}

/** F7: every workspace's usage (or one's), for `verbatim status`, `verbatim workspaces` and the operator page. */
export async function workspaceUsage(db: Db, workspaceId?: string): Promise<WorkspaceUsage[]> {
  const only = workspaceId === undefined ? sql`true` : sql`w.id = ${workspaceId}::uuid`;
  const result = await sql<WorkspaceUsage>`
    select w.id::text as "workspaceId", w.name, w.fair_weight::float8 as weight,
      coalesce((select sum(size_bytes) from blobs b where b.workspace_id = w.id and b.deleted_at is null), 0)::float8
        + coalesce((select sum(bytes) from object_cleanups c where c.workspace_id = w.id), 0)::float8
        as "storedBytes",
      coalesce((select sum(r.bytes) from quota_reservations r join meetings m on m.id = r.meeting_id
          where r.workspace_id = w.id and m.status = 'processing'), 0)::float8 as "reservedBytes",
      (select count(*) from jobs j where j.workspace_id = w.id and j.kind = 'transcribe-window'
          and j.status = 'pending')::int as "queuedWindows",
      (select count(*) from jobs j where j.workspace_id = w.id and j.status = 'running')::int as "runningJobs",
      ${hoursThisMonth(sql`w.id`)} as "hoursThisMonth",
      w.monthly_hours_cap::float8 as "monthlyHoursCap",
      w.max_running_jobs as "maxRunningJobs",
      coalesce((select sum(s.open) from stream_counts s where s.workspace_id = w.id
          and s.updated_at > now() - ${STREAM_COUNTS_FRESH_SECONDS} * interval '1 second'), 0)::int as "openStreams"
    from workspaces w where ${only} order by w.name, w.id`.execute(db);
  return result.rows;
}

/** F7: the audio hours a workspace (`id`, an SQL expression) had transcribed since the month began (UTC). */
function hoursThisMonth(id: RawBuilder<unknown>) {
  return sql<number>`(coalesce((select sum(x.end_ms - x.start_ms) from windows x
          where x.workspace_id = ${id}
            and x.transcribed_at >= date_trunc('month', now() at time zone 'utc') at time zone 'utc'), 0)::float8
        / 3600000)`;
}

/**
 * F7: the workspace's monthly cap and the hours it transcribed this month, when it has a cap and
 * has reached it; null otherwise (no cap, or hours left).
 */
export async function monthlyCapReached(
  db: Db,
  workspaceId: string,
): Promise<{ used: number; cap: number } | null> {
  const row = await sql<{ cap: number | null; used: number | null }>`
    select w.monthly_hours_cap::float8 as cap,
           case when w.monthly_hours_cap is null then null else ${hoursThisMonth(sql`w.id`)} end as used
      from workspaces w where w.id = ${workspaceId}::uuid`.execute(db);
  const r = row.rows[0];
  if (!r || r.cap === null || r.used === null || r.used < r.cap) return null;
  return { used: r.used, cap: r.cap };
}

export async function healthFigures(db: Db): Promise<HealthFigures> {
  const result = await sql<Omit<HealthFigures, 'searchLedgerMeetings' | 'searchLedgerOldestSeconds'>>`select
      (select count(*) from job_attempts where status = 'lease_expired')::int as "leasesReclaimed",
      -- J7 as amended by J20: a quarantine isolates; counted whether or not the job then succeeded.
      (select count(*) from jobs where isolated_at is not null)::int as "jobsQuarantined",
      (select count(*) from jobs where isolated_at is not null and status in ('pending', 'running'))::int
        as "jobsIsolated",
      (select count(*) from jobs where status = 'failed' and last_error_code = ${POISON})::int as "jobsPoison",
      (select count(*) from windows w
        where (w.status = 'pending' and verbatim_window_held(w.id)) or ${failedWithAudioKept(sql`w`)})::int
        as "heldStretches",
      coalesce((select extract(epoch from now() - min(coalesce(w.failed_at, j.isolated_at)))
                  from windows w left join jobs j on j.subject_id = w.id and j.status = 'pending' and j.isolated_at is not null
                 where (w.status = 'pending' and verbatim_window_held(w.id)) or ${failedWithAudioKept(sql`w`)}), 0)::float
        as "heldStretchOldestSeconds",
      (select count(*) from jobs where status = 'failed')::int as "jobsFailed",
      (select count(*) from jobs where kind = 'write-minutes' and status = 'pending' and wait_count > 0)::int
        as "minutesOutagesInProgress",
      (select count(*) from jobs where status in ('pending', 'running') and outage_waits > 0)::int
        as "jobsWaitingOutOutages",
      (select count(*) from outbox where status = 'pending')::int as "outboxPending",
      (select count(*) from outbox where status = 'failed')::int as "outboxFailed",
      (select count(*) from workers where stopped_at is null and declared_dead_at is null)::int as "workersAlive",
      (select count(*) from blobs b join meetings m on m.id = b.meeting_id
        where b.deleted_at is null and m.status in ('complete', 'failed'))::int as "audioAwaitingDeletion",
      coalesce((select extract(epoch from now() - min(created_at)) from outbox where status = 'pending'), 0)::float
        as "oldestOutboxPendingAgeSeconds",
      (select count(*) from object_cleanups where state = 'pending')::int as "cleanupPending",
      (select count(*) from object_cleanups where state = 'pending' and attempts > 0)::int as "cleanupFailing",
      (select count(*) from object_cleanups where state = 'staged' and reserve_until < now())::int
        as "cleanupStagedExpired",
      coalesce((select extract(epoch from now() - min(created_at)) from object_cleanups where state = 'pending'), 0)::float
        as "oldestCleanupPendingAgeSeconds",
      (select count(*) from webhook_deliveries where status = 'pending')::int as "webhooksPending",
      (select count(*) from webhook_deliveries where status = 'failed')::int as "webhooksFailed",
      (select count(*) from webhook_endpoints where disabled_reason is not null)::int as "webhookEndpointsDisabled",
      (select count(*) from bot_recordings where status = 'pending' and join_at < now())::int
        as "botRecordingsOverdue",
      (select count(*) from bot_recordings where status = 'pending' and last_error is not null)::int
        as "botRecordingsErroring",
      (select count(*) from calendar_feeds where last_error is not null)::int as "calendarFeedsFailing",
      (select count(*) from timeline_gaps where arrived_at is not null)::int as "lateChunksRepairing",
      (select coalesce(sum(drafts_shed), 0) from meetings)::int as "draftsShed",
      -- Late audio with no repair job to add it, while its audio is kept (past the late-audio
      -- bound it is deleted and nothing can be done).
      ((select count(*) from timeline_gaps g
          join chunks c on c.meeting_id = g.meeting_id and c.seq = g.first_seq
          join blobs b on b.id = c.blob_id and b.deleted_at is null
         where g.arrived_at is not null and not exists (
          select 1 from jobs j where j.subject_id = g.meeting_id and j.kind = 'repair-timeline'
             and j.status in ('pending', 'running')))
       + (select count(*) from chunks c join meetings m on m.id = c.meeting_id
           join blobs b on b.id = c.blob_id and b.deleted_at is null
           where c.start_samples is null and c.seq >= m.next_seq
             and (m.timeline_closed_at is not null or m.audio_deleted_at is not null
                  or m.status in ('complete', 'failed'))
             and not exists (select 1 from jobs j where j.subject_id = m.id and j.kind = 'repair-timeline'
                               and j.status in ('pending', 'running'))))::int as "lateChunksStuck"`.execute(
    db,
  );
  const row = result.rows[0];
  if (!row) throw new Error('health figures query returned no row');
  const ledger = await new SearchStore(db).ledgerStats();
  return { ...row, searchLedgerMeetings: ledger.meetings, searchLedgerOldestSeconds: ledger.oldestSeconds };
}
