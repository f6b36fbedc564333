import type { JobRow } from '../db/schema.ts';
import type { Logger } from '../log.ts';
import type { AttemptHandle } from './attempt-handle.ts';
import type { JobContext } from './job-definition.ts';
import type { PgJobStore } from './pg-job-store.ts';

/** How a handler settled its attempt. */
export type Settlement = 'completed' | 'requeued' | 'waiting out an outage' | 'completed with';

/**
 * The context a handler receives for one claimed attempt: each way of settling goes through the
 * job store's fenced methods (J3, J5) and is reported to `settled`; `later` hears of each delay the
 * handler asks for (a requeue's, a provider's Retry-After) before it is written. The worker's runner
 * (job-runner.ts) and the tests' in-process runs (test/support/job-context.ts) both build it here.
 */
export function attemptContext(
  jobs: Pick<PgJobStore, 'completeAttempt' | 'requeueAttempt' | 'requeueForOutage' | 'withFencedAttempt'>,
  claimed: { job: JobRow; handle: AttemptHandle },
  opts: {
    signal: AbortSignal;
    log: Logger;
    actor: string;
    settled: (how: Settlement) => void;
    later?: (delayMs: number) => void;
  },
): JobContext {
  const { job, handle } = claimed;
  const { actor, settled } = opts;
  const later = opts.later ?? (() => undefined);
  return {
    job,
    handle,
    signal: opts.signal,
    log: opts.log,
    actor,
    complete: async (commit) => {
      await jobs.completeAttempt(handle, actor, commit);
      settled('completed');
    },
    requeue: async (delayMs, reason, commit) => {
      later(delayMs);
      await jobs.requeueAttempt(handle, actor, delayMs, reason, commit);
      settled('requeued');
    },
    waitOutOutage: async (reason, commit, retryAfterSeconds) => {
      later((retryAfterSeconds ?? 0) * 1000);
      await jobs.requeueForOutage(handle, actor, reason, commit, retryAfterSeconds);
      settled('waiting out an outage');
    },
    completeWith: async (settle) => {
      await settle(handle);
      settled('completed with');
    },
    fenced: (fn) => jobs.withFencedAttempt(handle, fn),
  };
}
