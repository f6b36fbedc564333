import { randomBytes, randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import os from 'node:os';
import {
  Logger as GraphileLogger,
  run,
  type Runner,
  type TaskList,
  type WorkerEvents,
} from 'graphile-worker';
import { QUEUE_OF, QueueName } from '../domain/status.ts';
import { OutboxDispatcher } from '../events/dispatcher.ts';
import { DISPATCH_TASK } from '../events/outbox-store.ts';
import type { DeliveryPayload } from '../jobs/delivery-store.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import { runDelivery } from '../jobs/job-runner.ts';
import { redriveSearchIndex } from '../search/indexer.ts';
import type { PgJobSweeps } from '../jobs/job-sweep-store.ts';
import type { TerminalFailureHooks } from '../jobs/pg-job-store.ts';
import type { Logger } from '../log.ts';
import { deleteEndedMeetingsAudio } from '../meetings/audio-lifecycle.ts';
import { publishLateWindowsSweep } from '../meetings/late-windows.ts';
import { startCloseOutsPastHeldWindows, startLostCloseOuts } from '../meetings/close-out-start.ts';
import { cleanupPass } from '../storage/objects.ts';
import { startWebhookLoop } from '../events/webhooks.ts';
import { runBotBackstops } from '../bots/resume.ts';
import { compactStreams } from '../meetings/stream-store.ts';
import { startCalendarLoop } from '../bots/calendar-feeds.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { DRAFT_TASK, makeDraft, type DraftPayload } from '../meetings/drafts.ts';
import { declareWorkersWithFreeLocks } from './death-watch-store.ts';
import { runIsolatedDelivery } from './isolated-runner.ts';
import { appConnectionString } from '../db/roles.ts';
import { LifeLock } from './life-lock.ts';
import { TransportPool } from './transport-pool.ts';
import { WorkerRegistry } from './worker-store.ts';

export interface WorkerHandle {
  workerId: string;
  /** J11: stop claiming, drain running jobs up to `drainMs`, then release what is left. */
  stop(drainMs?: number): Promise<void>;
}

const BACKSTOP_TASK = 'sweep-backstop';
/** How often a worker looks at the search index's ledger (O2). */
const SEARCH_REDRIVE_MS = 10_000;
/** F5: rounds the lowest waiting job may be past its queue's base before the base follows it. */
const FAIR_REBASE_GAP = 1_000;

/**
 * One worker process: a graphile-worker runner per queue (its concurrency models the resource,
 * L13), a heartbeat, and the fast sweeps on a timer (J8) — safe on any number of replicas because
 * every repair is a compare-and-swap. A crontab entry runs the same sweeps as a slow backstop.
 */
export async function startWorker(
  deps: MeetingDeps,
  definitions: JobDefinition[],
  consumers: ConstructorParameters<typeof OutboxDispatcher>[1],
  connectionString: string,
  sweeps: PgJobSweeps,
): Promise<WorkerHandle> {
  const { config, log } = deps;
  const workerId = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const wlog = log.child({ workerId });
  const sweepActor = `sweep:${workerId}`;
  const registry = new WorkerRegistry(deps.db, wlog);
  await registry.register(workerId);
  // J18: the worker's life, as a lock Postgres frees the moment this process is gone.
  const lifeLock = new LifeLock(connectionString, randomInt(2 ** 31), wlog, async (client) => {
    await client.query(
      'update workers set lock_key = $1, lock_taken_at = now(), lock_free_since = null where id = $2',
      [lifeLock.key, workerId],
    );
  });
  await lifeLock.start();

  const hooks: TerminalFailureHooks = {};
  for (const def of definitions) if (def.onTerminalFailure) hooks[def.kind] = def.onTerminalFailure;
  const shutdown = new AbortController();
  const dispatcher = new OutboxDispatcher(deps.db, consumers, {
    owner: workerId,
    leaseMs: config.leaseMs,
    retryBaseMs: 1000,
    log: wlog,
    checkpoints: deps.checkpoints,
  });

  // Per process: streams compacted once a minute (L23), the search ledger every ten seconds (O2).
  const compactStreamsIfDue = throttled(60_000, () => compactStreams(deps.db));
  const redriveSearchIfDue = throttled(SEARCH_REDRIVE_MS, () => redriveSearchIndex(deps));
  const sweep = async (): Promise<void> => {
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['reclaim-expired-leases', () => sweeps.reclaimExpiredLeases(sweepActor)],
      ['reap-dead-workers', () => registry.reapDeadWorkers(config.leaseMs + config.leaseGraceMs, sweepActor)],
      ['rescue-pending-jobs', () => sweeps.rescuePendingJobs(sweepActor)],
      // A dispatch or backstop run lasting five leases is stuck, not slow.
      ['release-stale-transport-rows', () => sweeps.releaseStaleTransportRows(5 * config.leaseMs)],
      ['dispatch-outbox', () => dispatcher.dispatchDue()],
      ['publish-late-windows', () => publishLateWindowsSweep(deps, sweepActor, wlog)],
      ['start-close-outs-past-held-windows', () => startCloseOutsPastHeldWindows(deps, sweepActor)],
      ['start-lost-close-outs', () => startLostCloseOuts(deps, sweepActor)],
      ['delete-ended-meeting-audio', () => deleteEndedMeetingsAudio(deps)],
      ['compact-meeting-streams', compactStreamsIfDue],
      ['redrive-search-index', redriveSearchIfDue],
      ['rebase-fair-rounds', () => sweeps.rebaseFairRoundsIfDue(FAIR_REBASE_GAP)],
      ['object-cleanup', () => cleanupPass(deps, workerId)],
    ];
    await runSteps(steps, wlog);
  };
  // One sweep at a time in a process, whether its timer or the cron backstop asks: a tick that
  // finds one running waits for it rather than starting a second (two cleanup passes of one
  // owner would hand back each other's rows).
  const sweepRuns = oneAtATime(sweep);
  const sweepOnce = sweepRuns.run;
  // The provider's steps run on their own timer: a slow or hanging bot provider, or a run waiting
  // for a budget slot, must never hold up lease reclaims and the other fast sweeps. One at a time
  // in a process, whether the timer or the cron backstop asks (runBotBackstops relies on it).
  const providerSweep = async (): Promise<void> => {
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['bot-backstops', () => runBotBackstops(deps, deps.bots, workerId)],
    ];
    await runSteps(steps, wlog);
  };
  const providerSweeps = oneAtATime(providerSweep);
  const providerSweepOnce = providerSweeps.run;

  const transportPool = createTransportPool(config, connectionString, wlog);

  const { byQueue, specs } = jobRunnerSpecs(deps, definitions, {
    log: wlog,
    workerId,
    connectionString,
    hooks,
    shutdownSignal: shutdown.signal,
  });
  specs.push(draftRunnerSpec(deps, wlog));
  specs.push({
    taskList: {
      [DISPATCH_TASK]: async () => {
        await dispatcher.dispatchDue();
      },
      [BACKSTOP_TASK]: async () => {
        await sweepOnce();
        await providerSweepOnce();
      },
    },
    concurrency: 1,
    crontab: `*/5 * * * * ${BACKSTOP_TASK}`,
  });
  const runners: Runner[] = [];
  try {
    await startRunners(specs, runners, transportPool, registry, workerId, wlog);
  } catch (err) {
    // A start cut short (the database went away): undo what started, so the caller may try again.
    await Promise.allSettled(runners.map((r) => r.stop()));
    await registry.stopped(workerId).catch(() => undefined);
    await lifeLock.stop();
    await transportPool.end().catch(() => undefined);
    throw err;
  }

  const heartbeat = setInterval(() => {
    registry
      .heartbeat(workerId)
      .catch((err: unknown) => wlog.warn({ err: String(err) }, 'worker heartbeat failed'));
  }, config.heartbeatMs);
  // A tick that finds the previous sweep still running is skipped, so a slow sweep never piles up.
  const sweepTimer = setInterval(() => {
    if (!sweepRuns.running()) void sweepOnce();
  }, config.sweepMs);
  // J18: each worker watches the others' life locks; a death is reclaimed at once, not at lease end.
  let watching: Promise<void> | null = null;
  const deathWatch = setInterval(() => {
    if (watching) return;
    watching = (async () => {
      const dead = await declareWorkersWithFreeLocks(
        deps.db,
        workerId,
        config.deathCheckMs * 0.8,
        config.leaseGraceMs,
        sweepActor,
        wlog,
      );
      if (dead.length > 0) await sweeps.reclaimExpiredLeases(sweepActor);
    })()
      .catch((err: unknown) => wlog.warn({ err: String(err) }, 'death watch failed'))
      .finally(() => {
        watching = null;
      });
  }, config.deathCheckMs);
  const webhooks = startWebhookLoop(deps, workerId, { tickMs: config.sweepMs });
  // F6: calendar feeds are read in a loop of their own too, beside the provider's steps.
  const feeds = deps.bots ? startCalendarLoop(deps, { tickMs: config.sweepMs }) : null;
  const providerTimer = deps.bots
    ? setInterval(() => {
        if (!providerSweeps.running()) void providerSweepOnce();
      }, config.sweepMs)
    : null;
  await deps.checkpoints.hit('worker.started', {});
  wlog.info({ queues: [...byQueue.keys()] }, 'worker started');

  return {
    workerId,
    stop: async (drainMs = config.drainMs) => {
      clearInterval(sweepTimer);
      clearInterval(deathWatch);
      if (providerTimer) clearInterval(providerTimer);
      wlog.info({ drainMs }, 'worker stopping: no new claims, draining running jobs');
      const drained = Promise.all([...runners.map((r) => r.stop()), webhooks.stop(), feeds?.stop()]);
      const timer = setTimeout(() => shutdown.abort(), drainMs);
      await drained;
      clearTimeout(timer);
      clearInterval(heartbeat);
      await sweepRuns.running()?.catch(() => undefined);
      await providerSweeps.running()?.catch(() => undefined);
      await watching?.catch(() => undefined);
      // Stopped first, then the lock released: a free lock on a stopped row is not a death.
      await registry.stopped(workerId).catch(() => undefined);
      await lifeLock.stop();
      await transportPool.end();
      wlog.info('worker stopped');
    },
  };
}

