/**
 * (c) Kill-to-rerun latency: a real worker process is SIGKILLed right after claiming a window's job,
 * and another, healthy worker process takes the job over once the lease runs out — through its lease
 * sweep, or by claiming the delivery that its dead-worker reap released. Measured in database time,
 * from the moment the killed process exited to the start of attempt 2.
 *
 * Two workers run with the same fault list, one fault per sample matched on that sample's meeting
 * (`times: 1`, counted across processes): whichever worker claims the job dies, and the other is the
 * healthy one that recovers it. The dead worker is restarted before the next sample, and each job is
 * created at a random moment so it lands at a random point of the survivor's sweep cycle.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { QueueName } from '../src/domain/status.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { spawnVerbatim, type WorkerProcess } from '../test/support/harness.ts';
import { dropWhenIdle, pollUntil, seedMeeting, sleep, withTimeout } from './fixtures.ts';

export interface RecoverySetting {
  label: string;
  /** Settings passed to the workers; empty keeps the defaults. */
  env: Record<string, string>;
  leaseS: number;
  heartbeatS: number;
  sweepS: number;
  /** J18's death watch on (the default) or off (the lease-only baseline). */
  deathWatch: boolean;
}

export interface RecoverySample {
  /** Killed process's exit → attempt 2 started. */
  latencyS: number;
  /** Attempt 1's lease expiry → attempt 2 started (the sweep's lag). */
  afterExpiryS: number;
  /**
   * `sweep`: a healthy worker's lease sweep reclaimed it. `claim`: the sweep first declared the
   * killed worker dead and released its transport row, and a healthy worker's claim of that
   * delivery found the lease expired and took the job over itself.
   */
  reclaimedBy: 'sweep' | 'claim';
}

const CHECKPOINT = 'transcribe-window.after-claim';
const QUEUE_COUNT = Object.keys(QueueName).length;

interface Exit {
  index: number;
  /** clock_timestamp() in the database, read as soon as the exit event fired (epoch seconds). */
  dbExitS: number;
  /** How long that read took: the uncertainty it adds. */
  probeMs: number;
}

/** Resolves with the first of `workers` to exit, stamping the moment in database time. */
function firstExit(workers: WorkerProcess[], probe: pg.Client): { exited: Promise<Exit>; cancel(): void } {
  const detach: Array<() => void> = [];
  const exited = new Promise<Exit>((resolve, reject) => {
    workers.forEach((w, index) => {
      const onExit = () => {
        const asked = performance.now();
        probe
          .query<{ t: number }>('select extract(epoch from clock_timestamp())::float8 as t')
          .then((r) => resolve({ index, dbExitS: Number(r.rows[0]?.t), probeMs: performance.now() - asked }))
          .catch(reject);
      };
      w.proc.once('exit', onExit);
      detach.push(() => w.proc.off('exit', onExit));
    });
  });
  return { exited, cancel: () => detach.forEach((d) => d()) };
}

/** Ready once the worker registered and each of its queue runners created its transport pool. */
async function waitReady(probe: pg.Client, worker: WorkerProcess): Promise<void> {
  await pollUntil(
    `worker ${worker.pid} to start`,
    async () => {
      if (worker.proc.exitCode !== null || worker.proc.signalCode !== null) {
        throw new Error(`worker ${worker.pid} exited while starting:\n${worker.output()}`);
      }
      const r = await probe.query<{ n: number }>(
        'select cardinality(pool_ids) as n from workers where pid = $1 and stopped_at is null',
        [worker.pid],
      );
      return (r.rows[0]?.n ?? 0) >= QUEUE_COUNT ? true : null;
    },
    60_000,
    100,
  );
  // The sweep timer and the registry heartbeat are set right after the runners.
  await sleep(250);
}

