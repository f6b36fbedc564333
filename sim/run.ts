/**
 * `npm run sim -- --seed S | --seeds S1,S2 [--minutes M] [--ci] [--faults kill,stop,pg-terminate,pg-restart,provider,queue-loss]`
 * `npm run sim -- --plant NAME [--seed S] [--minutes M]` (V12, sim/plants.ts)
 * (docs/simulation.md): the whole system — several api and worker processes on a throwaway Postgres
 * cluster, the providers at the network boundary — driven by simulated clients and faults drawn
 * from one seed, then healed, then checked by the oracle (sim/oracle.ts). Exits 1 on a violation,
 * printing the seed, the fault schedule and what broke.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { migrateDatabase } from '../src/db/migrate.ts';
import { ensureAppLogin } from '../src/db/roles.ts';
import { createLogger } from '../src/log.ts';
import { startCluster, type Cluster } from '../test/support/cluster.ts';
import { killIsolatedRunners } from '../test/support/harness.ts';
import { BotWorld } from './bots.ts';
import { drawScenarios, SimClient } from './clients.ts';
import { ALL_FAULTS, CHECKPOINTS, HARSH_PHASE, Member, runFaults, type FaultKind } from './faults.ts';
import { MAX_MEETING_NUMBERS } from './marks.ts';
import { observe } from './observe.ts';
import { type Floors, type History, type Work } from './history.ts';
import { startNoisyTenant } from './noisy.ts';
import {
  checkHistory,
  fairWaitBound,
  INVARIANTS,
  judgedWaits,
  workOf,
  type Invariant,
  type Violation,
} from './oracle.ts';
import { listPlants, plantCaught, runPlant } from './plants.ts';
import { startChat, startRecognizer, type FakeProvider, type ProviderReply } from './providers.ts';
import { startReceiver, type Receiver, type ReceiverReply } from './receiver.ts';
import { Rng } from './rng.ts';
import { StoreWatcher } from './store.ts';
import { machineLoad, quiesce, waitHealthy } from './system.ts';

/**
 * V10: the least a run must do per minute of faults (docs/simulation.md, "Floors"), set well below
 * what measured runs did, so only a service that skips work falls under them.
 */
export const FLOORS: Floors = { completedMeetings: 10, acceptedAudioSeconds: 300, botRecordings: 1 };

/** The speech and chat providers' rate limits (like OpenAI's requests per window, scaled to the run). */
const SPEECH_LIMIT = { limit: 10, windowMs: 2_000 };
const CHAT_LIMIT = { limit: 4, windowMs: 2_000 };
/** The lease the service is given (VERBATIM_LEASE_SECONDS): the harsh stretch stops processes past it. */
/** Transcription runners per worker process. */
const SIM_TRANSCRIPTION_SLOTS = 2;
/** F5: the noisy tenant's backlog: uploads of this many seconds of tone, one after another. */
const NOISY = { uploads: 4, seconds: 150 };
const LEASE_MS = 2_000;
const METRICS_TOKEN = 'sim-metrics-token-0123456789';

export interface Options {
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
  /** V12: apply this plant to a copy of the repository and run the seed there (sim/plants.ts). */
  plant: string | null;
  /** Set by the plant runner in the copy: exit 0 only when this invariant was violated… */
  expect: Invariant | null;
  /** …by a violation whose subject and detail match this pattern (when set). */
  expectMatch: string | null;
  listPlants: boolean;
  /** Write the whole observed history here as JSON. */
  dump: string | null;
  /** Write every process's output into this directory. */
  logs: string | null;
}

