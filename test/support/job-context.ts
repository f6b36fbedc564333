// A job context without a worker process (issue 34): claims a job through the real job store and
// hands its handler the context a worker would, so one handler run can be driven and its outcome
// read in-process. Settling goes through the same fenced store methods as src/jobs/job-runner.ts.
import type { JobContext } from '../../src/jobs/job-definition.ts';
import type { PgJobStore } from '../../src/jobs/pg-job-store.ts';
import type { Logger } from '../../src/log.ts';

export type Settled = 'completed' | 'requeued' | 'waiting out an outage' | 'completed with' | null;

export interface TestJobRun {
  ctx: JobContext;
  /** How the handler settled its attempt; null while it has not. */
  settled(): Settled;
  /** Aborts the run, as a lost lease or a draining worker would. */
  abort(reason?: Error): void;
}

export async function claimForTest(
  deps: { jobs: PgJobStore; log: Logger },
  jobId: string,
  owner = 'test-runner',
): Promise<TestJobRun> {
  const claimed = await deps.jobs.claimJob(jobId, owner, { test: true });
  if (!claimed) throw new Error(`job ${jobId} is not claimable`);
  const { job, handle } = claimed;
  const actor = `worker:${owner}`;
  const controller = new AbortController();
  let settled: Settled = null;
  const ctx: JobContext = {
    job,
    handle,
    signal: controller.signal,
    log: deps.log,
    actor,
    complete: async (commit) => {
      await deps.jobs.completeAttempt(handle, actor, commit);
      settled = 'completed';
    },
    requeue: async (delayMs, reason, commit) => {
      await deps.jobs.requeueAttempt(handle, actor, delayMs, reason, commit);
      settled = 'requeued';
    },
    waitOutOutage: async (reason, commit, retryAfterSeconds) => {
      await deps.jobs.requeueForOutage(handle, actor, reason, commit, retryAfterSeconds);
      settled = 'waiting out an outage';
    },
    completeWith: async (settle) => {
      await settle(handle);
      settled = 'completed with';
    },
    fenced: (fn) => deps.jobs.withFencedAttempt(handle, fn),
  };
  return { ctx, settled: () => settled, abort: (reason) => controller.abort(reason) };
}
