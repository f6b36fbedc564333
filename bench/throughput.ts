/**
 * (a) raw graphile-worker no-op throughput and (b) Verbatim windows through the full
 * claim → heartbeat → commit → audit path, at the same concurrency, each on a fresh database.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeWorkerUtils, run, type AddJobsJobSpec } from 'graphile-worker';
import pg from 'pg';
import { openApp, startAppWorker } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { silentGraphileLogger } from '../src/db/migrate.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { countOf, dropWhenIdle, InstantTranscriber, seedMeeting, timeDrain } from './fixtures.ts';

export interface Throughput {
  /** Items per second from the first finished item to the last. */
  rate: number;
  /** Start of the worker to the last item, start-up included. */
  wallMs: number;
  startupMs: number;
  notes: string[];
}

const DRAIN_TIMEOUT_MS = 180_000;

/** (a) N no-op jobs added up front, then one runner at `concurrency` until the queue is empty. */
export async function graphileNoop(n: number, concurrency: number): Promise<Throughput> {
  const db = await createTestDatabase();
  const probe = new pg.Client({ connectionString: db.url });
  try {
    await probe.connect();
    const utils = await makeWorkerUtils({ connectionString: db.url, logger: silentGraphileLogger });
    try {
      for (let from = 0; from < n; from += 500) {
        const specs: AddJobsJobSpec[] = [];
        for (let i = from; i < Math.min(n, from + 500); i++)
          specs.push({ identifier: 'noop', payload: { i } });
        await utils.addJobs(specs);
      }
    } finally {
      await utils.release();
    }
    await probe.query('analyze');
    const queued = await countOf(probe, 'select count(*)::int as n from graphile_worker.jobs');
    if (queued !== n) throw new Error(`expected ${n} graphile jobs, found ${queued}`);

    const start = performance.now();
    const runner = await run({
      connectionString: db.url,
      concurrency,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: silentGraphileLogger,
      taskList: { noop: async () => {} },
    });
    try {
      const drained = await timeDrain(
        n,
        () => countOf(probe, 'select count(*)::int as n from graphile_worker.jobs'),
        DRAIN_TIMEOUT_MS,
        start,
      );
      return { ...drained, notes: [] };
    } finally {
      await runner.stop();
    }
  } finally {
    await dropWhenIdle(probe, db);
  }
}

/**
 * (b) N pending windows with their jobs — in one meeting, or in meetings of `perMeeting` windows —
 * then the app's worker in this process with an instant recogniser, until every window is
 * transcribed.
 */
export async function verbatimWindows(
  n: number,
  concurrency: number,
  perMeeting: number = n,
): Promise<Throughput> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-'));
  const probe = new pg.Client({ connectionString: db.url });
  try {
    await probe.connect();
    const config = loadConfig({
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dataDir,
      VERBATIM_LOG_LEVEL: 'warn',
      VERBATIM_TRANSCRIPTION_CONCURRENCY: String(concurrency),
    });
    const app = await openApp(config, {
      transcriber: new InstantTranscriber(),
      logger: createLogger(config.logLevel, 'verbatim-bench'),
    });
    try {
      const workspaceId = await app.workspaces.createWorkspace('bench');
      const seedStart = performance.now();
      for (let seeded = 0; seeded < n; seeded += perMeeting) {
        await seedMeeting(app, { workspaceId, windows: Math.min(perMeeting, n - seeded) });
      }
      const seedMs = performance.now() - seedStart;
      await probe.query('analyze');
      const pendingWindows = () =>
        countOf(probe, `select count(*)::int as n from windows where status = 'pending'`);
      if ((await pendingWindows()) !== n) throw new Error(`expected ${n} pending windows`);

      const start = performance.now();
      const worker = await startAppWorker(app);
      let drained: Awaited<ReturnType<typeof timeDrain>>;
      try {
        drained = await timeDrain(n, pendingWindows, DRAIN_TIMEOUT_MS, start);
      } finally {
        await worker.stop(5_000);
      }

      const check = await probe.query<{
        transcribed: number;
        attempts: number;
        audits: number;
        inside: number;
      }>(
        `select (select percentile_cont(0.5) within group (order by extract(epoch from a.ended_at - a.started_at) * 1000)
                  from job_attempts a)::float as inside,
                (select count(*)::int from windows where status = 'transcribed') as transcribed,
                (select count(*)::int from job_attempts a join jobs j on j.id = a.job_id
                  where j.kind = 'transcribe-window' and a.status = 'completed') as attempts,
                (select count(*)::int from audit_events) as audits`,
      );
      const { transcribed, attempts, audits, inside } = check.rows[0]!;
      if (transcribed !== n) throw new Error(`only ${transcribed} of ${n} windows were transcribed`);
      return {
        ...drained,
        notes: [
          `seeded ${n} windows in ${Math.ceil(n / perMeeting)} meeting(s) in ${(seedMs / 1000).toFixed(1)} s`,
          `${attempts} completed transcribe attempts, ${(audits / n).toFixed(1)} audit rows per window`,
          `median claim-to-commit time inside an attempt: ${inside.toFixed(2)} ms`,
        ],
      };
    } finally {
      await app.close();
    }
  } finally {
    await dropWhenIdle(probe, db);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
