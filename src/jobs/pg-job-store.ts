import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { Database, Db, Executor, JobRow, Tx } from '../db/schema.ts';

type ActiveJobQuery = SelectQueryBuilder<Database, 'jobs', JobRow>;
import { assertNever, ErrorKind, type ErrorRecord } from '../domain/errors.ts';
import {
  decideAttemptFailure,
  OUTAGE_WAITS,
  outageBackoffMs,
  type FailurePolicy,
} from '../domain/retry-policy.ts';
import {
  ACTIVE_JOB_STATUSES,
  ATTEMPT_RUNNING,
  AttemptOutcome,
  JobStatus,
  JobTransitions,
  QUEUE_OF,
  JobKind,
} from '../domain/status.ts';
import {
  BATCH_CLASS,
  CAPPED_QUEUES,
  cappedDeferMs,
  isCappedWork,
  isSplitWork,
  SPLIT_KIND,
} from '../domain/running-cap.ts';
import type { Logger } from '../log.ts';
import { AttemptHandle, LostLeaseError } from './attempt-handle.ts';
import { flushAudit, withAuditBuffer } from './audit-store.ts';
import { enqueueDelivery, newDeliveryId } from './delivery-store.ts';
import {
  IsolationReason,
  JobRows,
  lastError,
  POISON,
  runAfterCommit,
  type AfterCommit,
  type JobTimings,
  type TerminalFailureHook,
  type TerminalFailureHooks,
} from './job-rows.ts';

export {
  IsolationReason,
  POISON,
  RECLAIM_CAP_EXCEEDED,
  type AfterCommit,
  type JobTimings,
  type ReclaimReport,
  type TerminalFailureHook,
  type TerminalFailureHooks,
} from './job-rows.ts';

export interface JobSpec {
  workspaceId: string;
  kind: JobKind;
  subjectType: 'meeting' | 'window' | 'bot_recording';
  subjectId: string;
  meetingId: string | null;
  payload?: Record<string, unknown>;
  maxErrors: number;
  maxReclaims: number;
  delayMs?: number;
  dedupeKey?: string;
  inputRevision?: number;
}

/** A spec as verbatim_insert_job (migration 0030) reads it, with the queue its kind runs on. */
export function specJson(spec: Omit<JobSpec, 'workspaceId'> & { workspaceId?: string }): string {
  return JSON.stringify({ ...spec, queue: QUEUE_OF[spec.kind] });
}

export interface ClaimedJob {
  job: JobRow;
  handle: AttemptHandle;
}

