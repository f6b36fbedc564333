/**
 * `npm run sim -- --seed S [--minutes M] [--faults kill,stop,pg-terminate,pg-restart,provider,queue-loss]`
 * (docs/simulation.md): the whole system — several api and worker processes on a throwaway Postgres
 * cluster, the providers at the network boundary — driven by simulated clients and faults drawn
 * from one seed, then healed, then checked by the oracle (sim/oracle.ts). Exits 1 on a violation,
 * printing the seed, the fault schedule and what broke.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { spawnVerbatim, type WorkerProcess } from '../test/support/harness.ts';
import { markedChunk } from '../test/support/chunk-recognizer.ts';
import { checkHistory, INVARIANTS, type Invariant } from './oracle.ts';
import { observe } from './observe.ts';
import { startChat, startRecognizer, type ProviderReply } from './providers.ts';
import { Rng } from './rng.ts';

type FaultKind = 'kill' | 'stop' | 'pg-terminate' | 'pg-restart' | 'provider' | 'queue-loss';
const ALL_FAULTS: FaultKind[] = ['kill', 'stop', 'pg-terminate', 'pg-restart', 'provider', 'queue-loss'];

interface Options {
  seed: number;
  minutes: number;
  faults: Set<FaultKind>;
  apis: number;
  workers: number;
  meetings: number;
  port: number;
  /** Keep the cluster running and the data dir after a failed run, to look at them. */
  keep: boolean;
  /** CI: the run must also have injected its minimum of faults (1,000; 50 kills or stops; 3 restarts). */
  ci: boolean;
}

function parseArgs(argv: string[]): Options {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const minutes = Number(get('minutes') ?? '1');
  const faults = (get('faults') ?? ALL_FAULTS.join(',')).split(',').filter(Boolean) as FaultKind[];
  for (const f of faults) if (!ALL_FAULTS.includes(f)) throw new Error(`unknown fault kind ${f}`);
  return {
    seed: Number(get('seed') ?? Math.floor(Math.random() * 1e9)),
    minutes,
    faults: new Set(faults),
    apis: Number(get('apis') ?? '2'),
    workers: Number(get('workers') ?? '3'),
    meetings: Number(get('meetings') ?? String(Math.max(12, Math.round(minutes * 24)))),
    port: Number(get('port') ?? '55433'),
    keep: argv.includes('--keep'),
    ci: argv.includes('--ci'),
  };
}

const say = (line: string) => process.stdout.write(`${line}\n`);

/** A process of the system under test, restarted whenever it exits. */
class Member {
  proc!: WorkerProcess;
  killedBySim = false;
  stoppedUntil = 0;
  starts = 0;
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
    p.proc.once('exit', (code, signal) => {
      if (this.proc !== p || this.retired) return;
      if (!this.killedBySim) this.onUnexpected(this, code, signal);
      setTimeout(() => {
        if (!this.retired) this.start();
      }, 300).unref();
    });
  }

  retired = false;
  alive(): boolean {
    return this.proc.proc.exitCode === null && this.proc.proc.signalCode === null;
  }
}

