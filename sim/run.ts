/**
 * `npm run sim -- --seed S | --seeds S1,S2 [--minutes M] [--ci] [--faults kill,stop,pg-terminate,pg-restart,provider,queue-loss]`
 * (docs/simulation.md): the whole system — several api and worker processes on a throwaway Postgres
 * cluster, the providers at the network boundary — driven by simulated clients and faults drawn
 * from one seed, then healed, then checked by the oracle (sim/oracle.ts). Exits 1 on a violation,
 * printing the seed, the fault schedule and what broke.
 */
import { spawn } from 'node:child_process';
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
import { startReceiver, type ReceiverReply } from './receiver.ts';
import { BotWorld } from './bots.ts';
import { Rng } from './rng.ts';

type FaultKind = 'kill' | 'stop' | 'pg-terminate' | 'pg-restart' | 'provider' | 'queue-loss';

/**
 * The named checkpoints (src/checkpoints.ts) where a process is also killed: each drawn from the
 * seed is armed for its first one or two arrivals (counted across processes), and disarmed at the
 * heal. `worker.started` is left out: it is not a step of any piece of work.
 */
const CHECKPOINTS = [
  'close-out-meeting.after-last-stretch',
  'close-out-meeting.transcribe-directly',
  'dispatcher.after-deliver',
  'enqueue',
  'recording.processing',
  'recording.referenced',
  'repair-timeline.before-commit',
  'storage.before-delete',
  'storage.fencing',
  'storage.get',
  'storage.staged',
  'storage.written',
  'transcribe-window.before-commit',
];
const ALL_FAULTS: FaultKind[] = ['kill', 'stop', 'pg-terminate', 'pg-restart', 'provider', 'queue-loss'];