function bridgeLogger(log: Logger): GraphileLogger {
  return new GraphileLogger((scope) => (level, message, meta) => {
    const fields = { graphile: scope.label, ...(meta ?? {}) };
    const name: string = level;
    if (name === 'error') log.error(fields, message);
    else if (name === 'warning') log.warn(fields, message);
    else log.debug(fields, message);
  });
}

/** The pool graphile-worker runs on, with room for every runner's LISTEN and every job. */
function createTransportPool(
  config: MeetingDeps['config'],
  connectionString: string,
  wlog: Logger,
): TransportPool {
  const pool = new TransportPool(
    {
      connectionString: appConnectionString(connectionString),
      ...(config.idleTransactionMs > 0
        ? { idle_in_transaction_session_timeout: config.idleTransactionMs }
        : {}),
      // A LISTEN connection per runner (drafts too), one per concurrent job, and room for graphile-worker itself.
      max: 10 + Object.values(config.concurrency).reduce((a, b) => a + b, 0),
    },
    (stack) =>
      wlog.warn({ stack }, 'a transport connection was released twice (graphile-worker LISTEN); ignored'),
  );
  pool.on('error', (err) => wlog.warn({ err: err.message }, 'idle transport connection failed'));
  pool.on('connect', (c) =>
    c.on('error', (err) => wlog.warn({ err: err.message }, 'transport connection failed')),
  );
  return pool;
}