export async function simulate(opts: Options): Promise<{ failed: boolean }> {
  let keepForLooking = false;
  const rng = new Rng(opts.seed);
  const schedule: string[] = [];
  const counts = new Map<string, number>();
  const count = (kind: string, n = 1) => counts.set(kind, (counts.get(kind) ?? 0) + n);
  const t0 = Date.now();
  const note = (what: string) => {
    schedule.push(`${((Date.now() - t0) / 1000).toFixed(2)}s ${what}`);
  };

  say(
    `verbatim simulation: seed ${opts.seed}, ${opts.minutes} min of faults (${[...opts.faults].join(', ')}), ` +
      `${opts.apis} api + ${opts.workers} worker processes, ${opts.meetings} meetings`,
  );
  const cluster: Cluster = startCluster(opts.port);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-sim-'));
  let faultsOn = true;
  const providerRng = rng.fork();
  const decide = (): ProviderReply => {
    if (!faultsOn || !opts.faults.has('provider') || !providerRng.chance(0.25)) return 'ok';
    return providerRng.pick<ProviderReply>(['503', '503', '429', 'reset', 'hang', 'quota']);
  };
  const recognizer = await startRecognizer(decide);
  const chat = await startChat(decide);
  const members: Member[] = [];
  let app: App | null = null;
  const unexpected: Array<{ name: string; code: number | null; signal: string | null; tail: string }> = [];
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query('create database sim');
    await admin.end();
    const dbUrl = cluster.url.replace(/\/postgres$/, '/sim');
    const env: Record<string, string> = {
      DATABASE_URL: dbUrl,
      VERBATIM_DATA_DIR: dataDir,
      VERBATIM_LOG_LEVEL: 'warn',
      VERBATIM_EGRESS_ALLOW: '127.0.0.0/8',
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: recognizer.url,
      VERBATIM_ASR_TIMEOUT_SECONDS: '3',
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_TIMEOUT_SECONDS: '3',
      VERBATIM_WINDOW_SECONDS: '8',
      VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
      VERBATIM_CHUNK_SECONDS: '5',
      VERBATIM_GAP_PATIENCE_SECONDS: '1',
      VERBATIM_LEASE_SECONDS: '2',
      VERBATIM_HEARTBEAT_SECONDS: '0.4',
      VERBATIM_SWEEP_SECONDS: '0.5',
      VERBATIM_DEATH_CHECK_SECONDS: '0.25',
      VERBATIM_RESCUE_AFTER_SECONDS: '1',
      VERBATIM_RETRY_STEP_SECONDS: '0.3',
      VERBATIM_CLOSEOUT_GRACE_SECONDS: '0.2',
      VERBATIM_CLOSEOUT_POLL_SECONDS: '0.3',
      VERBATIM_MINUTES_RETRY_SECONDS: '0.3',
      VERBATIM_MAX_RECLAIMS: '50',
      VERBATIM_DB_IDLE_TRANSACTION_SECONDS: '5',
      // A write cut off between staging and commit leaves its object to the cleanup at this deadline.
      VERBATIM_STAGE_DEADLINE_SECONDS: '15',
      VERBATIM_RATE_LIMIT_REQUESTS: '0',
      VERBATIM_RATE_LIMIT_CHUNKS: '0',
    };
    app = await openApp(loadConfig(env), { logger: createLogger('silent') });
    const workspaceId = await app.workspaces.createWorkspace('sim');
    const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'sim');

    const onUnexpected = (m: Member, code: number | null, signal: string | null) => {
      unexpected.push({ name: `${m.name}#${m.starts}`, code, signal, tail: m.proc.output().slice(-2000) });
      note(`${m.name} exited on its own (code ${code}, signal ${signal})`);
    };
    const apiPorts: number[] = [];
    for (let i = 0; i < opts.apis; i++) {
      const port = 18_400 + ((opts.port + i * 7) % 1000);
      apiPorts.push(port);
      members.push(new Member(`api-${i}`, ['api'], { ...env, VERBATIM_PORT: String(port) }, onUnexpected));
    }
    for (let i = 0; i < opts.workers; i++)
      members.push(new Member(`worker-${i}`, ['worker'], env, onUnexpected));
    for (const m of members) m.start();
    await Promise.all(apiPorts.map((p) => waitHealthy(p)));

    const client = new SimClient(apiPorts, apiKey, rng.fork(), () => faultsOn);
    const faultMs = opts.minutes * 60_000;
    const faultsDone = runFaults({
      opts,
      rng: rng.fork(),
      members,
      cluster,
      dbUrl,
      count,
      note,
      until: t0 + faultMs,
    });
    // Clients start across the first 80% of the fault phase.
    const clientRng = rng.fork();
    const scenarios = Array.from({ length: opts.meetings }, (_, i) => {
      const startAt = clientRng.next() * faultMs * 0.8;
      const kind = clientRng.pick(SCENARIOS);
      const seed = clientRng.int(1e9);
      return sleep(startAt).then(() => client.run(kind, i, new Rng(seed)));
    });
    await faultsDone;
    faultsOn = false;
    note('heal: faults stop, every process runs');
    for (const m of members) {
      if (m.alive()) process.kill(m.proc.pid, 'SIGCONT');
      m.stoppedUntil = 0;
    }
    const healAt = Date.now();
    await Promise.all(scenarios);
    const quiet = await quiesce(dbUrl, 180_000);
    const healS = (Date.now() - healAt) / 1000;
    say(`heal → quiescence: ${healS.toFixed(1)} s${quiet ? '' : ' (NOT reached within 180 s)'}`);

    count(
      'provider',
      [...recognizer.faults().values(), ...chat.faults().values()].reduce((a, b) => a + b, 0),
    );
    const history = await observe({
      dbUrl,
      dataDir,
      apiPorts,
      apiKey,
      meetings: client.meetings,
      unexpected,
    });
    const violations = checkHistory(history);
    if (!quiet)
      violations.push({ invariant: 'V3', subject: 'quiescence', detail: 'not reached within 180 s' });

    // The table.
    say('\nfaults injected');
    let total = 0;
    for (const [kind, n] of [...counts].sort()) {
      say(`  ${kind.padEnd(24)} ${String(n).padStart(6)}`);
      total += n;
    }
    say(`  ${'total'.padEnd(24)} ${String(total).padStart(6)}`);
    const outcomes = new Map<string, number>();
    for (const m of history.meetings) {
      const key = m.deleted ? 'deleted' : `${m.kind} ${m.status}${m.expectFailure ? ' (bad file)' : ''}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
    say('meetings by outcome');
    for (const [k, n] of [...outcomes].sort()) say(`  ${k.padEnd(24)} ${String(n).padStart(6)}`);
    say(
      `  ${'orphaned creates'.padEnd(24)} ${String(history.orphans).padStart(6)}  (a create whose answer was lost)`,
    );
    say('invariants');
    for (const inv of Object.keys(INVARIANTS) as Invariant[]) {
      const n = violations.filter((v) => v.invariant === inv).length;
      say(`  ${inv} ${String(n).padStart(4)} violations  ${INVARIANTS[inv]}`);
    }
    say(`heal → quiescence ${healS.toFixed(1)} s`);
    let short = false;
    if (opts.ci) {
      const kills = (counts.get('process kill') ?? 0) + (counts.get('process stop') ?? 0);
      const restarts = counts.get('postgres restart') ?? 0;
      const enough = total >= 1000 && kills >= 50 && restarts >= 3;
      say(
        `CI minimum: ${total} faults (≥ 1000), ${kills} kills or stops (≥ 50), ${restarts} Postgres restarts (≥ 3)  ` +
          (enough ? 'PASS' : 'MISS'),
      );
      if (!enough) short = true;
    }
    if (violations.length > 0) {
      keepForLooking = opts.keep;
      if (keepForLooking) say(`kept: ${dbUrl} and ${dataDir}`);
      say(
        `\nFAILED, seed ${opts.seed} (replay: npm run sim -- --seed ${opts.seed} --minutes ${opts.minutes})`,
      );
      for (const v of violations.slice(0, 40)) say(`  ${v.invariant} ${v.subject}: ${v.detail}`);
      say('fault schedule:');
      for (const line of schedule) say(`  ${line}`);
    }
    return { failed: violations.length > 0 || short };
  } finally {
    for (const m of members) {
      m.retired = true;
      if (m.alive()) {
        process.kill(m.proc.pid, 'SIGCONT');
        m.proc.proc.kill('SIGKILL');
      }
    }
    await app?.close().catch(() => undefined);
    await recognizer.close();
    await chat.close();
    if (!keepForLooking) {
      cluster.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

async function waitHealthy(port: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await sleep(100);
  }
  throw new Error(`api on port ${port} did not come up`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------------------------
// Faults

async function runFaults(ctx: {
  opts: Options;
  rng: Rng;
  members: Member[];
  cluster: Cluster;
  dbUrl: string;
  count: (kind: string, n?: number) => void;
  note: (what: string) => void;
  until: number;
}): Promise<void> {
  const { opts, rng, members, cluster, count, note } = ctx;
  // The injector must never wait on the system's locks (a stopped process may hold them).
  const probe = new pg.Pool({
    connectionString: ctx.dbUrl,
    max: 1,
    options: '-c lock_timeout=200 -c statement_timeout=2000',
  });
  probe.on('error', () => undefined);
  // Postgres restarts at fixed fractions of the run, at least three.
  const restarts = opts.faults.has('pg-restart')
    ? [0.2, 0.5, 0.8].map((f) => Date.now() + (ctx.until - Date.now()) * f)
    : [];
  // Faults arrive at rates per second (a Poisson process over each tick's real length), so a slow
  // tick (a restart blocks for seconds) does not thin them out.
  const RATE = { kill: 0.2, stop: 0.2, terminate: 5, queueLoss: 1 };
  let last = Date.now();
  while (Date.now() < ctx.until) {
    await sleep(25 + rng.int(50));
    const dt = (Date.now() - last) / 1000;
    last = Date.now();
    const due = (perSecond: number) => rng.chance(1 - Math.exp(-perSecond * dt));
    const now = Date.now();
    for (const m of members)
      if (m.stoppedUntil && m.stoppedUntil <= now) {
        m.stoppedUntil = 0;
        if (m.alive()) process.kill(m.proc.pid, 'SIGCONT');
      }
    if (restarts.length > 0 && restarts[0]! <= now) {
      restarts.shift();
      note('postgres restart');
      count('postgres restart');
      try {
        cluster.restart();
      } catch (err) {
        note(`postgres restart failed: ${String(err)}`);
      }
      continue;
    }
    if (opts.faults.has('kill') && due(RATE.kill)) {
      const m = rng.pick(members.filter((x) => x.alive()));
      if (m) {
        m.killedBySim = true;
        process.kill(m.proc.pid, 'SIGCONT');
        m.proc.proc.kill('SIGKILL');
        note(`SIGKILL ${m.name}`);
        count('process kill');
      }
    }
    if (opts.faults.has('stop') && due(RATE.stop)) {
      const m = rng.pick(members.filter((x) => x.alive() && !x.stoppedUntil));
      if (m) {
        m.stoppedUntil = now + 300 + rng.int(3500);
        process.kill(m.proc.pid, 'SIGSTOP');
        note(`SIGSTOP ${m.name} for ${m.stoppedUntil - now} ms`);
        count('process stop');
      }
    }
    try {
      if (opts.faults.has('pg-terminate') && due(RATE.terminate)) {
        const r = await probe.query<{ n: number }>(
          `select count(pg_terminate_backend(pid))::int as n from (
             select pid from pg_stat_activity
              where datname = 'sim' and pid <> pg_backend_pid() and backend_type = 'client backend'
              order by random() limit ${1 + rng.int(2)}) x`,
        );
        const n = r.rows[0]?.n ?? 0;
        if (n > 0) {
          count('backend terminated', n);
          note(`pg_terminate_backend ×${n}`);
        }
      }
      if (opts.faults.has('queue-loss') && due(RATE.queueLoss)) {
        // A lost queue message: a waiting transport row vanishes; the rescue sweep must re-drive it.
        const r = await probe.query(
          `delete from graphile_worker._private_jobs where id in (
             select id from graphile_worker._private_jobs where locked_at is null
              order by random() limit 1 for update skip locked)`,
        );
        if (r.rowCount) {
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

// ---------------------------------------------------------------------------------------------
// Clients

const SCENARIOS = [
  'in-order',
  'reversed',
  'shuffled',
  'parallel',
  'duplicated',
  'drop-resend',
  'after-end',
  'no-count',
  'upload',
  'bad-upload',
  'deleted',
] as const;
type Scenario = (typeof SCENARIOS)[number];

export interface ClientMeeting {
  id: string;
  kind: 'live' | 'upload';
  scenario: Scenario;
  deleted: boolean;
  expectFailure: boolean;
  accepted: Map<number, number>;
}

interface Answer {
  status: number;
  json: { [k: string]: unknown } | null;
}

class SimClient {
  readonly meetings: ClientMeeting[] = [];
  constructor(
    private readonly ports: number[],
    private readonly apiKey: string,
    private readonly rng: Rng,
    private readonly faultsOn: () => boolean,
  ) {}

  /**
   * One request, as a patient client sends it: on no answer, a 5xx, 408 or 429 it waits and tries
   * again (another api process, maybe) until an answer that settles it. Null when it never got one.
   */
  async send(
    method: string,
    url: string,
    body?: Buffer | object,
    contentType?: string,
  ): Promise<Answer | null> {
    const deadline = Date.now() + 240_000;
    while (Date.now() < deadline) {
      const port = this.rng.pick(this.ports);
      try {
        const res = await fetch(`http://127.0.0.1:${port}${url}`, {
          method,
          headers: {
            authorization: `Bearer ${this.apiKey}`,
            ...(body === undefined ? {} : { 'content-type': contentType ?? 'application/json' }),
          },
          body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
          signal: AbortSignal.timeout(4000),
        });
        const text = await res.text();
        if (res.status >= 500 || res.status === 408 || res.status === 429) {
          await sleep(100 + this.rng.int(400));
          continue;
        }
        let json: Answer['json'] = null;
        try {
          json = JSON.parse(text) as Answer['json'];
        } catch {
          json = null;
        }
        return { status: res.status, json };
      } catch {
        await sleep(100 + this.rng.int(400));
      }
    }
    return null;
  }

  async run(scenario: Scenario, index: number, rng: Rng): Promise<void> {
    const kind = scenario === 'upload' || scenario === 'bad-upload' ? 'upload' : 'live';
    const created = await this.send('POST', '/v1/meetings', {
      source: kind,
      title: `sim ${index} ${scenario}`,
    });
    if (!created || created.status !== 201 || !created.json) return;
    const m: ClientMeeting = {
      id: String(created.json.id),
      kind,
      scenario,
      deleted: false,
      expectFailure: scenario === 'bad-upload',
      accepted: new Map(),
    };
    this.meetings.push(m);
    const base = `/v1/meetings/${m.id}`;

    if (kind === 'upload') {
      // An upload carries one mark (its index, < 511) over its whole length.
      const mark = 400 + (index % 100);
      const samples = 16_000 * (8 + rng.int(40));
      const body =
        scenario === 'bad-upload'
          ? Buffer.from(`#EXTM3U\n#EXT-X-VERSION:3\nfile:///etc/passwd\n`)
          : markedChunk(mark, samples);
      const res = await this.send('PUT', `${base}/recording`, body, 'audio/wav');
      if (res && res.status === 202) {
        if (scenario !== 'bad-upload') m.accepted.set(mark, samples);
      } else {
        // Refused at the door (or never answered): the client deletes what it made.
        await this.remove(m);
      }
      return;
    }

    const n = 3 + rng.int(10);
    const lengths = Array.from({ length: n }, () => 16_000 * (2 + rng.int(5)) + rng.int(4000));
    const put = async (seq: number) => {
      const res = await this.send(
        'PUT',
        `${base}/chunks/${seq}`,
        markedChunk(seq, lengths[seq]),
        'audio/wav',
      );
      if (res && (res.status === 200 || res.status === 201)) m.accepted.set(seq, lengths[seq]!);
    };
    const end = (withCount: boolean) => this.send('POST', `${base}/end`, withCount ? { chunks: n } : {});
    const seqs = [...Array(n).keys()];
    const pace = () => sleep(rng.int(300));
    switch (scenario) {
      case 'in-order':
      case 'no-count':
      case 'deleted':
        for (const s of seqs) {
          await put(s);
          await pace();
        }
        if (scenario === 'deleted' && rng.chance(0.5)) {
          await this.remove(m);
          return;
        }
        await end(scenario !== 'no-count');
        if (scenario === 'deleted') await this.remove(m);
        return;
      case 'reversed':
        for (const s of [...seqs].reverse()) await put(s);
        await end(true);
        return;
      case 'shuffled':
        for (const s of rng.shuffle(seqs)) {
          await put(s);
          await pace();
        }
        await end(true);
        return;
      case 'parallel':
        await Promise.all(seqs.map((s) => put(s)));
        await end(true);
        return;
      case 'duplicated':
        for (const s of seqs) {
          await put(s);
          if (rng.chance(0.4)) await put(s);
        }
        await Promise.all([end(true), put(n - 1)]);
        return;
      case 'drop-resend': {
        const dropped = seqs.filter(() => rng.chance(0.3));
        for (const s of seqs) if (!dropped.includes(s)) await put(s);
        await end(true);
        await sleep(rng.int(3000));
        for (const s of dropped) await put(s);
        return;
      }
      case 'after-end':
        await end(true);
        for (const s of rng.shuffle(seqs)) await put(s);
        return;
      case 'upload':
      case 'bad-upload':
        return; // handled above
    }
  }

  private async remove(m: ClientMeeting): Promise<void> {
    const res = await this.send('DELETE', `/v1/meetings/${m.id}`);
    if (res && (res.status === 200 || res.status === 202 || res.status === 204 || res.status === 404))
      m.deleted = true;
  }
}