interface Options {
  /** The seeds to run, one after another (`--seed S` or `--seeds S1,S2,…`). */
  seeds: number[];
  seed: number;
  minutes: number;
  faults: Set<FaultKind>;
  apis: number;
  workers: number;
  meetings: number;
  port: number;
  /** Keep the cluster running and the data dir after a failed run, to look at them. */
  keep: boolean;
  /**
   * CI: the runs together must also have injected their minimum of faults (1,000; 50 kills or
   * stops; 3 Postgres restarts).
   */
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
  const seeds = (get('seeds') ?? get('seed') ?? String(Math.floor(Math.random() * 1e9)))
    .split(',')
    .filter(Boolean)
    .map(Number);
  if (seeds.some((n) => !Number.isInteger(n) || n < 0)) throw new Error('seeds must be whole numbers');
  return {
    seeds,
    seed: seeds[0]!,
    minutes,
    faults: new Set(faults),
    apis: Number(get('apis') ?? '2'),
    workers: Number(get('workers') ?? '3'),
    meetings: Number(get('meetings') ?? String(Math.max(12, Math.round(minutes * 24)))),
    port: Number(get('port') ?? '31433'), // below the ephemeral range: no outgoing connection holds it
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
    // 'close', not 'exit': by then everything the process wrote has been read, so its last
    // words (a checkpoint saying it kills itself) are in its output.
    p.proc.once('close', (code, signal) => {
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

export interface RunResult {
  failed: boolean;
  healS: number;
  counts: Map<string, number>;
}

export async function simulate(opts: Options): Promise<RunResult> {
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
  say(machineLoad());
  const cluster: Cluster = startCluster(opts.port);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-sim-'));
  const faultDir = path.join(dataDir, 'checkpoint-faults');
  const checkpointRng = rng.fork();
  const armed = opts.faults.has('kill')
    ? CHECKPOINTS.filter(() => checkpointRng.chance(0.75)).map((at) => ({
        at,
        action: 'kill',
        times: 1 + checkpointRng.int(2),
      }))
    : [];
  /** The heal: every armed checkpoint is marked spent, so no process is killed at one after it. */
  const disarm = () => {
    fs.mkdirSync(faultDir, { recursive: true });
    armed.forEach((f, i) => {
      for (let n = 0; n < f.times; n++)
        try {
          fs.writeFileSync(path.join(faultDir, `fault-${i}-${n}`), 'heal', { flag: 'wx' });
        } catch {
          // fired already
        }
    });
  };
  let faultsOn = true;
  const providerRng = rng.fork();
  const decide = (): ProviderReply => {
    if (!faultsOn || !opts.faults.has('provider') || !providerRng.chance(0.25)) return 'ok';
    return providerRng.pick<ProviderReply>(['503', '503', '429', 'reset', 'hang', 'quota']);
  };
  const recognizer = await startRecognizer(decide);
  const chat = await startChat(decide);
  // The tenant's webhook endpoints fail a quarter of their requests while faults are on.
  const receiverRng = rng.fork();
  const receiver = await startReceiver(
    () =>
      !faultsOn || !receiverRng.chance(0.25)
        ? 'ok'
        : receiverRng.pick<ReceiverReply>(['500', 'reset', 'late']),
    1_500,
  );
  const apiPorts: number[] = [];
  const bots = await BotWorld.start(
    () => apiPorts,
    rng.fork(),
    () => faultsOn,
  );
  const webhookEndpoints = [
    { name: 'all', events: [] as string[] },
    { name: 'ends', events: ['meeting.completed', 'meeting.failed'] },
  ];
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
      // Poison protection (J7, L7) is for a job that kills its worker; here workers die at a rate no
      // deployment sees, and a close-out killed at two armed checkpoints twice each was quarantined
      // with its meeting failed. It has tests of its own; here its caps are out of the way.
      VERBATIM_MAX_RECLAIMS: '50',
      VERBATIM_CLOSEOUT_MAX_RECLAIMS: '50',
      VERBATIM_DB_IDLE_TRANSACTION_SECONDS: '5',
      // A write cut off between staging and commit leaves its object to the cleanup at this deadline.
      VERBATIM_STAGE_DEADLINE_SECONDS: '15',
      VERBATIM_RATE_LIMIT_REQUESTS: '0',
      VERBATIM_RATE_LIMIT_CHUNKS: '0',
      VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2',
      VERBATIM_WEBHOOK_RETRY_CAP_SECONDS: '3',
      VERBATIM_CLEANUP_BACKOFF_SECONDS: '0.2',
      VERBATIM_CLEANUP_BACKOFF_CAP_SECONDS: '3',
      VERBATIM_WEBHOOK_MAX_ATTEMPTS: '14',
      VERBATIM_WEBHOOK_TIMEOUT_SECONDS: '1',
      ...bots.env(),
    };
    // The driver's own handle on the service (to make the workspace) is never killed at a checkpoint.
    app = await openApp(loadConfig(env), { logger: createLogger('silent') });
    env.VERBATIM_FAULTS = JSON.stringify(armed);
    env.VERBATIM_FAULT_STATE_DIR = faultDir;
    const workspaceId = await app.workspaces.createWorkspace('sim');
    const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'sim');

    const onUnexpected = (m: Member, code: number | null, signal: string | null) => {
      // Anywhere in this start's output: its stdout and stderr are two pipes, so a log line may be
      // read after the checkpoint's own line (a process killed at a checkpoint dies right there).
      const atCheckpoint = /checkpoint (\S+): SIGKILL/.exec(m.proc.output());
      if (signal === 'SIGKILL' && atCheckpoint) {
        count('killed at a checkpoint');
        note(`${m.name} killed itself at checkpoint ${atCheckpoint[1]}`);
        return;
      }
      unexpected.push({ name: `${m.name}#${m.starts}`, code, signal, tail: m.proc.output().slice(-2000) });
      note(`${m.name} exited on its own (code ${code}, signal ${signal})`);
    };
    for (let i = 0; i < opts.apis; i++) {
      const port = 18_400 + ((opts.port + i * 7) % 1000);
      apiPorts.push(port);
      members.push(new Member(`api-${i}`, ['api'], { ...env, VERBATIM_PORT: String(port) }, onUnexpected));
    }
    for (let i = 0; i < opts.workers; i++)
      members.push(new Member(`worker-${i}`, ['worker'], env, onUnexpected));
    for (const m of members) m.start();
    await Promise.all(apiPorts.map((p) => waitHealthy(p)));
    bots.run();

    const client = new SimClient(apiPorts, apiKey, rng.fork());
    for (const e of webhookEndpoints) {
      const made = await client.send('POST', '/v1/webhooks', {
        url: receiver.urlFor(e.name),
        events: e.events,
      });
      if (made?.status !== 201 || typeof made.json?.secret !== 'string')
        throw new Error(`could not register webhook endpoint ${e.name}: ${made?.status}`);
      receiver.setSecret(e.name, made.json.secret);
    }
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
    let clientsLeft = opts.meetings;
    const scenarios = Array.from({ length: opts.meetings }, (_, i) => {
      const startAt = clientRng.next() * faultMs * 0.8;
      const kind = clientRng.pick(SCENARIOS);
      const seed = clientRng.int(1e9);
      return sleep(startAt)
        .then(() => client.run(kind, i, new Rng(seed)))
        .finally(() => clientsLeft--);
    });
    await faultsDone;
    faultsOn = false;
    // How much the service reached its providers while faults were on (it is starved if never).
    say(
      `during the faults: ${recognizer.calls()} speech calls, ${chat.calls()} chat calls, ${receiver.receipts.length} webhook receipts; machine load ${os.loadavg()[0]!.toFixed(2)}`,
    );
    note('heal: faults stop, every process runs');
    disarm();
    bots.heal();
    for (const m of members) {
      if (m.alive()) process.kill(m.proc.pid, 'SIGCONT');
      m.stoppedUntil = 0;
    }
    const healAt = Date.now();
    client.healedAt = healAt;
    // Clients still at work count as busy: the heal ends when they are done and the system is quiet.
    const quiet = await quiesce(dbUrl, 240_000, () => clientsLeft);
    await Promise.all(scenarios);
    const healS = (Date.now() - healAt) / 1000;
    say(`heal → quiescence: ${healS.toFixed(1)} s${quiet ? '' : ' (NOT reached within 240 s)'}`);

    count(
      'provider',
      [...recognizer.faults().values(), ...chat.faults().values()].reduce((a, b) => a + b, 0),
    );
    count('bot webhook lost', bots.lostWebhooks);
    count('bot provider', bots.providerFaults);
    count(
      'webhook receiver',
      [...receiver.faults.values()].reduce((a, b) => a + b, 0),
    );
    const history = await observe({
      dbUrl,
      dataDir,
      apiPorts,
      apiKey,
      meetings: client.meetings,
      unexpected,
      webhooks: { endpoints: webhookEndpoints, receipts: receiver.receipts },
      bots,
    });
    const violations = checkHistory(history);
    if (!quiet)
      violations.push({ invariant: 'V3', subject: 'quiescence', detail: 'not reached within 240 s' });

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
      const key = m.deleted
        ? `${m.label} deleted`
        : `${m.label} ${m.status}${m.failureCode ? ` ${m.failureCode}` : ''}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
    say('meetings by outcome');
    for (const [k, n] of [...outcomes].sort()) say(`  ${k.padEnd(24)} ${String(n).padStart(6)}`);
    say(
      `webhook events received: ${new Set(history.webhooks.receipts.map((r) => r.id)).size} ` +
        `(${history.webhooks.receipts.length} requests taken, ${receiver.badSignatures} with a bad signature)`,
    );
    say('invariants');
    for (const inv of Object.keys(INVARIANTS) as Invariant[]) {
      const n = violations.filter((v) => v.invariant === inv).length;
      say(`  ${inv} ${String(n).padStart(4)} violations  ${INVARIANTS[inv]}`);
    }
    say(`heal → quiescence ${healS.toFixed(1)} s`);
    if (violations.length > 0) {
      keepForLooking = opts.keep;
      if (keepForLooking) say(`kept: ${dbUrl} and ${dataDir}`);
      say(
        `\nFAILED, seed ${opts.seed} (replay: npm run sim -- --seed ${opts.seed} --minutes ${opts.minutes})`,
      );
      for (const v of violations.slice(0, 40)) say(`  ${v.invariant} ${v.subject}: ${v.detail}`);
      for (const line of history.botTrails ?? []) say(`  ${line}`);
      say('fault schedule:');
      for (const line of schedule) say(`  ${line}`);
    }
    return { failed: violations.length > 0, healS, counts };
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
    await receiver.close();
    await bots.close();
    if (!keepForLooking) {
      cluster.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

/**
 * How busy the machine is before the run: its load, and Verbatim processes or Postgres clusters
 * that are not this run's (left by a run stopped by hand, or a test). A loaded machine starves the
 * processes under test, and the figures of such a run (provider calls, heal time) say so.
 */
function machineLoad(): string {
  const load = os.loadavg()[0]!.toFixed(2);
  let strays = 0;
  let clusters = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmd = '';
    try {
      cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (cmd.includes('src/cli/main.ts')) strays++;
    else if (/postgres -D \S*verbatim-pg-/.test(cmd)) clusters++;
  }
  return `machine: ${os.cpus().length} cores, load ${load}; before the run, ${strays} Verbatim processes and ${clusters} throwaway Postgres clusters not its own`;
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
  // tick does not thin them out. The same rates for the whole fault phase: a calm second half (no
  // kills, fewer or no cut backends) was tried to let provider faults happen, but the service
  // needs more than 30 s to dig out of such a storm, so it still made next to no provider calls,
  // and CI's minimum of cut backends was missed (docs/simulation.md, "What it does not do yet").
  // Queue losses and the restarts (fixed times: 20%, 50%, 80%) as well.
  const STORM = { kill: 0.3, stop: 0.3, terminate: 12 };
  const CALM = STORM;
  const QUEUE_LOSS = 1;
  const stormUntil = Date.now() + (ctx.until - Date.now()) * 0.5;
  let last = Date.now();
  while (Date.now() < ctx.until) {
    await sleep(25 + rng.int(50));
    const dt = (Date.now() - last) / 1000;
    last = Date.now();
    const RATE = last < stormUntil ? STORM : CALM;
    const due = (perSecond: number) => perSecond > 0 && rng.chance(1 - Math.exp(-perSecond * dt));
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
      // Not blocking this process: the fake providers, endpoints and clients in it go on.
      const began = Date.now();
      try {
        await cluster.restartAsync();
        note(`postgres back after ${Date.now() - began} ms`);
        say(`  postgres restart: back after ${((Date.now() - began) / 1000).toFixed(1)} s`);
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
              order by random() limit ${1 + rng.int(4)}) x`,
        );
        const n = r.rows[0]?.n ?? 0;
        if (n > 0) {
          count('backend terminated', n);
          note(`pg_terminate_backend ×${n}`);
        }
      }
      if (opts.faults.has('queue-loss') && due(QUEUE_LOSS)) {
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

const UPLOAD_FORMATS: Array<{ type: string; lossy: boolean; args: string[] | null }> = [
  { type: 'audio/wav', lossy: false, args: null },
  { type: 'audio/x-wav', lossy: false, args: null },
  { type: 'audio/flac', lossy: false, args: ['-c:a', 'flac', '-f', 'flac'] },
  { type: 'audio/flac', lossy: false, args: ['-c:a', 'flac', '-f', 'flac'] },
  { type: 'audio/mpeg', lossy: true, args: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'] },
  { type: 'audio/ogg', lossy: true, args: ['-c:a', 'libopus', '-b:a', '32k', '-f', 'ogg'] },
  { type: 'audio/webm', lossy: true, args: ['-c:a', 'libopus', '-b:a', '32k', '-f', 'webm'] },
  {
    type: 'audio/mp4',
    lossy: true,
    args: ['-c:a', 'aac', '-b:a', '64k', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4'],
  },
];

/** A WAV re-encoded by Debian's ffmpeg (the same one the service decodes with). */
function encode(wav: Buffer, args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const ff = spawn('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'wav',
      '-i',
      'pipe:0',
      ...args,
      'pipe:1',
    ]);
    const out: Buffer[] = [];
    let err = '';
    ff.stdout.on('data', (d: Buffer) => out.push(d));
    ff.stderr.on('data', (d: Buffer) => (err += d.toString()));
    ff.on('error', reject);
    ff.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg ${args.join(' ')}: ${err}`)),
    );
    ff.stdin.end(wav);
  });
}

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
  'resubmit',
  'regenerate',
  'batch-cancel',
  'bot',
] as const;
type Scenario = (typeof SCENARIOS)[number];

export interface ClientMeeting {
  /** The meeting's id; for a bot, its recording's id until the oracle looks up the meeting. */
  id: string;
  kind: 'live' | 'upload' | 'bot';
  scenario: Scenario;
  deleted: boolean;
  expectFailure: boolean;
  accepted: Map<number, number>;
  /**
   * Chunks sent whose answer never came (indeterminate, as Jepsen calls them): the service may
   * have stored them, so their words may be in the transcript, at most once.
   */
  unanswered: Map<number, number>;
  /** Its batch was (maybe) canceled: it may end failed, its words unwanted. */
  canceled: boolean;
  /** Regenerate tries sent (each may have been done, whatever its answer). */
  regenerations: number;
  /** An upload's Content-Type, and whether its format is lossy (its marks do not survive). */
  format?: string;
  lossy?: boolean;
  /** Set by the observer: a bot recording that never became a meeting. */
  noMeeting?: boolean;
}

interface Answer {
  status: number;
  json: { [k: string]: unknown } | null;
}

class SimClient {
  readonly meetings: ClientMeeting[] = [];
  /**
   * When the heal began. Until then a request is tried for as long as it takes, as the web app's
   * outbox does (it never gives up on a chunk); after it, for at most a minute more.
   */
  healedAt = Number.POSITIVE_INFINITY;
  constructor(
    private readonly ports: number[],
    private readonly apiKey: string,
    private readonly rng: Rng,
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
    how: { key?: string; onTry?: () => void } = {},
  ): Promise<Answer | null> {
    const deadline = Date.now() + 240_000;
    while (Date.now() < Math.max(deadline, this.healedAt + 60_000)) {
      const port = this.rng.pick(this.ports);
      how.onTry?.();
      try {
        const res = await fetch(`http://127.0.0.1:${port}${url}`, {
          method,
          headers: {
            authorization: `Bearer ${this.apiKey}`,
            ...(body === undefined ? {} : { 'content-type': contentType ?? 'application/json' }),
            ...(how.key ? { 'idempotency-key': how.key } : {}),
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

  /** Creates a meeting as a careful client does: with a key, so a lost answer is safely retried. */
  private async create(
    index: number,
    scenario: Scenario,
    kind: 'live' | 'upload',
    batchId?: string,
  ): Promise<ClientMeeting | null> {
    const created = await this.send(
      'POST',
      '/v1/meetings',
      { source: kind, title: `sim ${index} ${scenario}`, ...(batchId ? { batchId } : {}) },
      undefined,
      { key: `sim-${index}-${scenario}-${this.rng.int(1e9)}` },
    );
    if (!created || (created.status !== 201 && created.status !== 200) || !created.json) return null;
    const m: ClientMeeting = {
      id: String(created.json.id),
      kind,
      scenario,
      deleted: false,
      expectFailure: scenario === 'bad-upload',
      accepted: new Map(),
      unanswered: new Map(),
      canceled: false,
      regenerations: 0,
    };
    this.meetings.push(m);
    return m;
  }

  /** Sends a recording; an upload carries one mark (< 511) over its whole length. */
  /**
   * Sends a recording in one of the accepted formats, drawn from the seed. An upload carries one
   * mark (< 511) over its whole length; in a lossless format (WAV, FLAC) the marks come back exact,
   * in a lossy one (MP3, Ogg and WebM Opus, AAC in MP4) they do not, so there V1 cannot apply and
   * the oracle asks only that it completes. A bad file is one of: a playlist, a RIFF header with
   * nothing after it, text sent as Ogg.
   */
  private async upload(m: ClientMeeting, mark: number, rng: Rng, bad: boolean): Promise<void> {
    const samples = 16_000 * (8 + rng.int(40));
    let body: Buffer;
    let type: string;
    if (bad) {
      [body, type] = rng.pick<[Buffer, string]>([
        [Buffer.from(`#EXTM3U\n#EXT-X-VERSION:3\nfile:///etc/passwd\n`), 'audio/wav'],
        [Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4000, 7)]), 'audio/wav'],
        [Buffer.from('these are the minutes of the last meeting, not audio\n'.repeat(40)), 'audio/ogg'],
      ]);
    } else {
      const format = rng.pick(UPLOAD_FORMATS);
      type = format.type;
      m.lossy = format.lossy;
      const wav = markedChunk(mark, samples);
      body = format.args ? await encode(wav, format.args) : wav;
    }
    m.format = type;
    const res = await this.send('PUT', `/v1/meetings/${m.id}/recording`, body, type);
    if (res && res.status === 202) {
      if (!bad) m.accepted.set(mark, samples);
    } else if (!m.canceled) {
      // Refused at the door (or never answered): the client deletes what it made.
      await this.remove(m);
    }
  }

  /** Asks until the meeting is complete or failed (or the client gives up). */
  private async waitTerminal(m: ClientMeeting): Promise<void> {
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline) {
      const res = await this.send('GET', `/v1/meetings/${m.id}`);
      if (!res || res.status !== 200 || res.json?.status === 'complete' || res.json?.status === 'failed')
        return;
      await sleep(500);
    }
  }

