import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { Db, JobRow, Tx } from '../db/schema.ts';
import { ErrorKind, type ErrorRecord } from '../domain/errors.ts';
import { decideFailure } from '../domain/retry-policy.ts';
import {
  ATTEMPT_RUNNING,
  AttemptOutcome,
  JobStatus,
  JobTransitions,
  QUEUE_OF,
  type JobKind,
} from '../domain/status.ts';
import type { Logger } from '../log.ts';
import { AttemptHandle, LostLeaseError } from './attempt-handle.ts';
import { recordAudit, withAuditBuffer } from './audit.ts';
import { enqueueDelivery, newDeliveryId } from './delivery.ts';

export interface JobSpec {
  workspaceId: string;
  kind: JobKind;
  subjectType: 'meeting' | 'window';
  subjectId: string;
  meetingId: string | null;
  payload?: Record<string, unknown>;
  maxErrors: number;
  maxReclaims: number;
  delayMs?: number;
  dedupeKey?: string;
  inputRevision?: number;
}

export interface JobTimings {
  leaseMs: number;
  leaseGraceMs: number;
  retryStepMs: number;
  rescueAfterMs: number;
}

export type AfterCommit = () => Promise<void>;

/**
 * What a job kind does to its subject when the job ends in failure (errors exhausted, a permanent
 * error, or quarantine after too many reclaims). Runs inside the failing transaction; may return
 * work to do after commit (deleting audio).
 */
export type TerminalFailureHook = (trx: Tx, job: JobRow, error: ErrorRecord) => Promise<AfterCommit | null>;
export type TerminalFailureHooks = Partial<Record<JobKind, TerminalFailureHook>>;

export const RECLAIM_CAP_EXCEEDED = 'reclaim_cap_exceeded';

export interface ClaimedJob {
  job: JobRow;
  handle: AttemptHandle;
}

export class PgJobStore {
  constructor(
    private readonly db: Db,
    private readonly timings: JobTimings,
    private readonly deps: { checkpoints: Checkpoints; log: Logger },
  ) {}