// ---------------------------------------------------------------------------------------------
// Quiescence

/** Nothing left to do: every meeting ended, no job waiting or running, no outbox or cleanup left. */
async function quiesce(dbUrl: string, boundMs: number): Promise<boolean> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline) {
    const c = new pg.Client({ connectionString: dbUrl, options: '-c statement_timeout=5000' });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const r = await c.query<{ busy: number }>(`select
          (select count(*) from meetings where status not in ('complete', 'failed', 'created'))
        + (select count(*) from jobs where status in ('pending', 'running'))
        + (select count(*) from outbox where delivered_at is null)
        + (select count(*) from object_cleanups)
        + (select count(*) from graphile_worker._private_jobs where locked_at is not null) as busy`);
      if (Number(r.rows[0]?.busy) === 0) return true;
    } catch {
      // a worker restart or a slow server: ask again
    } finally {
      await c.end().catch(() => undefined);
    }
    await sleep(500);
  }
  return false;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const opts = parseArgs(process.argv.slice(2));
  simulate(opts)
    .then((r) => process.exit(r.failed ? 1 : 0))
    .catch((err: unknown) => {
      process.stderr.write(
        `simulation crashed (seed ${opts.seed}): ${err instanceof Error ? err.stack : String(err)}\n`,
      );
      process.exit(2);
    });
}