export function parseArgs(argv: string[]): Options {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const plant = get('plant') ?? null;
  // A plant runs a shorter fault phase by default: it must be caught, not soaked.
  const minutes = Number(get('minutes') ?? (plant ? '0.5' : '1'));
  const faults = (get('faults') ?? ALL_FAULTS.join(',')).split(',').filter(Boolean) as FaultKind[];
  for (const f of faults) if (!ALL_FAULTS.includes(f)) throw new Error(`unknown fault kind ${f}`);
  const seeds = (get('seeds') ?? get('seed') ?? (plant ? '1401' : String(Math.floor(Math.random() * 1e9))))
    .split(',')
    .filter(Boolean)
    .map(Number);
  if (seeds.some((n) => !Number.isInteger(n) || n < 0)) throw new Error('seeds must be whole numbers');
  const expect = get('expect') ?? null;
  if (expect !== null && !(expect in INVARIANTS)) throw new Error(`--expect: unknown invariant ${expect}`);
  // At least 18: every scenario at least once (sim/clients.ts, drawScenarios), however short the run.
  const meetings = Number(get('meetings') ?? String(Math.max(18, Math.round(minutes * 24))));
  if (meetings * 3 > MAX_MEETING_NUMBERS)
    throw new Error(`at most ${Math.floor(MAX_MEETING_NUMBERS / 3)} meetings`);
  return {
    seeds,
    seed: seeds[0]!,
    minutes,
    faults: new Set(faults),
    apis: Number(get('apis') ?? '2'),
    workers: Number(get('workers') ?? '3'),
    meetings,
    port: Number(get('port') ?? '31433'), // below the ephemeral range: no outgoing connection holds it
    keep: argv.includes('--keep'),
    ci: argv.includes('--ci'),
    plant,
    expect: expect as Invariant | null,
    expectMatch: get('expect-match') ?? null,
    listPlants: argv.includes('--list-plants'),
    dump: get('dump') ?? null,
    logs: get('logs') ?? null,
  };
}

const say = (line: string) => process.stdout.write(`${line}\n`);

export interface RunResult {
  failed: boolean;
  healS: number;
  counts: Map<string, number>;
  violations: Violation[];
  work: Work | null;
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

