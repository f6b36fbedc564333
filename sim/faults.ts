/**
 * The simulation's processes and the faults injected into them (docs/simulation.md, "Faults"):
 * real SIGKILL and SIGSTOP of the service's processes, terminated database backends, Postgres
 * restarts and lost queue messages, drawn from the seed. The fault phase has a harsh stretch with
 * the harsh rates (a kill every 1.5–3 s, stops past the lease), so kills
 * land inside recognitions and a window can be killed several times in a row.
 */
import pg from 'pg';
import type { Cluster } from '../test/support/cluster.ts';
import { spawnVerbatim, type WorkerProcess } from '../test/support/harness.ts';
import type { Rng } from './rng.ts';
import { CHECKPOINT_CATALOG, type CheckpointName } from '../src/checkpoints.ts';

export type FaultKind = 'kill' | 'stop' | 'pg-terminate' | 'pg-restart' | 'provider' | 'queue-loss';
export const ALL_FAULTS: FaultKind[] = [
  'kill',
  'stop',
  'pg-terminate',
  'pg-restart',
  'provider',
  'queue-loss',
];

/**
 * The named checkpoints where a process is also killed (those the catalog in src/checkpoints.ts
 * marks `simulated`): each drawn from the seed is armed for its first one or two arrivals (counted
 * across processes), and disarmed at the heal.
 */
export const CHECKPOINTS = (Object.keys(CHECKPOINT_CATALOG) as CheckpointName[])
  .filter((name) => CHECKPOINT_CATALOG[name as keyof typeof CHECKPOINT_CATALOG].simulated)
  .sort();

/**
 * The rates outside the harsh stretch, per second (a Poisson process over each tick's real length).
 * Lower than the harsh stretch's, so the service gets work in flight for it to land in: on 2 cores a
 * killed process takes seconds to come back, and kills at the harsh rate throughout left the
 * service making next to no provider calls during the faults.
 */
const CALM = { kill: 0.15, stop: 0.2, terminate: 12, queueLoss: 1 };
/**
 * The harsh stretch: a SIGKILL of a random process every 1.5–3 s, and
 * SIGSTOPs longer than the lease (so the stopped worker's job is reclaimed while it sleeps, and its
 * late writes must be fenced), at 0.4/s.
 */
const HARSH = { killEveryMs: [1_500, 3_000] as const, stopPerSecond: 0.4 };
/** Where the harsh stretch lies in the fault phase (fractions of it). */
export const HARSH_PHASE = [0.5, 0.9] as const;

/** A process of the system under test, restarted whenever it exits. */
export class Member {
  proc!: WorkerProcess;
  killedBySim = false;
  stoppedUntil = 0;
  starts = 0;
  retired = false;
  /** The output of its earlier starts (the last 200 kB), for `--logs`. */
  earlier = '';
  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: Record<string, string>,
    private readonly onUnexpected: (m: Member, code: number | null, signal: string | null) => void,
  ) {}

  start(): void {
    this.starts++;
    this.killedBySim = false;
    const p = spawnVerbatim(this.args, this.env);
    this.proc = p;
    // 'close', not 'exit': by then everything the process wrote has been read, so its last
    // words (a checkpoint saying it kills itself) are in its output.
    p.proc.once('close', (code, signal) => {
      this.earlier =
        `${this.earlier}\n--- start ${this.starts} ended (code ${code}, signal ${signal})\n${p.output()}`.slice(
          -200_000,
        );
      if (this.proc !== p || this.retired) return;
      if (!this.killedBySim) this.onUnexpected(this, code, signal);
      setTimeout(() => {
        if (!this.retired) this.start();
      }, 300).unref();
    });
  }

  alive(): boolean {
    return this.proc.proc.exitCode === null && this.proc.proc.signalCode === null;
  }

  /** The heal: a stopped process runs again and is not stopped any more. */
  resume(): void {
    if (this.alive()) process.kill(this.proc.pid, 'SIGCONT');
    this.stoppedUntil = 0;
  }
}

