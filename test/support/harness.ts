import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildAppApi, openApp, type App, type AppOverrides } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { ResponseContract } from './openapi-contract.ts';
import { encodeWav, parseWav } from '../../src/domain/wav.ts';
import { cliArgs } from '../../scripts/built-cli.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** S9: what tests send to /metrics (`Authorization: Bearer`); FAST_ENV sets it. */
export const METRICS_TOKEN = 'test-metrics-token-0123456789';
export const METRICS_AUTH = { authorization: `Bearer ${METRICS_TOKEN}` };

/** Short timings so crash tests finish in seconds; the defaults are exercised by the benchmark. */
export const FAST_ENV: Record<string, string> = {
  VERBATIM_METRICS_TOKEN: METRICS_TOKEN,
  // S5: the tests' receivers, calendars and fake providers listen on loopback, which the egress
  // guard refuses unless an operator allows it; the S5 tests themselves set this to nothing.
  VERBATIM_EGRESS_ALLOW: '127.0.0.0/8',
  VERBATIM_LOG_LEVEL: 'info',
  VERBATIM_WINDOW_SECONDS: '3',
  VERBATIM_LEASE_SECONDS: '2',
  VERBATIM_HEARTBEAT_SECONDS: '0.4',
  VERBATIM_SWEEP_SECONDS: '0.5',
  VERBATIM_RESCUE_AFTER_SECONDS: '1',
  VERBATIM_RETRY_STEP_SECONDS: '0.3',
  VERBATIM_CLOSEOUT_GRACE_SECONDS: '0.2',
  VERBATIM_CLOSEOUT_POLL_SECONDS: '0.3',
  VERBATIM_MINUTES_RETRY_SECONDS: '0.3',
  VERBATIM_TRANSCRIPTION_CONCURRENCY: '2',
  // L22: drafts double the recognition work of a live meeting; the tests of other things do without
  // them (test/meeting-stream.test.ts turns them on). The product's default is on.
  VERBATIM_DRAFTS: 'off',
};

export interface WorkerProcess {
  proc: ChildProcess;
  pid: number;
  output(): string;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

export interface Harness {
  db: TestDatabase;
  dataDir: string;
  faultDir: string;
  app: App;
  api: FastifyInstance;
  apiKey: string;
  workspaceId: string;
  /** Everything the in-process API and the workers logged, for leak checks (A8). */
  logs(): string;
  responses: string[];
  env(extra?: Record<string, string>): Record<string, string>;
  spawnWorker(extra?: Record<string, string>): WorkerProcess;
  request(
    method: string,
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{
    status: number;
    json: any;
    text: string;
    /** The body's bytes (a WAV, a DOCX). */
    raw: Buffer;
    headers: Record<string, string | string[] | number | undefined>;
  }>;
  close(): Promise<void>;
}

export async function startHarness(
  opts: {
    env?: Record<string, string>;
    apiEnv?: Record<string, string>;
    overrides?: AppOverrides;
    /** Another Postgres server to run against (the L12 restart test starts its own). */
    adminUrl?: string;
  } = {},
): Promise<Harness> {
  const db = await createTestDatabase(opts.adminUrl);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-test-'));
  const faultDir = path.join(dataDir, 'faults');
  const baseEnv: Record<string, string> = {
    ...FAST_ENV,
    ...opts.env,
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_FAULT_STATE_DIR: faultDir,
  };
  let captured = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      captured += chunk.toString();
      done();
    },
  });
  const config = loadConfig({ ...baseEnv, ...opts.apiEnv });
  const app = await openApp(config, { ...opts.overrides, logger: createLogger('info', 'verbatim', sink) });
  const api = buildAppApi(app);
  await api.ready();
  const workspaceId = await app.workspaces.createWorkspace('test');
  const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'test');
  const workers: WorkerProcess[] = [];
  const responses: string[] = [];

  const env = (extra: Record<string, string> = {}) => ({ ...baseEnv, ...extra });

  let contract: ResponseContract | undefined;
  return {
    db,
    dataDir,
    faultDir,
    app,
    api,
    apiKey,
    workspaceId,
    responses,
    logs: () => captured + workers.map((w) => w.output()).join('\n'),
    env,
    spawnWorker: (extra = {}) => {
      const worker = spawnVerbatim(['worker'], env(extra));
      workers.push(worker);
      return worker;
    },
    request: async (method, url, body, headers = {}) => {
      const isBuffer = Buffer.isBuffer(body);
      const res = await api.inject({
        method: method as 'GET',
        url,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body !== undefined && !isBuffer ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        payload: body === undefined ? undefined : isBuffer ? body : JSON.stringify(body),
      });
      responses.push(res.body);
      // Issue 34 scope 5: every response a test gets must match the API's contract.
      contract ??= new ResponseContract((await api.inject({ method: 'GET', url: '/openapi.json' })).json());
      const problems = contract.problems(
        method,
        url,
        res.statusCode,
        String(res.headers['content-type'] ?? ''),
        res.body,
      );
      if (problems.length > 0) {
        throw new Error(
          `the response breaks the OpenAPI contract:\n${problems.join('\n')}\n${res.body.slice(0, 2000)}`,
        );
      }
      let json: unknown = null;
      try {
        json = JSON.parse(res.body);
      } catch {
        json = null;
      }
      return { status: res.statusCode, json, text: res.body, raw: res.rawPayload, headers: res.headers };
    },
    close: async () => {
      await Promise.all(workers.map((w) => w.stop()));
      // J20: isolated runners outlive their worker by design; this test's are ended with it.
      killIsolatedRunners(db.appUrl);
      await api.close();
      await app.close();
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      // S10 tripwire: a request path that touched a table its tenant role may not (or wrote a row
      // of another workspace) is logged by whichever code caught it; no test expects one.
      // The workers' output too: they run as verbatim_all_workspaces, which owns nothing.
      const all = captured + workers.map((w) => w.output()).join('\n');
      const denied = /permission denied for|violates row-level security|must be owner of/.exec(all);
      if (denied) {
        const line = all.slice(Math.max(0, denied.index - 300), denied.index + 200);
        throw new Error(`S10: the app hit its row-level wall during this test: …${line}…`);
      }
    },
  };
}