  sayRun(opts);
  const cluster: Cluster = startCluster(opts.port);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-sim-'));
  const faultDir = path.join(dataDir, 'checkpoint-faults');
  const { armed, disarm } = armCheckpoints(opts.faults, rng.fork(), faultDir);
  let faultsOn = true;
  const { recognizer, chat, receiver } = await startProviders(opts.faults, rng, () => faultsOn);
  const apiPorts: number[] = [];
  // Every meeting's audio (and every bot's recording) is marked with a number of its own.
  const nextNumber = counter();
  const bots = await BotWorld.start(
    () => apiPorts,
    rng.fork(),
    () => faultsOn,
    nextNumber,
  );
  const webhookEndpoints = [
    { name: 'all', events: [] as string[] },
    { name: 'ends', events: ['meeting.completed', 'meeting.failed'] },
  ];
  const members: Member[] = [];
  let app: App | null = null;
  let store: StoreWatcher | null = null;
  let dbUrlOfRun: string | null = null;
  const unexpected: Array<{ name: string; code: number | null; signal: string | null; tail: string }> = [];
  /** When a process of the service was killed, stopped or died: V6 forgives a retry it made too soon. */
  const disruptions: number[] = [];
  /** Every fault's span (V13 judges only the waits none touched). */
  const faultSpans: Array<[number, number]> = [];
  try {
    const urls = await createSimDatabase(cluster.url);
    const dbUrl = urls.ownerUrl;
    dbUrlOfRun = urls.appUrl;
    const env = serviceEnv({ urls, dataDir, speechUrl: recognizer.url, chatUrl: chat.url, bots: bots.env() });
    // The driver's own handle on the service (to make the workspace) is never killed at a checkpoint.
    app = await openApp(loadConfig(env), { logger: createLogger('silent') });
    Object.assign(env, { VERBATIM_FAULTS: JSON.stringify(armed), VERBATIM_FAULT_STATE_DIR: faultDir });
    const { workspaceId, apiKey, noisyWorkspaceId, noisyKey } = await makeTenants(app);

    members.push(...makeMembers(opts, env, apiPorts, exitHandler({ count, note, unexpected, disruptions })));
    for (const m of members) m.start();
    await Promise.all(apiPorts.map((p) => waitHealthy(p)));
    bots.run();

    const client = new SimClient(apiPorts, apiKey, rng.fork(), nextNumber);
    const noisyClient = new SimClient(apiPorts, noisyKey, rng.fork(), nextNumber);
    const noisy = startNoisyTenant(noisyClient, NOISY.uploads, NOISY.seconds);
    store = new StoreWatcher(path.join(dataDir, 'blobs'), client.sent);
    store.start();
    await registerWebhooks(client, receiver, webhookEndpoints);
    const faultMs = opts.minutes * 60_000;
    const faultsFrom = Date.now();
    const faultsDone = runFaults({
      faults: opts.faults,
      rng: rng.fork(),
      members,
      cluster,
      dbUrl,
      leaseMs: LEASE_MS,
      count,
      note,
      say,
      disrupted: (at) => disruptions.push(at),
      faulted: (from, to) => faultSpans.push([from, to]),
      until: Date.now() + faultMs,
    });
    let clientsLeft = opts.meetings;
    const scenarios = startClients(client, opts.meetings, rng.fork(), faultMs, () => clientsLeft--);
    await faultsDone;
    faultsOn = false;
    sayFaultPhase(recognizer, chat, receiver, faultsFrom, faultMs);
    note('heal: faults stop, every process runs');
    disarm();
    bots.heal();
    for (const m of members) m.resume();
    const healAt = Date.now();
    client.healedAt = noisyClient.healedAt = healAt;
    // Clients still at work count as busy: the heal ends when they are done and the system is quiet.
    const quiet = await quiesce(dbUrl, 240_000, () => clientsLeft);
    await Promise.all(scenarios);
    await noisy.done;
    const healS = (Date.now() - healAt) / 1000;
    say(`heal → quiescence: ${healS.toFixed(1)} s${quiet ? '' : ' (NOT reached within 240 s)'}`);

    countOutsideFaults(count, recognizer, chat, receiver, bots);
    const history = await observe({
      dbUrl,
      apiPorts,
      apiKey,
      metricsToken: METRICS_TOKEN,
      meetings: client.meetings,
      requests: client.history,
      unexpected,
      webhooks: { endpoints: webhookEndpoints, receipts: receiver.receipts },
      bots,
      speech: recognizer,
      chat,
      store,
      fair: {
        quiet: workspaceId,
        noisy: noisyWorkspaceId,
        slots: opts.workers * SIM_TRANSCRIPTION_SLOTS,
        faultSpans,
      },
    });
    history.disruptions = disruptions;
    const work = workOf(history, opts.minutes);
    history.work = { done: work, floors: FLOORS };
    const violations = checkHistory(history);
    if (opts.dump) dumpHistory(opts.dump, history);
    if (!quiet)
      violations.push({ invariant: 'V3', subject: 'quiescence', detail: 'not reached within 240 s' });

    await report({
      opts,
      counts,
      history,
      work,
      recognizer,
      chat,
      receiver,
      dbUrl,
      violations,
      healS,
      schedule,
      members,
    });
    if (violations.length > 0) {
      keepForLooking = opts.keep;
      if (keepForLooking) say(`kept: ${dbUrl} and ${dataDir}`);
    }
    return { failed: violations.length > 0, healS, counts, violations, work };
  } finally {
    store?.stop();
    if (opts.logs) writeLogs(opts.logs, opts.seed, members);
    endMembers(members);
    // J20: isolated runners outlive their workers by design; the run's end ends them.
    if (dbUrlOfRun) killIsolatedRunners(dbUrlOfRun);
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

function sayRun(opts: Options): void {
  say(
    `verbatim simulation: seed ${opts.seed}, ${opts.minutes} min of faults (${[...opts.faults].join(', ')}), ` +
      `${opts.apis} api + ${opts.workers} worker processes, ${opts.meetings} meetings`,
  );
  say(machineLoad());
}

/** Numbers from 0 up, one per call. */
function counter(): () => number {
  let n = 0;
  return () => n++;
}

/**
 * The tenant under test (the sim workspace) and, F5, a second one with a backlog of long uploads,
 * so the sim workspace's windows are claimed beside another's (V13).
 */
async function makeTenants(
  app: App,
): Promise<{ workspaceId: string; apiKey: string; noisyWorkspaceId: string; noisyKey: string }> {
  const workspaceId = await app.workspaces.createWorkspace('sim');
  const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'sim');
  const noisyWorkspaceId = await app.workspaces.createWorkspace('noisy');
  const { apiKey: noisyKey } = await app.workspaces.createApiKey(noisyWorkspaceId, 'noisy');
  return { workspaceId, apiKey, noisyWorkspaceId, noisyKey };
}

async function isolationFigures(
  dbUrl: string,
): Promise<{ isolated: number; windows: number; poison: number; runnerDeaths: number }> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    const r = await c.query<{ isolated: number; windows: number; poison: number; deaths: number }>(`select
        count(*) filter (where isolated_at is not null)::int as isolated,
        count(*) filter (where isolated_at is not null and kind = 'transcribe-window')::int as windows,
        count(*) filter (where last_error_code = 'poison')::int as poison,
        (select count(*) from job_attempts where error_code = 'runner_died')::int as deaths
      from jobs`);
    const row = r.rows[0]!;
    return { isolated: row.isolated, windows: row.windows, poison: row.poison, runnerDeaths: row.deaths };
  } finally {
    await c.end();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Runs each seed in turn; with several, the heal → quiescence figures over them; with --ci, the minimums. */
async function main(opts: Options): Promise<number> {
  if (opts.listPlants) {
    for (const p of listPlants()) say(`${p.name.padEnd(24)} ${p.invariant.padEnd(4)} ${p.what}`);
    return 0;
  }
  if (opts.plant) return runPlant(opts.plant, process.argv.slice(2), say);
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
    const kills =
      sum('process kill') +
      sum('process kill (harsh)') +
      sum('process stop') +
      sum('process stop (harsh)') +
      sum('killed at a checkpoint');
    const restarts = sum('postgres restart');
    short = total < 1000 || kills < 50 || restarts < 3;
    say(
      `CI minimum: ${total} faults (≥ 1000), ${kills} kills or stops (≥ 50), ${restarts} Postgres restarts (≥ 3)  ` +
        (short ? 'MISS' : 'PASS'),
    );
  }
  if (opts.expect) {
    // In a plant's copy (V12): the run must have failed on the invariant the plant names.
    const caught = results.some((r) => plantCaught(opts.expect!, r.violations, opts.expectMatch));
    const others = [...new Set(results.flatMap((r) => r.violations.map((v) => v.invariant)))];
    say(
      caught
        ? `PLANT CAUGHT by ${opts.expect}${others.length > 1 ? ` (also: ${others.filter((i) => i !== opts.expect).join(', ')})` : ''}`
        : `PLANT NOT CAUGHT: no ${opts.expect} violation${opts.expectMatch ? ` matching /${opts.expectMatch}/` : ''}${others.length ? ` (violations of ${others.join(', ')} only)` : ''}`,
    );
    return caught ? 0 : 1;
  }
  return failed.length > 0 || short ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  void main(parseArgs(process.argv.slice(2))).then((code) => process.exit(code));
}

