import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { asSystem } from '../db/tenant.ts';
import { POISON, RECLAIM_CAP_EXCEEDED } from '../jobs/pg-job-store.ts';
import { storedBytes } from '../storage/objects.ts';
import {
  healthFigures,
  queueStats,
  workspaceUsage,
  type HealthFigures,
  type QueueStats,
  type WorkspaceUsage,
} from './queue-stats-store.ts';

export interface AttemptView {
  attemptNo: number;
  status: string;
  owner: string;
  startedAt: Date;
  endedAt: Date | null;
  error: { code: string; message: string | null } | null;
}

export interface DeadLetterView {
  jobId: string;
  kind: string;
  queue: string;
  meetingId: string | null;
  meetingTitle: string | null;
  /** J7: failed because it kept killing (or outliving) its worker, not because of its own errors. */
  quarantined: boolean;
  failedAt: Date | null;
  error: { code: string | null; message: string | null };
  /** waits: every time it was put back to wait; outageWaits: those for an outside outage (bounded). */
  counts: { errors: number; reclaims: number; waits: number; outageWaits: number };
  attempts: AttemptView[];
  /** The newer job for the same work, if someone resubmitted it. */
  resubmittedAs: { jobId: string; status: string } | null;
}

export interface OutageView {
  jobId: string;
  meetingId: string | null;
  meetingTitle: string | null;
  waits: number;
  waitingSince: Date;
  lastError: { code: string | null; message: string | null };
}

/** Counts of the caller's workspace, to stand next to its lists (the lists are capped at 50). */
export interface WorkspaceFigures {
  jobsFailed: number;
  jobsQuarantined: number;
  minutesOutagesInProgress: number;
}

export interface OperatorOverview {
  /**
   * Installation-wide figures: counts and ages only, no identifiers of any workspace. The screen
   * labels them as the whole installation's, so they are never read as this workspace's.
   */
  queues: QueueStats[];
  health: HealthFigures;
  /** The caller's workspace only (S1). */
  workspace: WorkspaceFigures;
  deadLetters: DeadLetterView[];
  outages: OutageView[];
  storedBytes: number;
  /** F7: the caller's workspace's usage: weight, stored bytes, queued windows, running jobs, hours this month. */
  usage: WorkspaceUsage | null;
}

/**
 * X1 for the web app: what `verbatim status` and `verbatim dead-letters` print, as one JSON
 * document. Job lists are scoped to one workspace; the queue figures are the whole installation's,
 * because a stuck queue is stuck for every workspace.
 */
export async function operatorOverview(db: Db, workspaceId: string): Promise<OperatorOverview> {
  // The installation's figures, read as the system role on purpose (S10): a stuck queue is stuck for
  // everyone, and these hold counts and ages only.
  const [queues, health] = await asSystem(() => Promise.all([queueStats(db), healthFigures(db)]));

  const failed = await db
    .selectFrom('jobs as j')
    .leftJoin('meetings as m', 'm.id', 'j.meeting_id')
    .select([
      'j.id',
      'j.kind',
      'j.queue',
      'j.meeting_id',
      'm.title',
      'j.failed_at',
      'j.last_error_code',
      'j.last_error_message',
      'j.error_count',
      'j.reclaim_count',
      'j.wait_count',
      'j.outage_waits',
      sql<{
        id: string;
        status: string;
      } | null>`(select json_build_object('id', later.id, 'status', later.status)
        from jobs later where later.subject_id = j.subject_id and later.kind = j.kind and later.id <> j.id
          and later.created_at > j.created_at order by later.created_at desc limit 1)`.as('replacement'),
    ])
    .where('j.workspace_id', '=', workspaceId)
    .where('j.status', '=', 'failed')
    .orderBy('j.failed_at', 'desc')
    .limit(50)
    .execute();

  const attempts = failed.length
    ? await db
        .selectFrom('job_attempts')
        .select([
          'job_id',
          'attempt_no',
          'status',
          'owner',
          'started_at',
          'ended_at',
          'error_code',
          'error_message',
        ])
        .where(
          'job_id',
          'in',
          failed.map((j) => j.id),
        )
        .orderBy('job_id')
        .orderBy('attempt_no')
        .execute()
    : [];

  const deadLetters: DeadLetterView[] = failed.map((j) => ({
    jobId: j.id,
    kind: j.kind,
    queue: j.queue,
    meetingId: j.meeting_id,
    meetingTitle: j.title,
    // J20: a job is given up for killing its workers only once it killed its isolated runner too.
    quarantined: j.last_error_code === POISON || j.last_error_code === RECLAIM_CAP_EXCEEDED,
    failedAt: j.failed_at,
    error: { code: j.last_error_code, message: j.last_error_message },
    counts: {
      errors: j.error_count,
      reclaims: j.reclaim_count,
      waits: j.wait_count,
      outageWaits: j.outage_waits,
    },
    attempts: attempts
      .filter((a) => a.job_id === j.id)
      .map((a) => ({
        attemptNo: a.attempt_no,
        status: a.status,
        owner: a.owner,
        startedAt: a.started_at,
        endedAt: a.ended_at,
        error: a.error_code ? { code: a.error_code, message: a.error_message } : null,
      })),
    resubmittedAs: j.replacement ? { jobId: j.replacement.id, status: j.replacement.status } : null,
  }));

  // L8: a minutes job that waits out a model outage is pending with waits counted.
  const waiting = await db
    .selectFrom('jobs as j')
    .leftJoin('meetings as m', 'm.id', 'j.meeting_id')
    .select([
      'j.id',
      'j.meeting_id',
      'm.title',
      'j.wait_count',
      'j.created_at',
      'j.last_error_code',
      'j.last_error_message',
    ])
    .where('j.workspace_id', '=', workspaceId)
    .where('j.kind', '=', 'write-minutes')
    .where('j.status', '=', 'pending')
    .where('j.wait_count', '>', 0)
    .orderBy('j.created_at')
    .limit(50)
    .execute();
  const outages: OutageView[] = waiting.map((j) => ({
    jobId: j.id,
    meetingId: j.meeting_id,
    meetingTitle: j.title,
    waits: j.wait_count,
    waitingSince: j.created_at,
    lastError: { code: j.last_error_code, message: j.last_error_message },
  }));

  const counts = await sql<WorkspaceFigures>`select
      (count(*) filter (where status = 'failed'))::int as "jobsFailed",
      (count(*) filter (where isolated_at is not null))::int as "jobsQuarantined",
      (count(*) filter (where kind = 'write-minutes' and status = 'pending' and wait_count > 0))::int
        as "minutesOutagesInProgress"
    from jobs where workspace_id = ${workspaceId}::uuid`.execute(db);
  const workspace = counts.rows[0] ?? { jobsFailed: 0, jobsQuarantined: 0, minutesOutagesInProgress: 0 };

  const [usage] = await workspaceUsage(db, workspaceId);
  return {
    queues,
    health,
    workspace,
    deadLetters,
    outages,
    storedBytes: await storedBytes(db, workspaceId),
    usage: usage ?? null,
  };
}