interface RunnerSpec {
  taskList: TaskList;
  concurrency: number;
  crontab: string | null;
}

/**
 * One runner per job queue (L13), each delivery run in this process or, for an isolated job, in a
 * process of its own (J20).
 */
function jobRunnerSpecs(
  deps: MeetingDeps,
  definitions: JobDefinition[],
  lane: {
    log: Logger;
    workerId: string;
    connectionString: string;
    hooks: TerminalFailureHooks;
    shutdownSignal: AbortSignal;
  },
): { byQueue: Map<QueueName, JobDefinition[]>; specs: RunnerSpec[] } {
  const { config } = deps;
  const byQueue = new Map<QueueName, JobDefinition[]>();
  for (const def of definitions) {
    const queue = QUEUE_OF[def.kind];
    byQueue.set(queue, [...(byQueue.get(queue) ?? []), def]);
  }
  const concurrencyOf: Record<QueueName, number> = {
    [QueueName.intake]: config.concurrency.intake,
    [QueueName.transcription]: config.concurrency.transcription,
    [QueueName.closeout]: config.concurrency.closeout,
    [QueueName.minutes]: config.concurrency.minutes,
    [QueueName.bots]: config.concurrency.bots,
  };
  // One runner per job queue (L13), plus a delivery runner for the outbox dispatcher and the cron
  // backstop of the sweeps, so neither waits behind a long decode or a slow minutes model.
  const specs: RunnerSpec[] = [];
  for (const [queue, defs] of byQueue) {
    const taskList: TaskList = {};
    for (const def of defs) {
      taskList[def.kind] = async (payload) => {
        const delivery = payload as DeliveryPayload;
        // Most deliveries are of an ordinary job that is due: the ordinary lane's claim takes it in
        // one statement, which never takes an isolated job (J20). Only a delivery it could not
        // claim asks which lane its job is in.
        const ran = await runDelivery(def, delivery, {
          jobs: deps.jobs,
          log: lane.log,
          checkpoints: deps.checkpoints,
          workerId: lane.workerId,
          heartbeatMs: config.heartbeatMs,
          leaseMs: config.leaseMs,
          maxRunMs: config.jobTimeoutMs,
          shutdownSignal: lane.shutdownSignal,
        });
        if (ran) return;
        // J20: an isolated job runs alone, in a process of its own that this worker watches. An
        // ordinary job not claimed (not due, done, or alive elsewhere), or an isolated one with
        // nothing to run now, is dropped: the row, not the message, is the truth.
        if ((await deps.jobs.laneOf(delivery.jobId)) !== 'isolated') return;
        await runIsolatedDelivery(def.kind, delivery, {
          jobs: deps.jobs,
          log: lane.log,
          config,
          workerId: lane.workerId,
          connectionString: lane.connectionString,
          hooks: lane.hooks,
          shutdownSignal: lane.shutdownSignal,
        });
      };
    }
    specs.push({ taskList, concurrency: concurrencyOf[queue], crontab: null });
  }
  return { byQueue, specs };
}

