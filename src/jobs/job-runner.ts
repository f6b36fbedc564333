import type { Checkpoints } from '../checkpoints.ts';
import { isDatabaseConnectionLoss } from '../db/connection-errors.ts';
import { AppError, ErrorKind, toErrorRecord, type ErrorRecord } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import { LostLeaseError } from './attempt-handle.ts';
import type { DeliveryPayload } from './delivery-store.ts';
import { attemptContext } from './attempt-context.ts';
import type { JobDefinition } from './job-definition.ts';
import type { ClaimedJob, PgJobStore } from './pg-job-store.ts';

export interface RunnerDeps {
  jobs: PgJobStore;
  log: Logger;
  checkpoints: Checkpoints;
  workerId: string;
  heartbeatMs: number;
  /** The lease: how long a failed attempt's report is retried across a cut connection. */
  leaseMs: number;
  /** An attempt running longer than this is abandoned and failed as `job.timeout`. */
  maxRunMs: number;
  /** Aborts every running job when the worker drains past its deadline (J11). */
  shutdownSignal: AbortSignal;
  /** J20: this runner is an isolated one: it claims only isolated jobs. */
  isolated?: boolean;
}

class Shutdown extends Error {}
class RunTimeout extends Error {}

/**
 * Runs one delivery: claim (J1), renew the lease while working (J2), and settle the attempt through
 * the fenced store methods (J3). A delivery for a job that is not claimable is acknowledged and
 * dropped, since the row, not the message, is the truth: false then, true when an attempt ran.
 *
 * The handler is raced against the attempt's abort signal: once the lease is lost, the worker is
 * draining or the run is over its time limit, the runner stops waiting — a handler stuck in an
 * await that ignores the signal cannot hold the job, and anything it writes later is refused.
 */
export async function runDelivery(
  def: JobDefinition,
  payload: DeliveryPayload,
  deps: RunnerDeps,
): Promise<boolean> {
  const claimed = await deps.jobs.claimJob(
    payload.jobId,
    deps.workerId,
    { deliveryId: payload.deliveryId, ...(deps.isolated ? { isolated: true } : {}) },
    deps.isolated ?? false,
  );
  if (!claimed) return false;
  await runAttempt(def, claimed, deps);
  return true;
}

/** One claimed attempt, from its handler's start to its settlement. */
async function runAttempt(def: JobDefinition, claimed: ClaimedJob, deps: RunnerDeps): Promise<void> {
  const actor = `worker:${deps.workerId}`;
  const { job, handle } = claimed;
  const log = deps.log.child({ jobId: job.id, kind: job.kind, attempt: handle.attemptNo });
  log.info('attempt started');

  const controller = new AbortController();
  const onShutdown = () => controller.abort(new Shutdown('worker is stopping'));
  deps.shutdownSignal.addEventListener('abort', onShutdown, { once: true });
  if (deps.shutdownSignal.aborted) onShutdown();
  const deadline = setTimeout(
    () => controller.abort(new RunTimeout(`ran longer than ${deps.maxRunMs} ms`)),
    deps.maxRunMs,
  );
  const heartbeat = setInterval(() => {
    if (controller.signal.aborted) return;
    deps.jobs.renewLease(handle).then(
      (held) => {
        if (!held && !controller.signal.aborted) {
          log.warn('lease lost to another attempt; stopping this job');
          controller.abort(new LostLeaseError(job.id));
        }
      },
      (err: unknown) => log.warn({ err: String(err) }, 'lease renewal failed; will retry'),
    );
  }, deps.heartbeatMs);
  const aborted = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(controller.signal.reason as Error), {
      once: true,
    });
  });
  aborted.catch(() => undefined);

  let settled = false;
  // The earliest the job may run again that the handler has learnt this attempt (a provider's
  // Retry-After it meant to wait out): honoured however the attempt ends up settled, even when
  // the requeue that carried it was lost with the database connection (V6).
  let notBefore = 0;
  const wantLater = (ms: number) => (notBefore = Math.max(notBefore, Date.now() + ms));
  const ctx = attemptContext(deps.jobs, claimed, {
    signal: controller.signal,
    log,
    actor,
    settled: () => (settled = true),
    later: wantLater,
  });

  try {
    const work = (async () => {
      await deps.checkpoints.hit(`${job.kind}.after-claim`, checkpointContext(job.payload));
      await def.run(ctx);
    })();
    work.catch(() => undefined);
    await Promise.race([work, aborted]);
    if (!settled) throw new Error(`${job.kind} handler returned without settling its attempt`);
    log.info('attempt settled');
  } catch (err) {
    const reason: unknown = controller.signal.reason;
    if (err instanceof LostLeaseError || reason instanceof LostLeaseError) {
      log.warn('attempt no longer holds the job; its writes were refused');
      return;
    }
    if (reason instanceof Shutdown) {
      await deps.jobs.releaseAttempt(handle, actor).catch((e: unknown) => {
        log.warn({ err: String(e) }, 'could not release attempt; its lease will expire');
      });
      log.info('attempt released to another worker');
      return;
    }
    const record: ErrorRecord =
      reason instanceof RunTimeout
        ? { kind: ErrorKind.transient, code: 'job.timeout', message: reason.message }
        : toErrorRecord(err);
    if (record.kind === ErrorKind.unclassified) {
      log.error({ err: err instanceof Error ? err.stack : String(err) }, 'unclassified job error');
    }
    const asked = err instanceof AppError ? (err.retryAfterSeconds ?? 0) : 0;
    const learnt = Math.ceil((notBefore - Date.now()) / 1000);
    const retryAfter = Math.max(asked, learnt) > 0 ? Math.max(asked, learnt) : undefined;
    try {
      // The failure, with the provider's Retry-After, is recorded even across a cut connection:
      // a report lost to a terminated backend would leave the job to its lease, which would retry
      // it sooner than the provider had asked (V6). The lease is renewed meanwhile.
      const result = await retryOnConnectionLoss(deps.leaseMs, () =>
        deps.jobs.failAttempt(handle, actor, record, retryAfter, def.onTerminalFailure),
      );
      log.warn({ code: record.code, kind: record.kind, result }, 'attempt failed');
    } catch (failErr) {
      if (failErr instanceof LostLeaseError) {
        log.warn('attempt no longer holds the job; its writes were refused');
        return;
      }
      throw failErr;
    }
  } finally {
    clearInterval(heartbeat);
    clearTimeout(deadline);
    deps.shutdownSignal.removeEventListener('abort', onShutdown);
  }
}

/**
 * Tries again while the database connection is what failed, for up to a lease: the heartbeat
 * keeps the lease meanwhile, so the report lands once the database is back (a restart, a storm of
 * terminated backends), or the attempt learns that its lease was lost.
 */
async function retryOnConnectionLoss<T>(forMs: number, fn: () => Promise<T>): Promise<T> {
  const until = Date.now() + Math.max(forMs, 2_000);
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() >= until || !isDatabaseConnectionLoss(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 1_000)));
    }
  }
}

function checkpointContext(
  payload: Record<string, unknown>,
): Record<string, string | number | boolean | null> {
  const out: Record<string, string | number | boolean | null> = {};
  for (const [k, v] of Object.entries(payload)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v === null) out[k] = v;
  }
  return out;
}