/** The service's settings in the simulation: every wait scaled down, the fakes as its providers. */
function serviceEnv(o: {
  urls: { ownerUrl: string; appUrl: string };
  dataDir: string;
  speechUrl: string;
  chatUrl: string;
  bots: Record<string, string>;
}): Record<string, string> {
  return {
    DATABASE_URL: o.urls.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: o.urls.ownerUrl,
    VERBATIM_DATA_DIR: o.dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_EGRESS_ALLOW: '127.0.0.0/8',
    VERBATIM_ASR: 'whisper',
    VERBATIM_WHISPER_URL: o.speechUrl,
    // A window takes the recogniser about 3 s (sim/providers.ts), up to about 9 s in its tail.
    VERBATIM_ASR_TIMEOUT_SECONDS: '12',
    // PocketSphinx on this machine runs one recognition per CPU at once (2 per worker).
    VERBATIM_TRANSCRIPTION_CONCURRENCY: String(SIM_TRANSCRIPTION_SLOTS),
    VERBATIM_MINUTES: 'openai',
    VERBATIM_LLM_URL: o.chatUrl,
    VERBATIM_LLM_TIMEOUT_SECONDS: '4',
    VERBATIM_WINDOW_SECONDS: '8',
    VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
    VERBATIM_CHUNK_SECONDS: '5',
    VERBATIM_GAP_PATIENCE_SECONDS: '1',
    VERBATIM_LEASE_SECONDS: String(LEASE_MS / 1000),
    VERBATIM_HEARTBEAT_SECONDS: '0.4',
    VERBATIM_SWEEP_SECONDS: '0.5',
    VERBATIM_DEATH_CHECK_SECONDS: '0.25',
    VERBATIM_RESCUE_AFTER_SECONDS: '1',
    VERBATIM_RETRY_STEP_SECONDS: '0.3',
    VERBATIM_CLOSEOUT_GRACE_SECONDS: '0.2',
    VERBATIM_CLOSEOUT_POLL_SECONDS: '0.3',
    VERBATIM_MINUTES_RETRY_SECONDS: '0.3',
    // Poison protection (J7, L7, J20) runs with its real caps: a window killed with its worker
    // again and again must still reach the transcript. The isolated lane's backoff
    // (a minute to an hour by default) is scaled down like every other wait here, so that a job
    // isolated during the faults has its runs before the heal's bound.
    VERBATIM_ISOLATION_BACKOFF_SECONDS: '1',
    VERBATIM_ISOLATION_BACKOFF_CAP_SECONDS: '8',
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
    VERBATIM_METRICS_TOKEN: METRICS_TOKEN,
    ...o.bots,
  };
}