/** L22: the drafts' runner. */
function draftRunnerSpec(deps: MeetingDeps, wlog: Logger): RunnerSpec {
  const { config } = deps;
  // L22: drafts on a runner of their own, one at a time, never retried (src/meetings/drafts.ts).
  // A worker with drafts off still takes the jobs (an api process with them on enqueued them) and
  // drops them, so none is left in the queue for ever.
  return {
    taskList: {
      [DRAFT_TASK]: async (payload) => {
        if (!config.drafts) return;
        try {
          const outcome = await makeDraft(deps, payload as DraftPayload);
          if (outcome === 'shed') wlog.debug({ payload }, 'draft shed: the drafts queue is behind real time');
        } catch (err) {
          // Best effort: the window's final words come all the same.
          wlog.info({ err: err instanceof Error ? err.message : String(err) }, 'draft not made');
        }
      },
    },
    concurrency: 1,
    crontab: null,
  };
}

async function startRunners(
  specs: RunnerSpec[],
  runners: Runner[],
  transportPool: TransportPool,
  registry: WorkerRegistry,
  workerId: string,
  wlog: Logger,
): Promise<void> {
  const graphileLogger = bridgeLogger(wlog);
  for (const spec of specs) {
    const events: WorkerEvents = new EventEmitter();
    events.on('pool:create', ({ workerPool }: { workerPool: { id: string } }) => {
      registry.addPool(workerId, workerPool.id).catch((err: unknown) => {
        wlog.error({ err: String(err) }, 'could not record transport pool id');
      });
    });
    runners.push(
      await run({
        pgPool: transportPool,
        taskList: spec.taskList,
        concurrency: spec.concurrency,
        noHandleSignals: true,
        pollInterval: 1000,
        logger: graphileLogger,
        events,
        // An empty crontab would make graphile-worker read ./crontab; say "no cron" explicitly.
        ...(spec.crontab === null ? { parsedCronItems: [] } : { crontab: spec.crontab }),
      }),
    );
  }
}

/** Each step on its own: one failing step is logged and the others still run. */
async function runSteps(steps: Array<[string, () => Promise<unknown>]>, wlog: Logger): Promise<void> {
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (err) {
      wlog.warn({ sweep: name, err: err instanceof Error ? err.message : String(err) }, 'sweep step failed');
    }
  }
}

/** `fn` at most once per `ms` in this process; 0 when it is not due. */
function throttled(ms: number, fn: () => Promise<number>): () => Promise<number> {
  let at = 0;
  return async () => {
    if (Date.now() - at < ms) return 0;
    at = Date.now();
    return fn();
  };
}

/**
 * One run of `fn` at a time in a process: a caller that finds one running waits for it rather
 * than starting a second. `running()` is the run in progress, if any.
 */
function oneAtATime(fn: () => Promise<void>): {
  run: () => Promise<void>;
  running: () => Promise<void> | null;
} {
  let current: Promise<void> | null = null;
  return {
    run: () => {
      current ??= fn().finally(() => {
        current = null;
      });
      return current;
    },
    running: () => current,
  };
}
