import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { childProcessEnv, type Config, type IsolatedRun } from '../config.ts';
import { isDatabaseConnectionLoss } from '../db/connect.ts';
import type { JobKind } from '../domain/status.ts';
import type { DeliveryPayload } from '../jobs/delivery-store.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import { runDelivery } from '../jobs/job-runner.ts';
import type { PgJobStore, TerminalFailureHooks } from '../jobs/pg-job-store.ts';
import type { Logger } from '../log.ts';
import type { MeetingDeps } from '../meetings/deps.ts';

/**
 * J20: the isolated lane. A job that lost its worker too often (or a window whose error budget ran
 * out) runs alone, in a process of its own that the worker starts for that one run, so that the
 * runner's death can be laid at the job's door: nothing else ran there. The worker watches the
 * process: a runner killed by a signal, exiting non-zero or running past its time limit is a
 * runner death, and `poisonRunnerDeaths` of those in a row make the job poison
 * (PgJobStore.endIsolatedRun). A runner that could only not reach the database is no death.
 *
 * The runner is started in a session of its own and outlives its worker: a worker killed while its
 * isolated job runs (the very thing that put the job here, when the faults are outside it) does not
 * take the run down with it. The runner renews its own lease, settles its own attempt and exits.
 */

/** The runner could not settle its run because the database was out of reach: no fault of the job. */
export const EXIT_DATABASE_LOST = 75;

export interface IsolatedLaneDeps {
  jobs: PgJobStore;
  log: Logger;
  config: Config;
  workerId: string;
  /** The database the runner is to use (the embedded one's address, when the worker started it). */
  connectionString: string;
  hooks: TerminalFailureHooks;
  /** The worker is stopping past its drain: the runner is asked to hand its attempt back. */
  shutdownSignal: AbortSignal;
}

/** The worker's side: one delivery of an isolated job, run in a new process and watched. */
export async function runIsolatedDelivery(
  kind: JobKind,
  delivery: DeliveryPayload,
  deps: IsolatedLaneDeps,
): Promise<void> {
  const owner = `${deps.workerId}/isolated-${randomBytes(3).toString('hex')}`;
  const run: IsolatedRun = { kind, jobId: delivery.jobId, deliveryId: delivery.deliveryId, owner };
  const log = deps.log.child({ jobId: delivery.jobId, kind, runner: owner });
  const { command, args } = cliCommand();
  const child = spawn(command, [...args, 'isolated-run'], {
    env: childProcessEnv(deps.config, {
      DATABASE_URL: deps.connectionString,
      VERBATIM_ISOLATED_RUN: JSON.stringify(run),
    }),
    stdio: ['ignore', 'inherit', 'inherit'],
    // Its own session: a signal to the worker's process group does not reach it.
    detached: true,
  });
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: Error }>(
    (resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => resolve({ error }));
    },
  );
  log.info({ pid: child.pid }, 'isolated job: started its runner process');
  // A run stuck past its time limit (its own timer could not fire: a busy loop) is ended here, and
  // counts as a death: the job did it.
  let overran = false;
  const limitMs = deps.config.jobTimeoutMs + 2 * deps.config.leaseMs + 30_000;
  const watchdog = setTimeout(() => {
    overran = true;
    child.kill('SIGKILL');
  }, limitMs);
  const onShutdown = () => child.kill('SIGTERM');
  deps.shutdownSignal.addEventListener('abort', onShutdown, { once: true });
  const end = await ended;
  clearTimeout(watchdog);
  deps.shutdownSignal.removeEventListener('abort', onShutdown);
  if ('error' in end) {
    // Never started (out of processes or memory): the job was not claimed; the rescue sweep
    // delivers it again.
    log.error({ err: end.error.message }, 'isolated job: its runner process could not be started');
    return;
  }
  if (end.code === 0) return;
  // A runner this worker asked to stop (its drain ran out) that could not hand its attempt back
  // in time did not die of its job.
  const stopped = deps.shutdownSignal.aborted && (end.signal === 'SIGTERM' || end.signal === null);
  const died = overran || (end.code !== EXIT_DATABASE_LOST && !stopped);
  const detail = overran
    ? `ran past its time limit (${limitMs} ms) and was killed`
    : stopped
      ? 'was stopped with its worker before it could hand its run back'
      : end.signal
        ? `was killed by ${end.signal}`
        : died
          ? `exited with code ${end.code}`
          : 'could not reach the database to settle its run';
  log.warn({ code: end.code, signal: end.signal, died }, `isolated job: its runner ${detail}`);
  try {
    const outcome = await deps.jobs.endIsolatedRun(
      delivery.jobId,
      owner,
      { died, detail },
      deps.hooks,
      `worker:${deps.workerId}`,
    );
    if (outcome === 'poison') log.error('isolated job declared poison');
  } catch (err) {
    // The database is away: the run's lease runs out and the sweep returns it (as no death).
    log.warn({ err: String(err) }, 'isolated job: could not record how its run ended');
  }
}

/** The runner's side (`verbatim isolated-run`): claim the one job, run it, settle it, exit. */
export async function runIsolatedJob(
  deps: MeetingDeps,
  definitions: JobDefinition[],
  run: IsolatedRun,
  log: Logger,
): Promise<number> {
  const def = definitions.find((d) => d.kind === run.kind);
  if (!def) throw new Error(`no handler for job kind ${run.kind}`);
  const shutdown = new AbortController();
  process.once('SIGTERM', () => shutdown.abort());
  try {
    await runDelivery(
      def,
      { jobId: run.jobId, deliveryId: run.deliveryId },
      {
        jobs: deps.jobs,
        log,
        checkpoints: deps.checkpoints,
        workerId: run.owner,
        heartbeatMs: deps.config.heartbeatMs,
        leaseMs: deps.config.leaseMs,
        maxRunMs: deps.config.jobTimeoutMs,
        shutdownSignal: shutdown.signal,
        isolated: true,
      },
    );
    return 0;
  } catch (err) {
    if (isDatabaseConnectionLoss(err)) {
      log.warn({ err: String(err) }, 'isolated run could not reach the database');
      return EXIT_DATABASE_LOST;
    }
    throw err;
  }
}

/** How to start this program's CLI again: the built one with node, the sources through tsx. */
function cliCommand(): { command: string; args: string[] } {
  const here = fileURLToPath(import.meta.url);
  const ext = path.extname(here);
  const main = path.join(path.dirname(here), '..', 'cli', `main${ext}`);
  return { command: process.execPath, args: ext === '.ts' ? ['--import', 'tsx', main] : [main] };
}