/** The run's table: faults, outcomes, work, providers, the isolated lane, webhooks, invariants. */
async function report(r: {
  opts: Options;
  counts: Map<string, number>;
  history: History;
  work: ReturnType<typeof workOf>;
  recognizer: FakeProvider;
  chat: FakeProvider;
  receiver: Receiver;
  dbUrl: string;
  violations: Violation[];
  healS: number;
  schedule: string[];
  members: Member[];
}): Promise<void> {
  const {
    opts,
    counts,
    history,
    work,
    recognizer,
    chat,
    receiver,
    dbUrl,
    violations,
    healS,
    schedule,
    members,
  } = r;
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
  for (const [k, n] of [...outcomes].sort()) say(`  ${k.padEnd(40)} ${String(n).padStart(4)}`);
  const per = (n: number) => (n / opts.minutes).toFixed(1);
  say(
    `work per minute of faults (floors, V10): ${per(work.completedMeetings)} completed meetings (≥ ${FLOORS.completedMeetings}), ` +
      `${per(work.acceptedAudioSeconds)} s of accepted audio (≥ ${FLOORS.acceptedAudioSeconds}), ` +
      `${per(work.botRecordings)} bot recordings (≥ ${FLOORS.botRecordings})`,
  );
  const outcome = (log: typeof recognizer.log, o: string) => log.filter((c) => c.outcome === o).length;
  say(
    `providers: ${recognizer.calls()} speech calls (${outcome(recognizer.log, 'ok')} answered, ` +
      `${outcome(recognizer.log, 'abandoned')} abandoned by a caller killed or timed out mid-recognition, ` +
      `${outcome(recognizer.log, 'limited')} over the limit), ` +
      `${chat.calls()} chat calls (${outcome(chat.log, 'limited')} over the limit); ` +
      `store: ${history.store?.length ?? 0} objects seen, ${history.store?.filter((o) => o.goneAt === null).length ?? 0} left`,
  );
  // J20: how much of the run went through the isolated lane (read from the service's rows: a
  // figure to look at, not a witness the oracle trusts).
  const lane = await isolationFigures(dbUrl);
  say(
    `isolated lane (J20): ${lane.isolated} jobs isolated (${lane.windows} of them windows), ` +
      `${lane.poison} declared poison, ${lane.runnerDeaths} isolated runner deaths`,
  );
  say(
    `webhook events received: ${new Set(history.webhooks.receipts.map((r) => r.id)).size} ` +
      `(${history.webhooks.receipts.length} requests taken, ${receiver.badSignatures} with a bad signature)`,
  );
  // W8: how much the speaker check had to look at (a check over nothing proves nothing).
  const named = (pick: (m: History['meetings'][number]) => boolean) =>
    history.meetings
      .filter(pick)
      .flatMap((m) => m.segments ?? [])
      .filter((x) => x.speaker).length;
  say(
    `speakers (W8): ${named((m) => m.tracks === true)} segments of two-track meetings and ` +
      `${named((m) => m.speakerOf !== undefined)} of bot meetings with a speaker timeline named a speaker`,
  );
  // V13: how much the fairness check had to look at.
  if (history.fairWaits) {
    const judged = judgedWaits(history.fairWaits);
    const worst = judged.reduce((n, w) => Math.max(n, w.noisyAhead - w.ownAhead), 0);
    say(
      `fair share (V13): the noisy workspace's ${history.fairWaits.noisyWindows} windows ran; ${judged.length} of ${history.fairWaits.waits.length} windows claimed once ` +
        `waited untouched by a fault; at most ${worst} more of the noisy workspace’s windows than of ` +
        `its own went first (bound ${fairWaitBound(history.fairWaits.slots)} more)`,
    );
  }
  say('invariants');
  for (const inv of Object.keys(INVARIANTS) as Invariant[]) {
    const n = violations.filter((v) => v.invariant === inv).length;
    say(`  ${inv.padEnd(3)} ${String(n).padStart(4)} violations  ${INVARIANTS[inv]}`);
  }
  say(`heal → quiescence ${healS.toFixed(1)} s`);
  if (violations.length > 0) {
    say(`\nFAILED, seed ${opts.seed} (replay: npm run sim -- --seed ${opts.seed} --minutes ${opts.minutes})`);
    for (const v of violations.slice(0, 40)) say(`  ${v.invariant} ${v.subject}: ${v.detail}`);
    for (const line of history.botTrails ?? []) say(`  ${line}`);
    for (const line of history.windowTrails ?? []) say(`  ${line}`);
    for (const line of history.jobTrails ?? []) say(`  ${line}`);
    for (const line of logLinesAbout(members, history.botTrails ?? [])) say(`  ${line}`);
    say('fault schedule:');
    for (const line of schedule) say(`  ${line}`);
  }
}