  /** Inserts a pending job and its delivery in the caller's transaction. Null if the dedupe key exists. */
  async createJob(trx: Tx, spec: JobSpec, actor: string): Promise<JobRow | null> {
    const row = await trx
      .insertInto('jobs')
      .values({
        id: randomUUID(),
        workspace_id: spec.workspaceId,
        kind: spec.kind,
        queue: QUEUE_OF[spec.kind],
        subject_type: spec.subjectType,
        subject_id: spec.subjectId,
        meeting_id: spec.meetingId,
        dedupe_key: spec.dedupeKey ?? null,
        status: JobStatus.pending,
        payload: JSON.stringify(spec.payload ?? {}),
        input_revision: spec.inputRevision ?? 0,
        max_errors: spec.maxErrors,
        max_reclaims: spec.maxReclaims,
        run_after: sql<Date>`now() + ${spec.delayMs ?? 0} * interval '1 millisecond'`,
        delivery_id: newDeliveryId(),
      })
      .onConflict((oc) => oc.column('dedupe_key').doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return null;
    await recordAudit(trx, {
      workspaceId: spec.workspaceId,
      subjectType: 'job',
      subjectId: row.id,
      from: null,
      to: JobStatus.pending,
      actor,
      reason: `${spec.kind} created`,
    });
    await enqueueDelivery(trx, row, this.deps);
    return row;
  }

  /**
   * J1/J2: claims a pending job, or takes over a running one whose lease has expired, opening a new
   * attempt with a new token in the same transaction. Null when there is nothing to claim (another
   * live worker holds it, it is finished, or it is not due): the delivery is then acknowledged.
   */
  async claimJob(
    jobId: string,
    owner: string,
    context: Record<string, unknown> = {},
  ): Promise<ClaimedJob | null> {
    const fast = await this.claimPendingJob(jobId, owner, context);
    if (fast) return fast;
    return this.db.transaction().execute(async (trx) => {
      const job = await trx
        .selectFrom('jobs')
        .selectAll()
        .where('id', '=', jobId)
        .forNoKeyUpdate()
        .executeTakeFirst();
      if (!job) return null;
      let reclaimed = false;
      if (job.status === JobStatus.running) {
        // Past the reclaim cap the sweep quarantines it, with the kind's terminal hook.
        if (job.reclaim_count + 1 > job.max_reclaims) return null;
        const expired = await this.closeExpiredAttempt(trx, job, `worker:${owner}`);
        if (!expired) return null;
        if (expired.status !== JobStatus.pending) return null;
        reclaimed = true;
      } else if (job.status !== JobStatus.pending) {
        return null;
      }
      const due = await sql<{ due: boolean }>`select ${job.run_after}::timestamptz <= now() as due`.execute(
        trx,
      );
      if (!reclaimed && !due.rows[0]?.due) return null;

      const token = randomUUID();
      const attemptId = randomUUID();
      const attemptNo = job.attempt_count + 1;
      await trx
        .insertInto('job_attempts')
        .values({
          id: attemptId,
          job_id: job.id,
          workspace_id: job.workspace_id,
          attempt_no: attemptNo,
          status: ATTEMPT_RUNNING,
          context: JSON.stringify({ kind: job.kind, payload: job.payload, ...context }),
          input_revision: job.input_revision,
          owner,
          token,
          lease_expires_at: sql<Date>`now() + ${this.timings.leaseMs} * interval '1 millisecond'`,
        })
        .execute();
      const claimed = await trx
        .updateTable('jobs')
        .set({
          status: JobTransitions.claimJob.to,
          attempt_count: attemptNo,
          current_attempt_id: attemptId,
          running_at: sql<Date>`now()`,
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', job.id)
        .where('status', 'in', JobTransitions.claimJob.from)
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, [
        {
          workspaceId: job.workspace_id,
          subjectType: 'job',
          subjectId: job.id,
          from: JobStatus.pending,
          to: JobStatus.running,
          actor: `worker:${owner}`,
          reason: `attempt ${attemptNo} claimed`,
        },
        {
          workspaceId: job.workspace_id,
          subjectType: 'attempt',
          subjectId: attemptId,
          from: null,
          to: ATTEMPT_RUNNING,
          actor: `worker:${owner}`,
          details: { jobId: job.id, attemptNo },
        },
      ]);
      return { job: claimed, handle: new AttemptHandle(job.id, attemptId, attemptNo, token) };
    });
  }

  /**
   * The common claim — a due pending job — as one statement: the job's compare-and-swap to running,
   * its attempt row and both audit rows commit together (J1). Null when the job is not a due
   * pending one; claimJob then takes the transactional path that handles an expired lease.
   */
  private async claimPendingJob(
    jobId: string,
    owner: string,
    context: Record<string, unknown>,
  ): Promise<ClaimedJob | null> {
    const token = randomUUID();
    const attemptId = randomUUID();
    const actor = `worker:${owner}`;
    // The claim commits without waiting for its WAL flush: the attempt's first synchronous commit
    // (renewal, completion, failure) flushes it, and a claim lost in a database crash only puts the
    // job back to pending, where it runs again (docs/hot-path.md).
    const result = await sql<JobRow>`
      with cfg as (select set_config('synchronous_commit', 'off', true)),
      j as (
        update jobs set status = 'running', attempt_count = attempt_count + 1, current_attempt_id = ${attemptId}::uuid,
          running_at = now(), updated_at = now()
        where id = ${jobId}::uuid and status = 'pending' and run_after <= now()
        returning *
      ), a as (
        insert into job_attempts
          (id, job_id, workspace_id, attempt_no, status, context, input_revision, owner, token, lease_expires_at)
        select ${attemptId}::uuid, j.id, j.workspace_id, j.attempt_count, 'running',
          jsonb_build_object('kind', j.kind, 'payload', j.payload) || ${JSON.stringify(context)}::jsonb,
          j.input_revision, ${owner}, ${token}::uuid, now() + ${this.timings.leaseMs} * interval '1 millisecond'
        from j
        returning id
      ), au as (
        insert into audit_events (workspace_id, subject_type, subject_id, from_status, to_status, actor, reason, details)
        select j.workspace_id, 'job', j.id::text, 'pending', 'running', ${actor}, 'attempt ' || j.attempt_count || ' claimed', null
        from j
        union all
        select j.workspace_id, 'attempt', ${attemptId}, null, 'running', ${actor}, null,
          jsonb_build_object('jobId', j.id, 'attemptNo', j.attempt_count)
        from j
      )
      select j.* from j, cfg`.execute(this.db);
    const job = result.rows[0];
    if (!job) return null;
    return { job, handle: new AttemptHandle(job.id, attemptId, job.attempt_count, token) };
  }

  /** J2/J3: extends the lease only while the token is the job's current running attempt. */
  async renewLease(handle: AttemptHandle): Promise<boolean> {
    const result = await this.db
      .updateTable('job_attempts')
      .set({
        heartbeat_at: sql<Date>`now()`,
        lease_expires_at: sql<Date>`now() + ${this.timings.leaseMs} * interval '1 millisecond'`,
      })
      .where('id', '=', handle.attemptId)
      .where('token', '=', AttemptHandle.tokenOf(handle))
      .where('status', '=', ATTEMPT_RUNNING)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('jobs')
            .select('jobs.id')
            .where('jobs.id', '=', handle.jobId)
            .where('jobs.current_attempt_id', '=', handle.attemptId)
            .where('jobs.status', '=', JobStatus.running),
        ),
      )
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * J3: runs `fn` in a transaction that holds the job row and has verified that the handle's token is
   * still the current running attempt. Any other writer gets LostLeaseError and changes nothing.
   */
  async withFencedAttempt<T>(handle: AttemptHandle, fn: (trx: Tx, job: JobRow) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      const job = await this.lockFenced(trx, handle);
      return withAuditBuffer(trx, () => fn(trx, job));
    });
  }

  private async lockFenced(trx: Tx, handle: AttemptHandle): Promise<JobRow> {
    const result = await fencedCall(handle, () =>
      sql<JobRow>`select * from verbatim_fence(${handle.jobId}::uuid, ${handle.attemptId}::uuid,
        ${AttemptHandle.tokenOf(handle)}::uuid)`.execute(trx),
    );
    const job = result.rows[0];
    if (!job) throw new LostLeaseError(handle.jobId);
    return job;
  }

  /**
   * Runs one statement that calls a fenced SQL function (verbatim_fence raises VB001 for a stale
   * token, reported as LostLeaseError). For hot paths that settle an attempt in one round trip.
   */
  async runFencedStatement(
    handle: AttemptHandle,
    build: (ids: { jobId: string; attemptId: string; token: string }) => RawBuilder<unknown>,
  ): Promise<void> {
    const ids = { jobId: handle.jobId, attemptId: handle.attemptId, token: AttemptHandle.tokenOf(handle) };
    await fencedCall(handle, () => build(ids).execute(this.db));
  }

  /** J5: the caller's writes, the attempt's outcome and the job's completion commit together. */
  async completeAttempt(
    handle: AttemptHandle,
    actor: string,
    commit?: (trx: Tx, job: JobRow) => Promise<void>,
  ): Promise<void> {
    await this.withFencedAttempt(handle, async (trx, job) => {
      if (commit) await commit(trx, job);
      await fencedCall(handle, () =>
        sql`select verbatim_complete_attempt(${job.id}::uuid, ${handle.attemptId}::uuid, ${actor})`.execute(
          trx,
        ),
      );
    });
  }

  /**
   * Ends this run normally and puts the job back to wait `delayMs` without spending its retry budget:
   * waiting for other work, or for an outside outage to pass (L4, L7, L8).
   */
  async requeueAttempt(
    handle: AttemptHandle,
    actor: string,
    delayMs: number,
    reason: string,
    commit?: (trx: Tx, job: JobRow) => Promise<void>,
  ): Promise<void> {
    await this.withFencedAttempt(handle, async (trx, job) => {
      if (commit) await commit(trx, job);
      await this.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.completed, actor, null);
      await this.returnToPending(trx, job, delayMs, { wait_count: job.wait_count + 1 });
      await this.auditJob(trx, job, JobStatus.pending, actor, reason);
    });
  }

  /**
   * J6: classifies one failed attempt: retry with backoff while the error budget lasts, otherwise the
   * job fails with a categorical, redacted reason and the kind's terminal hook settles the subject.
   */
  async failAttempt(
    handle: AttemptHandle,
    actor: string,
    error: ErrorRecord,
    retryAfterSeconds: number | undefined,
    onTerminal: TerminalFailureHook | undefined,
  ): Promise<'retrying' | 'failed'> {
    let after: AfterCommit | null = null;
    const result = await this.withFencedAttempt(handle, async (trx, job) => {
      const errorCount = job.error_count + 1;
      const decision = decideFailure(
        error,
        errorCount,
        job.max_errors,
        this.timings.retryStepMs,
        retryAfterSeconds,
      );
      if (decision.type === 'retry') {
        await this.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.retryableFailed, actor, error);
        await this.returnToPending(trx, job, decision.delayMs, {
          error_count: errorCount,
          ...lastError(error),
        });
        await this.auditJob(
          trx,
          job,
          JobStatus.pending,
          actor,
          `${error.code}: retry in ${decision.delayMs} ms`,
        );
        return 'retrying' as const;
      }
      const final: ErrorRecord = { kind: error.kind, code: decision.code, message: decision.message };
      await this.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.failed, actor, error);
      after = await this.failJobRow(trx, { ...job, error_count: errorCount }, final, actor, onTerminal);
      return 'failed' as const;
    });
    if (after) await runAfterCommit(after, this.deps.log);
    return result;
  }

  /** J11: a draining worker hands its attempt back at once, spending neither errors nor reclaims. */
  async releaseAttempt(handle: AttemptHandle, actor: string): Promise<void> {
    await this.withFencedAttempt(handle, async (trx, job) => {
      const error: ErrorRecord = {
        kind: ErrorKind.transient,
        code: 'worker.shutdown',
        message: 'the worker was stopped and released this attempt',
      };
      await this.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.retryableFailed, actor, error);
      await this.returnToPending(trx, job, 0, {});
      await this.auditJob(trx, job, JobStatus.pending, actor, 'released by a stopping worker');
    });
  }

  /**
   * J2/J7/J8: the stale-lease sweep. Each expired attempt is closed as lease_expired and its job is
   * returned to the queue (same job, new delivery) or, past the reclaim cap, quarantined as failed.
   * Safe on many replicas at once: each reclaim locks the job and re-checks the attempt.
   */
  async reclaimExpiredLeases(actor: string, hooks: TerminalFailureHooks): Promise<ReclaimReport[]> {
    const expired = await this.db
      .selectFrom('job_attempts')
      .select(['job_id'])
      .where('status', '=', ATTEMPT_RUNNING)
      .where(sql<boolean>`lease_expires_at + ${this.timings.leaseGraceMs} * interval '1 millisecond' < now()`)
      .limit(100)
      .execute();
    const reports: ReclaimReport[] = [];
    for (const { job_id } of expired) {
      let after: AfterCommit | null = null;
      // One job that cannot be reclaimed (a throwing hook, a deadlock) must not stall the others.
      const report = await this.db
        .transaction()
        .execute(async (trx) => {
          const job = await trx
            .selectFrom('jobs')
            .selectAll()
            .where('id', '=', job_id)
            .forNoKeyUpdate()
            .executeTakeFirst();
          if (!job || job.status !== JobStatus.running) return null;
          const outcome = await this.closeExpiredAttempt(trx, job, actor, hooks);
          if (!outcome) return null;
          after = outcome.after;
          return outcome.report;
        })
        .catch((err: unknown) => {
          this.deps.log.error(
            { jobId: job_id, err: String(err) },
            'could not reclaim an expired lease; will try again',
          );
          return null;
        });
      if (after) await runAfterCommit(after, this.deps.log);
      if (report) {
        reports.push(report);
        const level = report.quarantined ? 'error' : 'warn';
        this.deps.log[level](
          {
            jobId: report.jobId,
            kind: report.kind,
            reclaims: report.reclaims,
            quarantined: report.quarantined,
          },
          report.quarantined
            ? `job quarantined: ${RECLAIM_CAP_EXCEEDED}`
            : 'expired lease reclaimed; job returned to the queue',
        );
      }
    }
    return reports;
  }

  /**
   * Closes the job's running attempt as lease_expired if its lease has run out, counting a reclaim.
   * Returns the job's new status, or null if the lease is still live.
   */
  private async closeExpiredAttempt(
    trx: Tx,
    job: JobRow,
    actor: string,
    hooks: TerminalFailureHooks = {},
  ): Promise<{ status: string; report: ReclaimReport; after: AfterCommit | null } | null> {
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
    if (reclaims > job.max_reclaims) {
      const reason: ErrorRecord = {
        kind: ErrorKind.permanent,
        code: RECLAIM_CAP_EXCEEDED,
        message: `worker lost ${reclaims} times while running this job`,
      };
      const after = await this.failJobRow(
        trx,
        { ...job, reclaim_count: reclaims },
        reason,
        actor,
        hooks[job.kind as JobKind],
      );
      return { status: JobStatus.failed, report: { ...report, quarantined: true }, after };
    }
    await this.returnToPending(trx, job, 0, { reclaim_count: reclaims });
    await this.auditJob(
      trx,
      job,
      JobStatus.pending,
      actor,
      `lease expired; reclaim ${reclaims} of ${job.max_reclaims}`,
    );
    return { status: JobStatus.pending, report, after: null };
  }

  /**
   * J9: a due pending job with no live delivery (the enqueue failed, or its transport row was lost)
   * is re-driven. The compare-and-swap on delivery_id claims the rescue, so racing sweeps re-drive
   * it once, and the new delivery id keeps graphile-worker's job key from deduplicating it.
   */
  async rescuePendingJobs(actor: string): Promise<string[]> {
    const candidates = await this.db
      .selectFrom('jobs')
      .select(['id', 'delivery_id'])
      .where('status', '=', JobStatus.pending)
      .where(sql<boolean>`run_after <= now() - ${this.timings.rescueAfterMs} * interval '1 millisecond'`)
      .where((eb) =>
        eb.or([
          eb('dispatch_claimed_at', 'is', null),
          eb(
            sql<Date>`dispatch_claimed_at`,
            '<',
            sql<Date>`now() - ${this.timings.rescueAfterMs} * interval '1 millisecond'`,
          ),
        ]),
      )
      .where(
        sql<boolean>`not exists (select 1 from graphile_worker.jobs gj
          where gj.key = jobs.delivery_id::text and gj.attempts < gj.max_attempts)`,
      )
      .limit(100)
      .execute();
    const rescued: string[] = [];
    for (const candidate of candidates) {
      const ok = await this.db.transaction().execute(async (trx) => {
        const job = await trx
          .updateTable('jobs')
          .set({
            delivery_id: newDeliveryId(),
            dispatch_claimed_at: sql<Date>`now()`,
            updated_at: sql<Date>`now()`,
          })
          .where('id', '=', candidate.id)
          .where('status', '=', JobStatus.pending)
          .where('delivery_id', '=', candidate.delivery_id)
          .returningAll()
          .executeTakeFirst();
        if (!job) return false;
        await recordAudit(trx, {
          workspaceId: job.workspace_id,
          subjectType: 'job',
          subjectId: job.id,
          from: JobStatus.pending,
          to: JobStatus.pending,
          actor,
          reason: 'delivery lost; re-driven with a fresh delivery id',
        });
        return enqueueDelivery(trx, job, this.deps);
      });
      if (ok) {
        rescued.push(candidate.id);
        this.deps.log.warn({ jobId: candidate.id }, 'pending job had no delivery; re-driven');
      }
    }
    return rescued;
  }

  /** J13: a new request for the same subject supersedes the active job and its running attempt. */
  async supersedeActiveJobs(trx: Tx, subjectId: string, kind: JobKind, actor: string): Promise<number> {
    const active = await trx
      .selectFrom('jobs')
      .selectAll()
      .where('subject_id', '=', subjectId)
      .where('kind', '=', kind)
      .where('status', 'in', JobTransitions.supersedeJob.from)
      .forNoKeyUpdate()
      .execute();
    for (const job of active) {
      if (job.status === JobStatus.running && job.current_attempt_id) {
        await this.closeAttempt(trx, job, job.current_attempt_id, AttemptOutcome.superseded, actor, null);
      }
      await trx
        .updateTable('jobs')
        .set({ status: JobStatus.superseded, superseded_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
        .where('id', '=', job.id)
        .execute();
      await this.auditJob(trx, job, JobStatus.superseded, actor, 'superseded by a new request');
    }
    return active.length;
  }

  /** Puts a pending job's delivery forward to now (a wake-up after the work it waited for is done). */
  async wakeJob(trx: Tx, jobId: string, actor: string, reason: string): Promise<void> {
    const before = await trx
      .selectFrom('jobs')
      .select('delivery_id')
      .where('id', '=', jobId)
      .executeTakeFirst();
    const job = await trx
      .updateTable('jobs')
      .set({ run_after: sql<Date>`now()`, delivery_id: newDeliveryId(), updated_at: sql<Date>`now()` })
      .where('id', '=', jobId)
      .where('status', '=', JobStatus.pending)
      .returningAll()
      .executeTakeFirst();
    if (!job) return;
    // The superseded delivery would only be acknowledged and dropped; don't leave it queued.
    if (before) await sql`select graphile_worker.remove_job(${before.delivery_id}::text)`.execute(trx);
    await this.auditJob(trx, job, JobStatus.pending, actor, reason);
    await enqueueDelivery(trx, job, this.deps);
  }

  private async returnToPending(
    trx: Tx,
    job: JobRow,
    delayMs: number,
    extra: { error_count?: number; reclaim_count?: number; wait_count?: number } & Partial<
      Pick<JobRow, 'last_error_kind' | 'last_error_code' | 'last_error_message'>
    >,
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

  private async failJobRow(
    trx: Tx,
    job: JobRow,
    error: ErrorRecord,
    actor: string,
    onTerminal: TerminalFailureHook | undefined,
  ): Promise<AfterCommit | null> {
    await trx
      .updateTable('jobs')
      .set({
        status: JobStatus.failed,
        current_attempt_id: null,
        error_count: job.error_count,
        reclaim_count: job.reclaim_count,
        failed_at: sql<Date>`now()`,
        updated_at: sql<Date>`now()`,
        ...lastError(error),
      })
      .where('id', '=', job.id)
      .where('status', 'in', JobTransitions.failJob.from)
      .execute();
    await this.auditJob(trx, job, JobStatus.failed, actor, `${error.code}: ${error.message}`);
    return onTerminal ? onTerminal(trx, job, error) : null;
  }

  private async closeAttempt(
    trx: Tx,
    job: JobRow,
    attemptId: string,
    outcome: AttemptOutcome,
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

  private async auditJob(
    trx: Tx,
    job: JobRow,
    to: string,
    actor: string,
    reason: string | null,
  ): Promise<void> {
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

function lastError(error: ErrorRecord) {
  return { last_error_kind: error.kind, last_error_code: error.code, last_error_message: error.message };
}

async function runAfterCommit(after: AfterCommit, log: Logger): Promise<void> {
  try {
    await after();
  } catch (err) {
    log.error({ err: err instanceof Error ? err.message : String(err) }, 'work after commit failed');
  }
}

const LOST_LEASE_SQLSTATE = 'VB001';

async function fencedCall<T>(handle: AttemptHandle, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if ((err as { code?: unknown }).code === LOST_LEASE_SQLSTATE) throw new LostLeaseError(handle.jobId);
    throw err;
  }
}