  async run(scenario: Scenario, index: number, rng: Rng): Promise<void> {
    if (scenario === 'bot') {
      // A calendar event a bot records: it starts within seconds; the bot world plays the meeting.
      const start = Date.now() + 2_000 + rng.int(10_000);
      const code = [3, 4, 3]
        .map((n) => Array.from({ length: n }, () => 'abcdefghijkmnopqrstuvwxyz'[rng.int(25)]).join(''))
        .join('-');
      const res = await this.send('POST', '/v1/calendar-events', {
        title: `sim ${index} bot`,
        meetingUrl: `https://meet.google.com/${code}`,
        start: new Date(start).toISOString(),
        end: new Date(start + 15_000).toISOString(),
        eventId: `sim-${index}`,
      });
      const recording = res?.json?.recording as { id?: unknown } | null | undefined;
      if (!res || (res.status !== 201 && res.status !== 200) || typeof recording?.id !== 'string') return;
      this.meetings.push({
        id: recording.id,
        kind: 'bot',
        scenario,
        deleted: false,
        expectFailure: false,
        accepted: new Map(),
        unanswered: new Map(),
        canceled: false,
        regenerations: 0,
      });
      return;
    }
    if (scenario === 'batch-cancel') {
      // A batch of uploads, canceled at a random moment: each ends complete (done before the cancel) or
      // failed with its reason, and holds no audio either way.
      const batch = await this.send('POST', '/v1/batches', { title: `sim batch ${index}` });
      if (!batch || batch.status !== 201 || typeof batch.json?.id !== 'string') return;
      const batchId = batch.json.id;
      const members: ClientMeeting[] = [];
      for (let k = 0; k < 1 + rng.int(3); k++) {
        const m = await this.create(index, scenario, 'upload', batchId);
        if (m) members.push(m);
      }
      await Promise.all(members.map((m, k) => this.upload(m, 400 + k, rng.fork(), false)));
      await sleep(rng.int(4000));
      for (const m of members) m.canceled = true;
      await this.send('POST', `/v1/batches/${batchId}/cancel`);
      return;
    }
    const kind = scenario === 'upload' || scenario === 'bad-upload' ? 'upload' : 'live';
    const m = await this.create(index, scenario, kind);
    if (!m) return;
    const base = `/v1/meetings/${m.id}`;

    if (kind === 'upload') {
      await this.upload(m, 400 + (index % 100), rng, scenario === 'bad-upload');
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
      if (res && (res.status === 200 || res.status === 201)) {
        m.accepted.set(seq, lengths[seq]!);
        m.unanswered.delete(seq);
      } else if (!res && !m.accepted.has(seq)) m.unanswered.set(seq, lengths[seq]!);
    };
    const end = (withCount: boolean) => this.send('POST', `${base}/end`, withCount ? { chunks: n } : {});
    const seqs = [...Array(n).keys()];
    const pace = () => sleep(rng.int(300));
    switch (scenario) {
      case 'in-order':
      case 'no-count':
      case 'deleted':
      case 'resubmit':
      case 'regenerate':
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
        if (scenario === 'resubmit') {
          // An operator resubmits while the meeting is still closing out (or already done: a 409).
          for (let k = 0; k < 1 + rng.int(2); k++) {
            await sleep(rng.int(3000));
            await this.send('POST', `${base}/resubmit`);
          }
        }
        if (scenario === 'regenerate') {
          await this.waitTerminal(m);
          const onTry = () => void m.regenerations++;
          const asks = 1 + rng.int(2);
          await Promise.all(
            Array.from({ length: asks }, () =>
              this.send('POST', `${base}/minutes`, undefined, undefined, { onTry }),
            ),
          );
        }
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

/**
 * Nothing left to do: every meeting ended, no job waiting or running, no outbox, cleanup or webhook
 * delivery left, no transport job locked.
 */
async function quiesce(dbUrl: string, boundMs: number, clientsLeft: () => number): Promise<boolean> {
  const started = Date.now();
  const deadline = started + boundMs;
  let lastSaid = started;
  while (Date.now() < deadline) {
    const c = new pg.Client({ connectionString: dbUrl, options: '-c statement_timeout=5000' });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const r = await c.query<Record<string, string>>(`select
          (select count(*) from meetings where status not in ('complete', 'failed', 'created')) as meetings,
          (select count(*) from jobs where status in ('pending', 'running')) as jobs,
          (select string_agg(kind || ' ' || status || ' ×' || n || case when due > 0 then ' due in ' || due || ' s' else '' end, ', ')
             from (select kind, status, count(*) as n,
                          ceil(max(extract(epoch from run_after - now())))::int as due
                     from jobs where status in ('pending', 'running') group by kind, status) j) as kinds,
          (select count(*) from outbox where delivered_at is null) as outbox,
          (select count(*) from object_cleanups) as cleanups,
          (select string_agg(distinct state || case when lease_expires_at > now() then ' leased' else '' end
                  || case when state = 'staged' then ' due in ' || ceil(extract(epoch from reserve_until - now())) || ' s'
                          else ' due in ' || ceil(extract(epoch from next_attempt_at - now())) || ' s' end
                  || ' (' || reason || ')'
                  || case when lease_expires_at > now() then ' by ' || coalesce(
                       (select case when w.declared_dead_at is not null then 'a worker declared dead'
                                    when w.stopped_at is not null then 'a stopped worker'
                                    else 'a live worker, heartbeat ' || ceil(extract(epoch from now() - w.heartbeat_at)) || ' s ago' end
                          from workers w where w.id = lease_owner), 'an unregistered owner') else '' end,
                  '; ') from object_cleanups) as cleanup_detail,
          (select count(*) from webhook_deliveries where status = 'pending') as webhooks,
          (select count(*) from bot_recordings
            where status not in ('complete', 'failed', 'canceled', 'not_recorded')) as bots,
          (select count(*) from graphile_worker._private_jobs where locked_at is not null) as locked,
          (select count(*) from windows where pending_at_publication) as late`);
      const row = r.rows[0] ?? {};
      row.clients = String(clientsLeft());
      const busy = [
        'clients',
        'meetings',
        'jobs',
        'outbox',
        'cleanups',
        'webhooks',
        'bots',
        'locked',
        'late',
      ].filter((k) => Number(row[k]) > 0);
      if (busy.length === 0) return true;
      // What the heal is still waiting on, every ten seconds, so a slow heal explains itself.
      if (Date.now() - lastSaid >= 10_000) {
        lastSaid = Date.now();
        say(
          `  heal +${Math.round((Date.now() - started) / 1000)} s: ` +
            busy.map((k) => `${k} ${row[k]}`).join(', ') +
            (row.kinds ? ` (jobs: ${row.kinds})` : '') +
            (row.cleanup_detail ? ` (cleanups: ${row.cleanup_detail.slice(0, 300)})` : ''),
        );
      }
    } catch {
      // a worker restart or a slow server: ask again
    } finally {
      await c.end().catch(() => undefined);
    }
    await sleep(500);
  }
  return false;
}

/** Runs each seed in turn; with several, the heal → quiescence figures over them; with --ci, the minimums. */
async function main(opts: Options): Promise<number> {
  const results: Array<RunResult & { seed: number }> = [];
  for (const seed of opts.seeds) {
    try {
      results.push({ seed, ...(await simulate({ ...opts, seed })) });
    } catch (err) {
      process.stderr.write(
        `simulation crashed (seed ${seed}): ${err instanceof Error ? err.stack : String(err)}\n`,
      );
      return 2;
    }
    say('');
  }
  const heals = results.map((r) => r.healS).sort((a, b) => a - b);
  const median =
    heals.length % 2
      ? heals[(heals.length - 1) / 2]!
      : (heals[heals.length / 2 - 1]! + heals[heals.length / 2]!) / 2;
  say(
    `heal → quiescence over ${results.length} seed${results.length > 1 ? 's' : ''} (${opts.seeds.join(', ')}): ` +
      `median ${median.toFixed(1)} s, max ${heals.at(-1)!.toFixed(1)} s`,
  );
  const failed = results.filter((r) => r.failed).map((r) => r.seed);
  if (failed.length > 0) say(`FAILED seeds: ${failed.join(', ')}`);
  let short = false;
  if (opts.ci) {
    const sum = (kind: string) => results.reduce((n, r) => n + (r.counts.get(kind) ?? 0), 0);
    const total = results.reduce((n, r) => n + [...r.counts.values()].reduce((a, b) => a + b, 0), 0);
    const kills = sum('process kill') + sum('process stop') + sum('killed at a checkpoint');
    const restarts = sum('postgres restart');
    short = total < 1000 || kills < 50 || restarts < 3;
    say(
      `CI minimum: ${total} faults (≥ 1000), ${kills} kills or stops (≥ 50), ${restarts} Postgres restarts (≥ 3)  ` +
        (short ? 'MISS' : 'PASS'),
    );
  }
  return failed.length > 0 || short ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  void main(parseArgs(process.argv.slice(2))).then((code) => process.exit(code));
}