/**
 * The checkpoints processes kill themselves at (each with probability 3/4, once or twice), and the
 * heal that marks every one spent, so no process is killed at one after it.
 */
function armCheckpoints(
  faults: Set<FaultKind>,
  checkpointRng: Rng,
  faultDir: string,
): { armed: Array<{ at: string; action: string; times: number }>; disarm: () => void } {
  const armed = faults.has('kill')
    ? CHECKPOINTS.filter(() => checkpointRng.chance(0.75)).map((at) => ({
        at,
        action: 'kill',
        times: 1 + checkpointRng.int(2),
      }))
    : [];
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
  return { armed, disarm };
}

/** Every process of the service ends: a stopped one is continued first, then killed. */
function endMembers(members: Member[]): void {
  for (const m of members) {
    m.retired = true;
    if (m.alive()) {
      process.kill(m.proc.pid, 'SIGCONT');
      m.proc.proc.kill('SIGKILL');
    }
  }
}

/**
 * On a failure with unsettled bot recordings: the processes' log lines that name one of them or
 * its bot, and the bot backstop's own complaints (the last 30), so a CI log can be read without
 * a replay.
 */
function logLinesAbout(members: Member[], botTrails: string[]): string[] {
  const ids = new Set<string>();
  for (const line of botTrails) {
    const m = /^bot recording ([^:\s]+): \S+, bot ([^,\s]+)/.exec(line);
    if (m) for (const id of [m[1]!, m[2]!]) if (id !== '(none)') ids.add(id);
  }
  if (ids.size === 0) return [];
  const found: string[] = [];
  for (const m of members) {
    const text = `${m.earlier}\n${m.proc?.output() ?? ''}`;
    for (const line of text.split('\n'))
      if ([...ids].some((id) => line.includes(id)) || /bot-backstops|bot backstop|back-fill/.test(line))
        found.push(`${m.name}: ${line.slice(0, 400)}`);
  }
  return ['process log lines about them:', ...found.slice(-30)];
}

