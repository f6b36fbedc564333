import type { JobRow, Tx } from '../db/schema.ts';
import type { JobKind } from '../domain/status.ts';
import type { Logger } from '../log.ts';
import type { AttemptHandle } from './attempt-handle.ts';
import type { TerminalFailureHook } from './pg-job-store.ts';

export interface JobContext {
  job: JobRow;
  handle: AttemptHandle;
  /** Aborted when the lease is lost (J3) or the worker is draining (J11): stop promptly. */
  signal: AbortSignal;
  log: Logger;
  actor: string;
  /** Commits the caller's writes with the attempt's completion (J5). */
  complete(commit?: (trx: Tx, job: JobRow) => Promise<void>): Promise<void>;
  /** Ends this run normally and runs the job again after `delayMs`, spending no retry. */
  requeue(delayMs: number, reason: string, commit?: (trx: Tx, job: JobRow) => Promise<void>): Promise<void>;
  /**
   * Ends this run and runs the job again after an outside outage's backoff, spending no retry and
   * counting one outage wait (`job.outage_waits`; the caller decides what to do once it reaches
   * its kind's outage waits, as the failure path does for thrown outages).
   */
  waitOutOutage(
    reason: string,
    commit?: (trx: Tx, job: JobRow) => Promise<void>,
    retryAfterSeconds?: number,
  ): Promise<void>;
  /** Settles the attempt with one fenced statement built by the caller (see PgJobStore.runFencedStatementAlone). */
  completeWith: (settle: (handle: AttemptHandle) => Promise<void>) => Promise<void>;
  /** Writes that must not outlive the lease (J3), without settling the attempt. */
  fenced: <T>(fn: (trx: Tx, job: JobRow) => Promise<T>) => Promise<T>;
}

/** A job kind's handler; the worker holds one per kind of the catalog (src/jobs/catalog.ts). */
export interface JobDefinition<K extends JobKind = JobKind> {
  kind: K;
  /** Must settle the attempt with ctx.complete or ctx.requeue, or throw to fail it. */
  run(ctx: JobContext): Promise<void>;
  onTerminalFailure?: TerminalFailureHook;
}