export async function killToRerun(setting: RecoverySetting, samples: number): Promise<RecoverySample[]> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-'));
  const meetingIds = Array.from({ length: samples }, () => randomUUID());
  const faults = meetingIds.map((meetingId) => ({
    at: CHECKPOINT,
    action: 'kill',
    times: 1,
    match: { meetingId },
  }));
  const env: Record<string, string> = {
    ...setting.env,
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_FAULTS: JSON.stringify(faults),
    VERBATIM_FAULT_STATE_DIR: path.join(dataDir, 'faults'),
  };
  const probe = new pg.Client({ connectionString: db.url });
  const workers: WorkerProcess[] = [];
  const app = await openApp(
    loadConfig({
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dataDir,
    }),
    {
      logger: createLogger('warn', 'verbatim-bench'),
    },
  );
  try {
    await probe.connect();
    const workspaceId = await app.workspaces.createWorkspace('bench');
    workers.push(spawnVerbatim(['worker'], env), spawnVerbatim(['worker'], env));
    await Promise.all(workers.map((w) => waitReady(probe, w)));

    const results: RecoverySample[] = [];
    for (const [sample, meetingId] of meetingIds.entries()) {
      // A worker's sweep timer starts with it, so creating the job a fixed time after a restart
      // would always land it at the same point of the survivor's sweep cycle. Real crashes don't.
      await sleep(Math.random() * Math.max(setting.sweepS, setting.heartbeatS) * 1000);
      const watch = firstExit(workers, probe);
      let exit: Exit;
      try {
        await seedMeeting(app, { workspaceId, windows: 1, meetingId });
        exit = await withTimeout(watch.exited, 60_000, 'a worker to claim the job and be killed');
      } finally {
        watch.cancel();
      }
      const killed = workers[exit.index]!;
      if (killed.proc.signalCode !== 'SIGKILL' || !killed.output().includes(`checkpoint ${CHECKPOINT}`)) {
        throw new Error(`worker ${killed.pid} exited without the injected fault:\n${killed.output()}`);
      }

      const budgetMs = (setting.leaseS + setting.sweepS) * 1000 + 60_000;
      const rerun = await pollUntil(
        `attempt 2 of meeting ${meetingId}'s window`,
        async () => {
          const r = await probe.query<{
            started: number;
            expired: number;
            first_status: string;
            reclaimer: string | null;
          }>(
            `select extract(epoch from a2.started_at)::float8 as started,
                    extract(epoch from a1.lease_expires_at)::float8 as expired,
                    a1.status as first_status,
                    (select e.actor from audit_events e
                      where e.subject_id = j.id::text and e.reason like 'lease expired;%'
                      order by e.id limit 1) as reclaimer
               from jobs j
               join job_attempts a1 on a1.job_id = j.id and a1.attempt_no = 1
               join job_attempts a2 on a2.job_id = j.id and a2.attempt_no = 2
              where j.meeting_id = $1 and j.kind = 'transcribe-window'`,
            [meetingId],
          );
          return r.rows[0] ?? null;
        },
        budgetMs,
        20,
      );
      if (rerun.first_status !== 'lease_expired') {
        throw new Error(`attempt 1 ended as ${rerun.first_status}, expected lease_expired`);
      }
      results.push({
        latencyS: Number(rerun.started) - exit.dbExitS,
        afterExpiryS: Number(rerun.started) - Number(rerun.expired),
        reclaimedBy: rerun.reclaimer?.startsWith('sweep:') ? 'sweep' : 'claim',
      });

      // Let attempt 2 finish (a short PocketSphinx run) and restart the dead worker, so the next
      // sample again has one worker to kill and one to recover.
      await pollUntil(
        `attempt 2 of meeting ${meetingId}'s window to end`,
        async () => {
          const r = await probe.query(`select 1 from windows where meeting_id = $1 and status <> 'pending'`, [
            meetingId,
          ]);
          return r.rowCount ? true : null;
        },
        60_000,
        50,
      ).catch(() => undefined);
      if (sample === samples - 1) break;
      const restarted = spawnVerbatim(['worker'], env);
      workers[exit.index] = restarted;
      await waitReady(probe, restarted);
    }
    return results;
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await app.close();
    await dropWhenIdle(probe, db);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