export async function runFaults(ctx: {
  faults: Set<FaultKind>;
  rng: Rng;
  members: Member[];
  cluster: Cluster;
  dbUrl: string;
  leaseMs: number;
  count: (kind: string, n?: number) => void;
  note: (what: string) => void;
  say: (line: string) => void;
  /** Called with the moment a process is killed or stopped (V6 forgives a retry it made too soon). */
  disrupted: (at: number) => void;
  /** Called with the span of every fault (V13 judges only the waits no fault touched). */
  faulted: (from: number, to: number) => void;
  until: number;
}): Promise<void> {
  const { faults, rng, members, cluster, count, note } = ctx;
  // The injector must never wait on the system's locks (a stopped process may hold them).
  const probe = new pg.Pool({
    connectionString: ctx.dbUrl,
    max: 1,
    options: '-c lock_timeout=200 -c statement_timeout=2000',
  });
  probe.on('error', () => undefined);
  const began = Date.now();
  const span = ctx.until - began;
  // Postgres restarts at fixed fractions of the run, at least three.
  const restarts = faults.has('pg-restart') ? [0.2, 0.5, 0.8].map((f) => began + span * f) : [];
  const harshFrom = began + span * HARSH_PHASE[0];
  const harshTo = began + span * HARSH_PHASE[1];
  let nextHarshKill = harshFrom;
  let harshSaid = false;
  let last = Date.now();
  const kill = (kind: string) => {
    const m = rng.pick(members.filter((x) => x.alive()));
    if (!m) return;
    m.killedBySim = true;
    ctx.disrupted(Date.now());
    ctx.faulted(Date.now(), Date.now());
    process.kill(m.proc.pid, 'SIGCONT');
    m.proc.proc.kill('SIGKILL');
    note(`SIGKILL ${m.name}${kind}`);
    count(`process kill${kind}`);
  };
  const stop = (ms: number, kind: string) => {
    const m = rng.pick(members.filter((x) => x.alive() && !x.stoppedUntil));
    if (!m) return;
    m.stoppedUntil = Date.now() + ms;
    ctx.disrupted(Date.now());
    ctx.faulted(Date.now(), Date.now() + ms);
    process.kill(m.proc.pid, 'SIGSTOP');
    note(`SIGSTOP ${m.name} for ${ms} ms${kind}`);
    count(`process stop${kind}`);
  };
  while (Date.now() < ctx.until) {
    await sleep(25 + rng.int(50));
    const dt = (Date.now() - last) / 1000;
    last = Date.now();
    const due = (perSecond: number) => perSecond > 0 && rng.chance(1 - Math.exp(-perSecond * dt));
    const now = Date.now();
    const harsh = now >= harshFrom && now < harshTo;
    if (harsh && !harshSaid) {
      harshSaid = true;
      note('harsh stretch begins: a kill every 1.5–3 s, stops past the lease');
    }
    for (const m of members)
      if (m.stoppedUntil && m.stoppedUntil <= now) {
        m.stoppedUntil = 0;
        if (m.alive()) process.kill(m.proc.pid, 'SIGCONT');
      }
    if (restarts.length > 0 && restarts[0]! <= now) {
      restarts.shift();
      note('postgres restart');
      count('postgres restart');
      // Not blocking this process: the fake providers, endpoints and clients in it go on.
      const t = Date.now();
      try {
        await cluster.restartAsync();
        ctx.faulted(t, Date.now());
        note(`postgres back after ${Date.now() - t} ms`);
        ctx.say(`  postgres restart: back after ${((Date.now() - t) / 1000).toFixed(1)} s`);
      } catch (err) {
        note(`postgres restart failed: ${String(err)}`);
      }
      continue;
    }
    if (faults.has('kill')) {
      if (harsh && now >= nextHarshKill) {
        kill(' (harsh)');
        nextHarshKill = now + HARSH.killEveryMs[0] + rng.int(HARSH.killEveryMs[1] - HARSH.killEveryMs[0]);
      } else if (!harsh && due(CALM.kill)) kill('');
    }
    if (faults.has('stop')) {
      if (harsh && due(HARSH.stopPerSecond)) stop(ctx.leaseMs + 500 + rng.int(2_500), ' (harsh)');
      else if (!harsh && due(CALM.stop)) stop(300 + rng.int(3500), '');
    }
    try {
      if (faults.has('pg-terminate') && due(CALM.terminate)) {
        const r = await probe.query<{ n: number }>(
          `select count(pg_terminate_backend(pid))::int as n from (
             select pid from pg_stat_activity
              where datname = 'sim' and pid <> pg_backend_pid() and backend_type = 'client backend'
              order by random() limit ${1 + rng.int(4)}) x`,
        );
        const n = r.rows[0]?.n ?? 0;
        if (n > 0) {
          ctx.faulted(now, Date.now());
          count('backend terminated', n);
          note(`pg_terminate_backend ×${n}`);
        }
      }
      if (faults.has('queue-loss') && due(CALM.queueLoss)) {
        // A lost queue message: a waiting transport row vanishes; the rescue sweep must re-drive it.
        const r = await probe.query(
          `delete from graphile_worker._private_jobs where id in (
             select id from graphile_worker._private_jobs where locked_at is null
              order by random() limit 1 for update skip locked)`,
        );
        if (r.rowCount) {
          ctx.faulted(now, Date.now());
          count('queue message lost');
          note('queue message lost');
        }
      }
    } catch {
      // the probe's own connection was cut (a restart): the next tick has a new one
    }
  }
  await probe.end().catch(() => undefined);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