/** --logs DIR: every process's output, its earlier starts included, to read a failure. */
function writeLogs(dir: string, seed: number, members: Member[]): void {
  fs.mkdirSync(dir, { recursive: true });
  for (const m of members)
    fs.writeFileSync(
      path.join(dir, `${seed}-${m.name}.log`),
      `${m.earlier}\n--- now\n${m.proc?.output() ?? ''}`,
    );
}

/**
 * The speech and chat providers, which fail a quarter of their requests while faults are on, and
 * the tenant's webhook receiver, whose endpoints do too.
 */
async function startProviders(
  faults: Set<FaultKind>,
  rng: Rng,
  faultsOn: () => boolean,
): Promise<{ recognizer: FakeProvider; chat: FakeProvider; receiver: Receiver }> {
  const providerRng = rng.fork();
  const decide = (): ProviderReply => {
    if (!faultsOn() || !faults.has('provider') || !providerRng.chance(0.25)) return 'ok';
    return providerRng.pick<ProviderReply>(['503', '503', '429', 'reset', 'hang', 'quota']);
  };
  const recognizer = await startRecognizer(decide, rng.fork(), SPEECH_LIMIT);
  const chat = await startChat(decide, rng.fork(), CHAT_LIMIT);
  // The tenant's webhook endpoints fail a quarter of their requests while faults are on.
  const receiverRng = rng.fork();
  const receiver = await startReceiver(
    () =>
      !faultsOn() || !receiverRng.chance(0.25)
        ? 'ok'
        : receiverRng.pick<ReceiverReply>(['500', 'reset', 'late']),
    1_500,
  );
  return { recognizer, chat, receiver };
}

/** The service's processes (not started yet): `apis` api processes, each on a port of its own, and the workers. */
function makeMembers(
  opts: Options,
  env: Record<string, string>,
  apiPorts: number[],
  onUnexpected: (m: Member, code: number | null, signal: string | null) => void,
): Member[] {
  const members: Member[] = [];
  for (let i = 0; i < opts.apis; i++) {
    const port = 18_400 + ((opts.port + i * 7) % 1000);
    apiPorts.push(port);
    members.push(new Member(`api-${i}`, ['api'], { ...env, VERBATIM_PORT: String(port) }, onUnexpected));
  }
  for (let i = 0; i < opts.workers; i++)
    members.push(new Member(`worker-${i}`, ['worker'], env, onUnexpected));
  return members;
}

/**
 * How much the service reached its providers while faults were on (it is starved if never), and how
 * many recognitions a caller left before their answer (killed, stopped or timed out).
 */
function sayFaultPhase(
  recognizer: FakeProvider,
  chat: FakeProvider,
  receiver: Receiver,
  faultsFrom: number,
  faultMs: number,
): void {
  const harshFrom = faultsFrom + faultMs * HARSH_PHASE[0];
  const harshTo = faultsFrom + faultMs * HARSH_PHASE[1];
  const inHarsh = recognizer.log.filter((c) => c.arrivedAt >= harshFrom && c.arrivedAt < harshTo);
  say(
    `during the faults: ${recognizer.calls()} speech calls (${inHarsh.length} in the harsh stretch, ` +
      `${inHarsh.filter((c) => c.outcome === 'abandoned').length} of them abandoned mid-recognition), ` +
      `${chat.calls()} chat calls, ${receiver.receipts.length} webhook receipts; machine load ${os.loadavg()[0]!.toFixed(2)}`,
  );
}

