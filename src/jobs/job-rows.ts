import { sql } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { JobRow, Tx } from '../db/schema.ts';
import { ErrorKind, type ErrorRecord } from '../domain/errors.ts';
import {
  ATTEMPT_RUNNING,
  AttemptOutcome,
  JobStatus,
  JobTransitions,
  type AttemptOutcome as Outcome,
  type JobKind,
} from '../domain/status.ts';
import type { Logger } from '../log.ts';
import { LostLeaseError } from './attempt-handle.ts';
import { recordAudit } from './audit-store.ts';
import { enqueueDelivery, newDeliveryId } from './delivery-store.ts';

export interface JobTimings {
  leaseMs: number;
  leaseGraceMs: number;
  retryStepMs: number;
  rescueAfterMs: number;
  /** J20: the isolated lane's backoff and poison count; unset: the defaults (1 min to 1 h, 3 deaths). */
  isolation?: { backoffMs: number; backoffCapMs: number; poisonRunnerDeaths: number };
}

/** J20: why a job runs in the isolated lane. */
export const IsolationReason = {
  /** Its worker was lost too often while it ran: it may be killing its workers (J7). */
  reclaimCap: 'reclaim_cap_exceeded',
  /** A window's error budget ran out on errors that may pass. */
  errorBudget: 'error_budget_spent',
} as const;

/** J20: the error a job is failed with when its isolated runner died too many runs in a row. */
export const POISON = 'poison';

export type AfterCommit = () => Promise<void>;

/**
 * What a job kind does to its subject when the job ends in failure (errors exhausted, a permanent
 * error, or quarantine after too many reclaims). Runs inside the failing transaction; may return
 * work to do after commit (deleting audio).
 */
export type TerminalFailureHook = (trx: Tx, job: JobRow, error: ErrorRecord) => Promise<AfterCommit | null>;
export type TerminalFailureHooks = Partial<Record<JobKind, TerminalFailureHook>>;

export const RECLAIM_CAP_EXCEEDED = IsolationReason.reclaimCap;

/**
 * The guarded row moves that claims, fenced writes and sweeps share: close an attempt with its
 * outcome, return a job to the queue with a new delivery, fail it with its kind's terminal hook.
 * Every method runs in the caller's transaction, which already holds the job row.
 */
export class JobRows {
  constructor(
    private readonly timings: JobTimings,
    private readonly deps: { checkpoints: Checkpoints; log: Logger },
  ) {}

  /**
   * Closes the job's running attempt as lease_expired if its lease has run out, counting a reclaim.
   * Returns the job's new status, or null if the lease is still live.
   */
  async closeExpiredAttempt(
    trx: Tx,
    job: JobRow,
    actor: string,
  ): Promise<{ status: string; report: ReclaimReport } | null> {
    if (!job.current_attempt_id) return null;
    const attempt = await trx
      .selectFrom('job_attempts')
      .select(['id', 'status'])
      .where('id', '=', job.current_attempt_id)
      .where('status', '=', ATTEMPT_RUNNING)
      .where(sql<boolean>`lease_expires_at + ${this.timings.leaseGraceMs} * interval '1 millisecond' < now()`)
      .executeTakeFirst();
    if (!attempt) return null;
    const expiredError: ErrorRecord = {
      kind: ErrorKind.transient,
      code: 'lease_expired',
      message: 'the worker stopped renewing its lease',
    };
    await this.closeAttempt(trx, job, attempt.id, AttemptOutcome.leaseExpired, actor, expiredError);
    const reclaims = job.reclaim_count + 1;
    const report: ReclaimReport = { jobId: job.id, kind: job.kind, reclaims, quarantined: false };
    if (job.isolated_at) {
      // J20: an isolated run whose runner vanished without its worker seeing it die (the worker
      // died too, or the whole host): nothing says the job did it, so it is no runner death; it
      // runs again after its backoff, and its reclaims are not capped any more.
      const delayMs = this.isolationDelayMs(job.isolated_runs);
      await this.returnToPending(trx, job, delayMs, { reclaim_count: reclaims });
      await this.auditJob(
        trx,
        job,
        JobStatus.pending,
        actor,
        `isolated run lost with its worker (lease expired); runs again in ${delayMs} ms`,
      );
      return { status: JobStatus.pending, report };
    }
    if (reclaims > job.max_reclaims) {
      // J7 as amended by J20: the quarantine isolates. Its workers died while it ran, but so may
      // any job's under a crash loop or a kill: run alone, in a process of its own, its death (if
      // it comes) says something about it. Its first isolated run is at once.
      await this.isolate(trx, job, IsolationReason.reclaimCap, 0, actor, {
        reclaim_count: reclaims,
      });
      return { status: JobStatus.pending, report: { ...report, quarantined: true } };
    }
    await this.returnToPending(trx, job, 0, { reclaim_count: reclaims });
    await this.auditJob(
      trx,
      job,
      JobStatus.pending,
      actor,
      `lease expired; reclaim ${reclaims} of ${job.max_reclaims}`,
    );
    return { status: JobStatus.pending, report };
  }

  /**
   * J20: the wait before an isolated job's next run, after `runs` isolated runs that did not
   * succeed: none before the first, then the backoff step doubling up to its cap.
   */
  isolationDelayMs(runs: number): number {
    if (runs <= 0) return 0;
    const { backoffMs, backoffCapMs } = this.isolation();
    return Math.min(backoffMs * 2 ** Math.min(runs - 1, 30), backoffCapMs);
  }