/** F2/F5: a workspace's capped claims, one at a time: held to the end of the claim's transaction. */
async function lockWorkspaceClaims(trx: Tx, workspaceId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${'verbatim.running-cap:' + workspaceId}, 0))`.execute(
    trx,
  );
}

/** Without a catalog (a store made by hand in a test): no outage waits, no isolation. */
const NO_POLICY: FailurePolicy = {
  outageCodes: new Set(),
  outageWaits: OUTAGE_WAITS,
  patience: null,
  isolateOnErrors: false,
};

export class PgJobStore {
  private readonly rows: JobRows;

  constructor(
    private readonly db: Db,
    private readonly timings: JobTimings,
    private readonly deps: {
      checkpoints: Checkpoints;
      log: Logger;
      /** Each kind's failure policy, from the job catalog; unset: outages of none, no isolation. */
      failurePolicyOf?: (kind: string) => FailurePolicy;
      /** Kinds locked before a meeting's other active jobs when several are ended together. */
      lockedFirst?: readonly string[];
      /** F2: a workspace's splits running at once, across every worker; unset: no limit. */
      splitsPerWorkspace?: number;
    },
  ) {
    this.rows = new JobRows(timings, deps);
  }

  private policyOf(kind: string): FailurePolicy {
    return this.deps.failurePolicyOf?.(kind) ?? NO_POLICY;
  }

  /**
   * J20: which lane a delivery's job runs in: `ordinary` (in the worker), `isolated` (a process of
   * its own is started for it: it is due, or running on a lease that ran out), or `isolated-idle`
   * (isolated, but nothing to run now: not due, or running alive in its runner; no process needed).
   */
  async laneOf(jobId: string): Promise<'ordinary' | 'isolated' | 'isolated-idle'> {
    const row = await sql<{ isolated: boolean; runnable: boolean }>`
      select j.isolated_at is not null as isolated,
             (j.status = 'pending' and j.run_after <= now())
             or (j.status = 'running' and exists (
                   select 1 from job_attempts a where a.id = j.current_attempt_id
                      and a.lease_expires_at + ${this.timings.leaseGraceMs} * interval '1 millisecond' < now()))
               as runnable
        from jobs j where j.id = ${jobId}::uuid`.execute(this.db);
    const job = row.rows[0];
    if (!job?.isolated) return 'ordinary';
    return job.runnable ? 'isolated' : 'isolated-idle';
  }

  /**
   * Inserts a pending job and its delivery in the caller's transaction. Null if the dedupe key
   * exists. The row and its audit come from verbatim_insert_job, the one insert of a job (the
   * close-out's SQL uses it too).
   */
  async createJob(trx: Tx, spec: JobSpec, actor: string): Promise<JobRow | null> {
    // The transaction's earlier audit rows go first, as they were recorded.
    await flushAudit(trx);
    const { rows } =
      await sql<JobRow>`select * from verbatim_insert_job(${specJson(spec)}::jsonb, ${actor})`.execute(trx);
    const row = rows[0];
    if (!row) return null;
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
    /** J20: true in an isolated runner, which claims only isolated jobs; ordinary workers never do. */
    isolated = false,
  ): Promise<ClaimedJob | null> {
    const fast = await this.openAttempt(this.db, jobId, owner, context, {
      dueOnly: true,
      isolated,
      capChecked: false,
    });
    if (fast) return fast;
    return this.db.transaction().execute(async (trx) => {
      const job = await trx
        .selectFrom('jobs')
        .selectAll()
        .where('id', '=', jobId)
        .forNoKeyUpdate()
        .executeTakeFirst();
      if (!job) return null;
      if (job.status === JobStatus.pending) {
        if (isCappedWork(job)) {
          // F5: a workspace with a running cap has its batch claims taken one at a time.
          const cap = await this.runningCap(trx, job);
          if (cap !== null && cap.running >= cap.max) {
            await this.deferCapped(trx, job, cap.max);
            return null;
          }
        }
        if (isSplitWork(job) && this.deps.splitsPerWorkspace !== undefined) {
          // F2: so are its splits, against the split limit.
          const running = await this.runningSplits(trx, job);
          if (running >= this.deps.splitsPerWorkspace) {
            await this.deferCapped(trx, job, this.deps.splitsPerWorkspace);
            return null;
          }
        }
        // Claimed meanwhile and back again, or not due yet: the one statement decides.
        return this.openAttempt(trx, jobId, owner, context, { dueOnly: true, isolated, capChecked: true });
      }
      if (job.status !== JobStatus.running) return null;
      // Each lane takes over only its own jobs (J20).
      if ((job.isolated_at !== null) !== isolated) return null;
      // Past the reclaim cap the sweep isolates it.
      if (!isolated && job.reclaim_count + 1 > job.max_reclaims) return null;
      const expired = await this.rows.closeExpiredAttempt(trx, job, `worker:${owner}`);
      if (!expired || expired.status !== JobStatus.pending) return null;
      // Taken over from a dead owner: claimed now, whatever its run_after.
      return this.openAttempt(trx, jobId, owner, context, { dueOnly: false, isolated, capChecked: true });
    });
  }

  /**
   * F5: the workspace's cap on running batch jobs and how many run now, taken under the
   * workspace's lock (held to the end of the claim's transaction, so two workers cannot both
   * take its last place). Null when the workspace has no cap.
   */
  private async runningCap(trx: Tx, job: JobRow): Promise<{ max: number; running: number } | null> {
    const ws = await trx
      .selectFrom('workspaces')
      .select('max_running_jobs')
      .where('id', '=', job.workspace_id)
      .executeTakeFirst();
    const max = ws?.max_running_jobs ?? null;
    if (max === null) return null;
    await lockWorkspaceClaims(trx, job.workspace_id);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from jobs
        where workspace_id = ${job.workspace_id}::uuid and status = 'running'
          and queue in (${sql.join([...CAPPED_QUEUES])}) and fair_class = ${BATCH_CLASS}
          and isolated_at is null`.execute(trx);
    return { max, running: rows[0]?.n ?? 0 };
  }

  /** F2: the workspace's splits running now, counted under its lock (as runningCap's count is). */
  private async runningSplits(trx: Tx, job: JobRow): Promise<number> {
    await lockWorkspaceClaims(trx, job.workspace_id);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from jobs
        where workspace_id = ${job.workspace_id}::uuid and status = 'running' and queue = ${job.queue}
          and kind = ${SPLIT_KIND} and isolated_at is null`.execute(trx);
    return rows[0]?.n ?? 0;
  }

  /**
   * F5: a claim refused by the running cap (or F2's split limit): the job keeps its place in its lane (its round is
   * unchanged, so its message keeps its priority) and is delivered again a little later, sooner
   * the nearer it is to the head of the lane (cappedDeferMs). No attempt is opened, and nothing is
   * audited: the job's status does not change.
   */
  private async deferCapped(trx: Tx, job: JobRow, max: number): Promise<void> {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from (
        select 1 from jobs where workspace_id = ${job.workspace_id}::uuid and queue = ${job.queue}
          and fair_class = ${job.fair_class} and status = 'pending' and fair_round < ${job.fair_round}
        limit 100000) ahead`.execute(trx);
    const deferMs = cappedDeferMs(rows[0]?.n ?? 0, max);
    const moved = await trx
      .updateTable('jobs')
      .set({
        run_after: sql<Date>`now() + ${deferMs} * interval '1 millisecond'`,
        delivery_id: newDeliveryId(),
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', job.id)
      .where('status', '=', JobStatus.pending)
      // Only a due job is put off: one not due yet keeps its own later delivery.
      .where('run_after', '<=', sql<Date>`now()`)
      .returningAll()
      .executeTakeFirst();
    if (moved) await enqueueDelivery(trx, moved, this.deps);
  }

  /**
   * The claim itself, in one statement and in one place: the job's compare-and-swap from pending to
   * running, its new attempt (a new token and lease) and both audit rows commit together (J1). Null
   * when the job is not pending (or, with `dueOnly`, not due): someone else has it, or it is done.
   */
  private async openAttempt(
    db: Executor,
    jobId: string,
    owner: string,
    context: Record<string, unknown>,
    /** capChecked: false when no running cap was checked, so a capped workspace's batch job (or any split, F2) is left to the locked path. */
    opts: { dueOnly: boolean; isolated: boolean; capChecked: boolean },
  ): Promise<ClaimedJob | null> {
    const token = randomUUID();
    const attemptId = randomUUID();
    const actor = `worker:${owner}`;
    const result = await sql<JobRow>`
      with j as (
        update jobs set status = 'running', attempt_count = attempt_count + 1, current_attempt_id = ${attemptId}::uuid,
          isolated_runs = isolated_runs + (case when isolated_at is null then 0 else 1 end),
          running_at = now(), updated_at = now()
        where id = ${jobId}::uuid and status = 'pending' and (not ${opts.dueOnly}::boolean or run_after <= now())
          and (isolated_at is not null) = ${opts.isolated}::boolean
          and (${opts.capChecked}::boolean or isolated_at is not null or fair_class <> ${BATCH_CLASS}
               or queue not in (${sql.join([...CAPPED_QUEUES])})
               or not exists (select 1 from workspaces w where w.id = jobs.workspace_id and w.max_running_jobs is not null))
          and (${opts.capChecked}::boolean or ${this.deps.splitsPerWorkspace === undefined}::boolean
               or isolated_at is not null or kind <> ${SPLIT_KIND})
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
      select j.* from j`.execute(db);
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
   * token, reported as LostLeaseError) alone: one round trip in autocommit, no transaction around it
   * (a window's commit, the hottest path). What the caller does with its rows is its own business.
   */
  async runFencedStatementAlone<R>(
    handle: AttemptHandle,
    build: (ids: { jobId: string; attemptId: string; token: string }) => RawBuilder<R>,
  ): Promise<R[]> {
    const ids = { jobId: handle.jobId, attemptId: handle.attemptId, token: AttemptHandle.tokenOf(handle) };
    return (await fencedCall(handle, () => build(ids).execute(this.db))).rows;
  }

  /** J5: the caller's writes, the attempt's outcome and the job's completion commit together. */
  async completeAttempt(
    handle: AttemptHandle,
    actor: string,
    commit?: (trx: Tx, job: JobRow) => Promise<void>,
  ): Promise<void> {
    await this.withFencedAttempt(handle, async (trx, job) => {
      if (commit) await commit(trx, job);
      // Keep the trail in causal order: what the commit recorded comes before the completion.
      await flushAudit(trx);
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
      await this.rows.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.completed, actor, null);
      await this.rows.returnToPending(trx, job, delayMs, { wait_count: job.wait_count + 1 });
      await this.rows.auditJob(trx, job, JobStatus.pending, actor, reason);
    });
  }

  /**
   * Ends this run and puts the job back to wait out an outside outage the handler met and handled
   * itself: the same backoff and count as a thrown outage (failAttempt), no retry spent.
   */
  async requeueForOutage(
    handle: AttemptHandle,
    actor: string,
    reason: string,
    commit?: (trx: Tx, job: JobRow) => Promise<void>,
    retryAfterSeconds?: number,
  ): Promise<void> {
    await this.withFencedAttempt(handle, async (trx, job) => {
      if (commit) await commit(trx, job);
      const delayMs = Math.max(
        (retryAfterSeconds ?? 0) * 1000,
        outageBackoffMs(this.timings.retryStepMs, job.outage_waits),
      );
      await this.rows.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.completed, actor, null);
      await this.rows.returnToPending(trx, job, delayMs, {
        wait_count: job.wait_count + 1,
        outage_waits: job.outage_waits + 1,
      });
      await this.rows.auditJob(
        trx,
        job,
        JobStatus.pending,
        actor,
        `${reason}; waiting ${delayMs} ms (outage wait ${job.outage_waits + 1} of ${this.policyOf(job.kind).outageWaits})`,
      );
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
      const verdict = decideAttemptFailure(
        error,
        {
          errorCount: job.error_count,
          maxErrors: job.max_errors,
          outageWaits: job.outage_waits,
          isolated: job.isolated_at !== null,
          isolatedRuns: job.isolated_runs,
          ageMs: Date.now() - job.created_at.getTime(),
        },
        this.policyOf(job.kind),
        {
          retryStepMs: this.timings.retryStepMs,
          isolationDelayMs: (runs) => this.rows.isolationDelayMs(runs),
        },
        retryAfterSeconds,
      );
      const outcome = verdict.type === 'fail' ? AttemptOutcome.failed : AttemptOutcome.retryableFailed;
      await this.rows.closeAttempt(trx, job, handle.attemptId, outcome, actor, error);
      switch (verdict.type) {
        case 'wait-out':
          await this.rows.returnToPending(trx, job, verdict.delayMs, {
            wait_count: job.wait_count + 1,
            outage_waits: job.outage_waits + 1,
            ...aliveRunner(job),
            ...lastError(error),
          });
          await this.rows.auditJob(
            trx,
            job,
            JobStatus.pending,
            actor,
            `${error.code}: an outside outage; waiting ${verdict.delayMs} ms, no retry spent`,
          );
          return 'retrying' as const;
        case 'isolate':
          await this.rows.isolate(trx, job, IsolationReason.errorBudget, verdict.delayMs, actor, {
            error_count: verdict.errorCount,
            ...lastError(error),
          });
          return 'retrying' as const;
        case 'retry':
          await this.rows.returnToPending(trx, job, verdict.delayMs, {
            error_count: verdict.errorCount,
            ...aliveRunner(job),
            ...lastError(error),
          });
          await this.rows.auditJob(
            trx,
            job,
            JobStatus.pending,
            actor,
            `${error.code}: retry in ${verdict.delayMs} ms${job.isolated_at ? ' (isolated)' : ''}`,
          );
          return 'retrying' as const;
        case 'fail':
          after = await this.rows.failJobRow(
            trx,
            { ...job, error_count: verdict.errorCount },
            verdict.error,
            actor,
            onTerminal,
          );
          return 'failed' as const;
        default:
          return assertNever(verdict, 'attempt verdict');
      }
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
      await this.rows.closeAttempt(trx, job, handle.attemptId, AttemptOutcome.retryableFailed, actor, error);
      await this.rows.returnToPending(trx, job, 0, {});
      await this.rows.auditJob(trx, job, JobStatus.pending, actor, 'released by a stopping worker');
    });
  }

  /**
   * J20: an isolated run ended and its runner process did not settle it. `died`: the runner was
   * killed or crashed while running this job alone (a signal, a non-zero exit, past its time
   * limit), which counts against the job: after `poisonRunnerDeaths` such runs in a row it is
   * declared poison and fails, with its kind's terminal hook (a window keeps its audio, held).
   * Otherwise (the runner could not reach the database to settle) it only runs again after its
   * backoff. Nothing happens when the runner's attempt is no longer the job's running one.
   */
  async endIsolatedRun(
    jobId: string,
    owner: string,
    outcome: { died: boolean; detail: string },
    hooks: TerminalFailureHooks,
    actor: string,
  ): Promise<'none' | 'retrying' | 'poison'> {
    let after: AfterCommit | null = null;
    const result = await this.db.transaction().execute(async (trx) =>
      withAuditBuffer(trx, async () => {
        const job = await trx
          .selectFrom('jobs')
          .selectAll()
          .where('id', '=', jobId)
          .forNoKeyUpdate()
          .executeTakeFirst();
        if (!job || job.status !== JobStatus.running || !job.current_attempt_id) return 'none' as const;
        const attempt = await trx
          .selectFrom('job_attempts')
          .select('id')
          .where('id', '=', job.current_attempt_id)
          .where('owner', '=', owner)
          .where('status', '=', ATTEMPT_RUNNING)
          .executeTakeFirst();
        if (!attempt) return 'none' as const;
        const error: ErrorRecord = {
          kind: ErrorKind.transient,
          code: outcome.died ? 'runner_died' : 'runner_lost',
          message: `its isolated runner ${outcome.detail}`,
        };
        await this.rows.closeAttempt(trx, job, attempt.id, AttemptOutcome.leaseExpired, actor, error);
        const deaths = outcome.died ? job.runner_deaths + 1 : job.runner_deaths;
        if (outcome.died && deaths >= this.rows.isolation().poisonRunnerDeaths) {
          const poison: ErrorRecord = {
            kind: ErrorKind.permanent,
            code: POISON,
            message: `its runner died in ${deaths} isolated runs in a row (last: ${outcome.detail})`,
          };
          after = await this.rows.failJobRow(
            trx,
            { ...job, runner_deaths: deaths },
            poison,
            actor,
            hooks[job.kind as JobKind],
          );
          await trx.updateTable('jobs').set({ runner_deaths: deaths }).where('id', '=', job.id).execute();
          this.deps.log.error({ jobId, kind: job.kind, deaths }, 'job declared poison');
          return 'poison' as const;
        }
        const delayMs = this.rows.isolationDelayMs(job.isolated_runs);
        await this.rows.returnToPending(trx, job, delayMs, {
          runner_deaths: deaths,
          ...(outcome.died ? { reclaim_count: job.reclaim_count + 1 } : {}),
          ...lastError(error),
        });
        await this.rows.auditJob(
          trx,
          job,
          JobStatus.pending,
          actor,
          outcome.died
            ? `isolated runner died (${outcome.detail}): death ${deaths} of ${this.rows.isolation().poisonRunnerDeaths} in a row; runs again in ${delayMs} ms`
            : `isolated runner stopped without settling (${outcome.detail}); runs again in ${delayMs} ms`,
        );
        return 'retrying' as const;
      }),
    );
    if (after) await runAfterCommit(after, this.deps.log);
    return result;
  }

  /** The subject's pending job of this kind, locked (job rows before the meeting row, as everywhere). */
  async lockPendingJob(trx: Tx, subjectId: string, kind: JobKind): Promise<{ id: string } | undefined> {
    return trx
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', '=', subjectId)
      .where('kind', '=', kind)
      .where('status', '=', JobStatus.pending)
      .forNoKeyUpdate()
      .executeTakeFirst();
  }

  /**
   * The meeting's job of this kind that waits for a later time, locked unless another transaction
   * holds it (then undefined: that one is acting on it).
   */
  async lockDelayedJob(trx: Tx, meetingId: string, kind: JobKind): Promise<{ id: string } | undefined> {
    return trx
      .selectFrom('jobs')
      .select('id')
      .where('meeting_id', '=', meetingId)
      .where('kind', '=', kind)
      .where('status', '=', JobStatus.pending)
      .where('run_after', '>', sql<Date>`now()`)
      .forNoKeyUpdate()
      .skipLocked()
      .executeTakeFirst();
  }

  /** The active jobs of these subjects locked, in id order (lock order: job before window or meeting). */
  async lockActiveJobsOf(trx: Tx, subjectIds: string[]): Promise<void> {
    if (subjectIds.length === 0) return;
    await trx
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', 'in', subjectIds)
      .where('status', 'in', ACTIVE_JOB_STATUSES)
      .orderBy('id')
      .forNoKeyUpdate()
      .execute();
  }

  /** Whether a job of this kind and subject is waiting or running. */
  async hasActiveJob(db: Executor, subjectId: string, kind: JobKind): Promise<boolean> {
    const row = await db
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', '=', subjectId)
      .where('kind', '=', kind)
      .where('status', 'in', ACTIVE_JOB_STATUSES)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** J13: a new request for the same subject marks the active job and its running attempt superseded. */
  async supersedeActiveJobs(trx: Tx, subjectId: string, kind: JobKind, actor: string): Promise<number> {
    return this.endActiveJobs(
      trx,
      (q) => q.where('subject_id', '=', subjectId).where('kind', '=', kind),
      JobStatus.superseded,
      actor,
      'superseded by a new request',
    );
  }

  /** J13: every active job of a meeting superseded, for a resubmission of the meeting. */
  async supersedeMeetingJobs(trx: Tx, meetingId: string, actor: string): Promise<number> {
    return this.endActiveJobs(
      trx,
      (q) => q.where('meeting_id', '=', meetingId),
      JobStatus.superseded,
      actor,
      'superseded by a resubmission',
    );
  }

  /**
   * J14: every active job of these meetings canceled, and each running attempt closed as canceled,
   * which invalidates its token: a late worker can no longer renew, fail or commit.
   */
  async cancelMeetingJobs(trx: Tx, meetingIds: string[], actor: string, reason: string): Promise<number> {
    if (meetingIds.length === 0) return 0;
    return this.endActiveJobs(
      trx,
      (q) => q.where('meeting_id', 'in', meetingIds),
      JobStatus.canceled,
      actor,
      reason,
    );
  }

  /** J20: these jobs, if still active, superseded by a resubmission (running attempts closed so). */
  async supersedeJobsOf(trx: Tx, jobIds: string[], actor: string): Promise<number> {
    if (jobIds.length === 0) return 0;
    return this.endActiveJobs(
      trx,
      (q) => q.where('id', 'in', jobIds),
      JobStatus.superseded,
      actor,
      'superseded by a resubmission',
    );
  }

  /** J20: these jobs, if still active, canceled (running attempts closed as canceled), audited. */
  async cancelJobsOf(trx: Tx, jobIds: string[], actor: string, reason: string): Promise<number> {
    if (jobIds.length === 0) return 0;
    return this.endActiveJobs(trx, (q) => q.where('id', 'in', jobIds), JobStatus.canceled, actor, reason);
  }

  private async endActiveJobs(
    trx: Tx,
    filter: (q: ActiveJobQuery) => ActiveJobQuery,
    to: typeof JobStatus.superseded | typeof JobStatus.canceled,
    actor: string,
    reason: string,
  ): Promise<number> {
    // One order for locking several jobs of a meeting: the kinds the catalog locks first (a repair
    // commit holds its own job, then locks the window jobs it supersedes), then by id.
    const active = await filter(
      trx.selectFrom('jobs').selectAll().where('status', 'in', JobTransitions.supersedeJob.from),
    )
      .orderBy(sql`kind = any(${[...(this.deps.lockedFirst ?? [])]}::text[])`, 'desc')
      .orderBy('id')
      .forNoKeyUpdate()
      .execute();
    const outcome = to === JobStatus.superseded ? AttemptOutcome.superseded : AttemptOutcome.canceled;
    for (const job of active) {
      if (job.status === JobStatus.running && job.current_attempt_id) {
        await this.rows.closeAttempt(trx, job, job.current_attempt_id, outcome, actor, null);
      }
      await trx
        .updateTable('jobs')
        .set({
          status: to,
          // The key names the one active job for its purpose; a later request may take it.
          dedupe_key: null,
          ...(to === JobStatus.superseded
            ? { superseded_at: sql<Date>`now()` }
            : { canceled_at: sql<Date>`now()` }),
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', job.id)
        .execute();
      if (job.status === JobStatus.pending) {
        await sql`select verbatim_unqueue(${job.delivery_id}::text)`.execute(trx);
      }
      await this.rows.auditJob(trx, job, to, actor, reason);
    }
    return active.length;
  }

  /**
   * The other active jobs of this one's kind and subject, oldest first (by creation, then id):
   * whether this one's work is outdated by a later one, or should wait for an earlier one.
   */
  async otherActiveJobs(
    job: Pick<JobRow, 'id' | 'kind' | 'subject_id'>,
  ): Promise<Array<Pick<JobRow, 'id' | 'status' | 'created_at' | 'run_after'>>> {
    return this.db
      .selectFrom('jobs')
      .select(['id', 'status', 'created_at', 'run_after'])
      .where('kind', '=', job.kind)
      .where('subject_id', '=', job.subject_id)
      .where('id', '<>', job.id)
      .where('status', 'in', ACTIVE_JOB_STATUSES)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
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
    if (before) await sql`select verbatim_unqueue(${before.delivery_id}::text)`.execute(trx);
    await this.rows.auditJob(trx, job, JobStatus.pending, actor, reason);
    await enqueueDelivery(trx, job, this.deps);
  }
}

/** J20: an isolated run that ended without killing its runner breaks the poison count. */
function aliveRunner(job: JobRow): { runner_deaths?: number } {
  return job.isolated_at ? { runner_deaths: 0 } : {};
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
