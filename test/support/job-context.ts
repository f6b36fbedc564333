// A job context without a worker process: claims a job through the real job store and
// hands its handler the context a worker would, so one handler run can be driven and its outcome
// read in-process. Settling goes through the same fenced store methods as src/jobs/job-runner.ts.
import { attemptContext, type Settlement } from '../../src/jobs/attempt-context.ts';
import type { JobContext } from '../../src/jobs/job-definition.ts';
import type { PgJobStore } from '../../src/jobs/pg-job-store.ts';
import type { Logger } from '../../src/log.ts';

export type Settled = Settlement | null;

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
  const controller = new AbortController();
  let settled: Settled = null;
  const ctx = attemptContext(deps.jobs, claimed, {
    signal: controller.signal,
    log: deps.log,
    actor: `worker:${owner}`,
    settled: (how) => (settled = how),
  });
  return { ctx, settled: () => settled, abort: (reason) => controller.abort(reason) };
}