/** The faults the fakes outside the service injected, counted into the run's table. */
function countOutsideFaults(
  count: (kind: string, n?: number) => void,
  recognizer: FakeProvider,
  chat: FakeProvider,
  receiver: Receiver,
  bots: BotWorld,
): void {
  const sum = (ns: Iterable<number>) => [...ns].reduce((a, b) => a + b, 0);
  count('provider', sum([...recognizer.faults().values(), ...chat.faults().values()]));
  count('bot webhook lost', bots.lostWebhooks);
  count('bot provider', bots.providerFaults);
  count('webhook receiver', sum(receiver.faults.values()));
}

/** --dump FILE: the whole history as JSON, to read a failure at leisure. */
function dumpHistory(file: string, history: History): void {
  fs.writeFileSync(
    file,
    JSON.stringify(history, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v), 1),
  );
}

/** What the run records when a process of the service exits: killed at a checkpoint, or on its own. */
function exitHandler(r: {
  count: (kind: string) => void;
  note: (what: string) => void;
  unexpected: History['unexpectedExits'];
  disruptions: number[];
}): (m: Member, code: number | null, signal: string | null) => void {
  return (m, code, signal) => {
    // Anywhere in this start's output: its stdout and stderr are two pipes, so a log line may be
    // read after the checkpoint's own line (a process killed at a checkpoint dies right there).
    r.disruptions.push(Date.now());
    const atCheckpoint = /checkpoint (\S+): SIGKILL/.exec(m.proc.output());
    if (signal === 'SIGKILL' && atCheckpoint) {
      r.count('killed at a checkpoint');
      r.note(`${m.name} killed itself at checkpoint ${atCheckpoint[1]}`);
      return;
    }
    r.unexpected.push({ name: `${m.name}#${m.starts}`, code, signal, tail: m.proc.output().slice(-2000) });
    r.note(`${m.name} exited on its own (code ${code}, signal ${signal})`);
  };
}

/** The tenant's webhook endpoints, registered through the API, their secrets given to the receiver. */
async function registerWebhooks(
  client: SimClient,
  receiver: Receiver,
  endpoints: Array<{ name: string; events: string[] }>,
): Promise<void> {
  for (const e of endpoints) {
    const made = await client.send('POST', '/v1/webhooks', {
      url: receiver.urlFor(e.name),
      events: e.events,
    });
    if (made?.status !== 201 || typeof made.json?.secret !== 'string')
      throw new Error(`could not register webhook endpoint ${e.name}: ${made?.status}`);
    receiver.setSecret(e.name, made.json.secret);
  }
}

/** The run's database on the cluster; its URL. */
/**
 * The run's database, migrated by the superuser (the owner), and the login the service connects
 * with: one that owns nothing, as an installation should (S10; the cluster trusts local logins).
 */
async function createSimDatabase(clusterUrl: string): Promise<{ ownerUrl: string; appUrl: string }> {
  const admin = new pg.Client({ connectionString: clusterUrl });
  await admin.connect();
  try {
    await admin.query('create database sim');
    const ownerUrl = clusterUrl.replace(/\/postgres$/, '/sim');
    await migrateDatabase(ownerUrl);
    await ensureAppLogin(admin, 'verbatim_app', randomBytes(24).toString('base64url'));
    const app = new URL(ownerUrl);
    app.username = 'verbatim_app';
    return { ownerUrl, appUrl: app.toString() };
  } finally {
    await admin.end();
  }
}

/** The clients' scenarios, started across the first 80% of the fault phase; `done` as each ends. */
function startClients(
  client: SimClient,
  meetings: number,
  clientRng: Rng,
  faultMs: number,
  done: () => void,
): Array<Promise<void>> {
  return drawScenarios(meetings, clientRng).map((kind, i) => {
    const startAt = clientRng.next() * faultMs * 0.8;
    const seed = clientRng.int(1e9);
    return sleep(startAt)
      .then(() => client.run(kind, i, new Rng(seed)))
      .finally(done);
  });
}