  isolation(): { backoffMs: number; backoffCapMs: number; poisonRunnerDeaths: number } {
    return this.timings.isolation ?? { backoffMs: 60_000, backoffCapMs: 3_600_000, poisonRunnerDeaths: 3 };
  }

  /**
   * J20: the job leaves the ordinary lane for the isolated one: it runs alone, in a process of its
   * own, from its next run on (src/worker/isolated-runner.ts), after `delayMs`. Its input is kept.
   */
  async isolate(
    trx: Tx,
    job: JobRow,
    reason: (typeof IsolationReason)[keyof typeof IsolationReason],
    delayMs: number,
    actor: string,
    extra: Parameters<JobRows['returnToPending']>[3],
  ): Promise<void> {
    await trx
      .updateTable('jobs')
      .set({ isolated_at: sql<Date>`now()`, isolation_reason: reason, runner_deaths: 0 })
      .where('id', '=', job.id)
      .execute();
    await this.returnToPending(trx, job, delayMs, extra);
    await this.auditJob(
      trx,
      job,
      JobStatus.pending,
      actor,
      `isolated (${reason}): it runs alone in a process of its own from now on, ${
        delayMs > 0 ? `first in ${delayMs} ms` : 'at once'
      }; its input is kept`,
    );
    this.deps.log.warn({ jobId: job.id, kind: job.kind, reason }, 'job isolated');
  }

  async returnToPending(
    trx: Tx,
    job: JobRow,
    delayMs: number,
    extra: {
      error_count?: number;
      reclaim_count?: number;
      wait_count?: number;
      outage_waits?: number;
      runner_deaths?: number;
    } & Partial<Pick<JobRow, 'last_error_kind' | 'last_error_code' | 'last_error_message'>>,
  ): Promise<void> {
    const updated = await trx
      .updateTable('jobs')
      .set({
        ...extra,
        status: JobTransitions.requeueJob.to,
        current_attempt_id: null,
        run_after: sql<Date>`now() + ${delayMs} * interval '1 millisecond'`,
        pending_at: sql<Date>`now()`,
        delivery_id: newDeliveryId(),
        dispatch_claimed_at: null,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', job.id)
      .where('status', 'in', JobTransitions.requeueJob.from)
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueueDelivery(trx, updated, this.deps);
  }

  async failJobRow(
    trx: Tx,
    job: JobRow,
    error: ErrorRecord,
    actor: string,
    onTerminal: TerminalFailureHook | undefined,
  ): Promise<AfterCommit | null> {
    // A job whose meeting was deleted while it was being made (a delete that ran alongside the
    // transaction creating it cancels only the jobs it could see) fails for want of its rows: it
    // ends canceled, and no hook runs, since there is nothing left to settle and a hook reading
    // the gone rows would throw and keep the job running for ever.
    const meetingGone =
      job.meeting_id !== null &&
      !(await trx.selectFrom('meetings').select('id').where('id', '=', job.meeting_id).executeTakeFirst());
    await trx
      .updateTable('jobs')
      .set({
        status: meetingGone ? JobStatus.canceled : JobStatus.failed,
        current_attempt_id: null,
        error_count: job.error_count,
        reclaim_count: job.reclaim_count,
        ...(meetingGone
          ? { dedupe_key: null, canceled_at: sql<Date>`now()` }
          : { failed_at: sql<Date>`now()` }),
        updated_at: sql<Date>`now()`,
        ...lastError(error),
      })
      .where('id', '=', job.id)
      .where('status', 'in', JobTransitions.failJob.from)
      .execute();
    if (meetingGone) {
      await this.auditJob(trx, job, JobStatus.canceled, actor, `its meeting was deleted (${error.code})`);
      return null;
    }
    await this.auditJob(trx, job, JobStatus.failed, actor, `${error.code}: ${error.message}`);
    return onTerminal ? onTerminal(trx, job, error) : null;
  }

  async closeAttempt(
    trx: Tx,
    job: JobRow,
    attemptId: string,
    outcome: Outcome,
    actor: string,
    error: ErrorRecord | null,
  ): Promise<void> {
    const closed = await trx
      .updateTable('job_attempts')
      .set({
        status: outcome,
        ended_at: sql<Date>`now()`,
        error_kind: error?.kind ?? null,
        error_code: error?.code ?? null,
        error_message: error?.message ?? null,
      })
      .where('id', '=', attemptId)
      .where('status', '=', ATTEMPT_RUNNING)
      .executeTakeFirst();
    if (Number(closed.numUpdatedRows) !== 1) throw new LostLeaseError(job.id);
    await recordAudit(trx, {
      workspaceId: job.workspace_id,
      subjectType: 'attempt',
      subjectId: attemptId,
      from: ATTEMPT_RUNNING,
      to: outcome,
      actor,
      reason: error ? `${error.code}: ${error.message}` : null,
      details: { jobId: job.id },
    });
  }

  async auditJob(trx: Tx, job: JobRow, to: string, actor: string, reason: string | null): Promise<void> {
    await recordAudit(trx, {
      workspaceId: job.workspace_id,
      subjectType: 'job',
      subjectId: job.id,
      from: job.status,
      to,
      actor,
      reason,
    });
  }
}

export interface ReclaimReport {
  jobId: string;
  kind: string;
  reclaims: number;
  quarantined: boolean;
}

export function lastError(error: ErrorRecord) {
  return { last_error_kind: error.kind, last_error_code: error.code, last_error_message: error.message };
}

export async function runAfterCommit(after: AfterCommit, log: Logger): Promise<void> {
  try {
    await after();
  } catch (err) {
    log.error({ err: err instanceof Error ? err.message : String(err) }, 'work after commit failed');
  }
}