/**
 * SIGKILLs every isolated runner (`verbatim isolated-run`, J20) working on this database: they run
 * in a session of their own and outlive their worker, and one still writing to a worker's output
 * pipe would keep the test process waiting for it.
 */
export function killIsolatedRunners(databaseUrl: string): number {
  let killed = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.includes('isolated-run')) continue;
      const environ = fs.readFileSync(`/proc/${entry}/environ`, 'utf8');
      if (!environ.split('\0').includes(`DATABASE_URL=${databaseUrl}`)) continue;
      process.kill(Number(entry), 'SIGKILL');
      killed++;
    } catch {
      /* gone meanwhile */
    }
  }
  return killed;
}

/**
 * Runs the real CLI entry point in a child process, capturing its output; with `cli`, another
 * build's entry point (a previous release, P5).
 */
export function spawnVerbatim(args: string[], env: Record<string, string>, cli?: string): WorkerProcess {
  const proc = spawn(process.execPath, [...(cli === undefined ? cliArgs() : [cli]), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return {
    proc,
    pid: proc.pid!,
    output: () => out,
    exited,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      try {
        process.kill(proc.pid!, 'SIGCONT');
      } catch {
        /* already gone */
      }
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** Polls until `fn` returns a truthy value; the timeout only bounds a broken run. */
export async function waitFor<T>(
  what: string | (() => string),
  fn: () => Promise<T | null | undefined | false>,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Speech from Debian's flite, which PocketSphinx recognises well (about 10% word error rate). */
/**
 * E5/S2: a file that begins like a WAV file (so it is not refused at the door) and is broken after
 * its first bytes: the decoder finds it unreadable and its meeting fails with audio.undecodable.
 */
export function brokenWav(): Buffer {
  return Buffer.concat([Buffer.from('RIFF\x24\x00\x00\x00WAVE', 'latin1'), Buffer.alloc(4000, 7)]);
}

/** `seconds` of silence at `rate` Hz on `channels` channels, encoded by Debian's ffmpeg to `name`'s format with `args`. */
export function silenceFile(
  name: string,
  seconds: number,
  args: string[],
  { rate = 16_000, channels = 'mono' }: { rate?: number; channels?: 'mono' | 'stereo' } = {},
): Buffer {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-silence-')), name);
  execFileSync('ffmpeg', [
    '-loglevel',
    'error',
    '-f',
    'lavfi',
    '-i',
    `anullsrc=r=${rate}:cl=${channels}:d=${seconds}`,
    ...args,
    file,
  ]);
  return fs.readFileSync(file);
}

export function speechWav(text: string): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-speech-'));
  const file = path.join(dir, 'speech.wav');
  execFileSync('flite', ['-voice', 'rms', '--setf', 'duration_stretch=1.2', '-t', text, '-o', file]);
  const data = fs.readFileSync(file);
  fs.rmSync(dir, { recursive: true, force: true });
  return data;
}

/** `wav` encoded as WebM/Opus by ffmpeg into a pipe, as a browser's MediaRecorder streams it. */
export function webmOpus(wav: Buffer): Buffer {
  return execFileSync(
    'ffmpeg',
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-i',
      'pipe:0',
      '-c:a',
      'libopus',
      '-b:a',
      '32k',
      '-f',
      'webm',
      'pipe:1',
    ],
    { input: wav, maxBuffer: 64 * 1024 * 1024 },
  );
}

export const SPEECH =
  'The quarterly budget meeting will discuss the marketing plan. We decided to hire two engineers. ' +
  'Alice will send the report to the finance team by Friday.';

/** Creates an upload meeting and sends the recording; returns the meeting id. */
export async function uploadMeeting(h: Harness, wav: Buffer, title = 'test meeting'): Promise<string> {
  const created = await h.request('POST', '/v1/meetings', { source: 'upload', title });
  if (created.status !== 201) throw new Error(`create failed: ${created.text}`);
  const id = created.json.id as string;
  const put = await h.request('PUT', `/v1/meetings/${id}/recording`, wav, { 'content-type': 'audio/wav' });
  if (put.status !== 202) throw new Error(`upload failed: ${put.status} ${put.text}`);
  return id;
}

export async function waitForMeeting(
  h: Harness,
  id: string,
  status: 'complete' | 'failed' = 'complete',
  timeoutMs?: number,
) {
  return waitFor(
    `meeting ${id} to be ${status}`,
    async () => {
      const res = await h.request('GET', `/v1/meetings/${id}`);
      if (res.json?.status === 'failed' && status !== 'failed') {
        throw new Error(`meeting failed: ${JSON.stringify(res.json.failure)}`);
      }
      return res.json?.status === status ? res.json : null;
    },
    timeoutMs,
  );
}

/** A8/J12: no lease token may appear in any API response or captured log line. */
export async function assertNoTokenLeaks(h: Harness): Promise<number> {
  const rows = await h.app.database.db.selectFrom('job_attempts').select('token').execute();
  const haystack = h.logs() + h.responses.join('\n');
  for (const { token } of rows) {
    if (haystack.includes(token)) throw new Error(`lease token ${token.slice(0, 4)}… leaked into output`);
  }
  return rows.length;
}

export function processState(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

/** A supervisor: restarts the worker each time it dies, like systemd's Restart=on-failure. */
export function supervise(
  h: Harness,
  env: Record<string, string>,
): { stop(): Promise<void>; starts(): number } {
  let current: WorkerProcess | null = null;
  let stopped = false;
  let starts = 0;
  const launch = () => {
    if (stopped) return;
    starts++;
    current = h.spawnWorker(env);
    void current.exited.then(() => launch());
  };
  launch();
  return {
    starts: () => starts,
    stop: async () => {
      stopped = true;
      await current?.stop();
    },
  };
}

/** A TCP port free on 127.0.0.1 right now, for a process the test starts. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** A process's resident size now and at its peak, in bytes (from /proc: Linux only). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/**
 * W1: a conversation, one utterance after another with `gapMs` of silence between them (flite,
 * 16-bit mono), and where each utterance lies on its timeline: the truth speaker tests check.
 */
export function conversationWav(
  utterances: string[],
  gapMs = 1_500,
): { wav: Buffer; sampleRate: number; spans: Array<{ startMs: number; endMs: number }> } {
  const parts = utterances.map((text) => {
    const audio = parseWav(speechWav(text));
    if (!audio) throw new Error('flite gave no 16-bit mono WAV');
    return audio;
  });
  const sampleRate = parts[0]!.sampleRate;
  const gap = Math.round((gapMs / 1000) * sampleRate);
  const total = parts.reduce((n, p) => n + p.samples.length, 0) + gap * (parts.length + 1);
  const out = new Int16Array(total);
  const spans: Array<{ startMs: number; endMs: number }> = [];
  let at = gap;
  for (const p of parts) {
    out.set(p.samples, at);
    spans.push({
      startMs: Math.round((at / sampleRate) * 1000),
      endMs: Math.round(((at + p.samples.length) / sampleRate) * 1000),
    });
    at += p.samples.length + gap;
  }
  return { wav: encodeWav(out, sampleRate), sampleRate, spans };
}
