import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { buildApi } from '../../src/api/server.ts';
import type { Harness } from './harness.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CHROMIUM = '/usr/bin/chromium';
/** Screenshots of each test's final screen (gitignored). */
export const OUTPUT_DIR = path.join(ROOT, 'test-output');

/** The flags the issue prescribes, in this order; nothing of Playwright's own defaults is added. */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Builds the web app from the working tree into a fresh folder (vite takes about a second), so a
 * test never runs against a stale dist/web.
 */
export function buildWebApp(): string {
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-web-'));
  execFileSync(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/vite/bin/vite.js'),
      'build',
      '--config',
      'web/vite.config.ts',
      '--outDir',
      outDir,
      '--logLevel',
      'warn',
    ],
    { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  return outDir;
}

export interface WebServer {
  url: string;
  port: number;
  /** Closes the listener: the browser gets connection refused until `start` again. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * The API and the web app from one fastify instance (as `verbatim api` serves them), over real
 * HTTP on 127.0.0.1. `stop` and `start` close and reopen it on the same port.
 */
export async function serveWebApp(h: Harness, webRoot: string): Promise<WebServer> {
  let server: FastifyInstance | null = null;
  let port = 0;
  const start = async () => {
    if (server) return;
    const s = buildApi({
      deps: h.app.deps,
      workspaces: h.app.workspaces,
      people: h.app.people,
      log: h.app.log,
      webRoot,
      connectionString: h.app.database.connectionString,
    });
    await s.listen({ host: '127.0.0.1', port });
    port = (s.server.address() as AddressInfo).port;
    server = s;
  };
  await start();
  return {
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    stop: async () => {
      const s = server;
      server = null;
      if (!s) return;
      s.server.closeAllConnections();
      await s.close();
    },
    start,
  };
}

/** Speech for Chromium's fake microphone: flite (rms), resampled to 48 kHz, the rate Chromium runs. */
export function fakeMicrophoneFile(text: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-mic-'));
  const raw = path.join(dir, 'speech-16k.wav');
  const out = path.join(dir, 'speech.wav');
  execFileSync('flite', ['-voice', 'rms', '--setf', 'duration_stretch=1.2', '-t', text, '-o', raw]);
  execFileSync('ffmpeg', [
    '-hide_banner',
    '-loglevel',
    'error',
    '-i',
    raw,
    // A second of silence after the speech, so the loop does not run the last word into the first.
    '-af',
    'apad=pad_len=16000',
    '-ar',
    '48000',
    '-ac',
    '1',
    '-c:a',
    'pcm_s16le',
    out,
  ]);
  return out;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** The profile folder; `launchChromium({ userDataDir })` opens the same profile again. */
  userDataDir: string;
  close(): Promise<void>;
  /**
   * SIGKILLs the browser and every process it started, as a crash or a killed browser would: no
   * beforeunload, unload or pagehide runs. The profile is kept for a relaunch.
   */
  kill(): Promise<void>;
}

/**
 * The browser process of the Chromium using this profile (the one without `--type=`), found in
 * /proc by its unique --user-data-dir. Playwright starts it detached, so its process group holds
 * the browser and all its helpers.
 */
function browserProcessGroup(userDataDir: string): number {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // exited meanwhile
    }
    if (!args.includes(`--user-data-dir=${userDataDir}`) || args.some((a) => a.startsWith('--type=')))
      continue;
    // Field 5 of /proc/pid/stat, counted after the parenthesised command name, is the pgid.
    const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    if (pgid > 1) return pgid;
  }
  throw new Error(`no Chromium process uses ${userDataDir}`);
}

/**
 * Debian's Chromium driven over the DevTools pipe, with a fresh profile or, given `userDataDir`,
 * one a killed browser left.
 */
export async function launchChromium(
  opts: { microphoneFile?: string; userDataDir?: string } = {},
): Promise<Browser> {
  const userDataDir = opts.userDataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-chromium-'));
  const media = opts.microphoneFile
    ? [
        '--use-fake-ui-for-media-stream',
        '--use-fake-device-for-media-stream',
        `--use-file-for-fake-audio-capture=${opts.microphoneFile}`,
      ]
    : [];
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    ignoreDefaultArgs: true,
    args: [...FLAGS, ...media, '--remote-debugging-pipe', `--user-data-dir=${userDataDir}`, 'about:blank'],
    viewport: { width: 1024, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  let killed = false;
  return {
    context,
    page,
    userDataDir,
    close: async () => {
      if (!killed) await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
    kill: async () => {
      const gone = new Promise<void>((resolve) => context.once('close', () => resolve()));
      process.kill(-browserProcessGroup(userDataDir), 'SIGKILL');
      killed = true;
      await gone;
    },
  };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(OUTPUT_DIR, { recursive: true });
  const file = path.join(OUTPUT_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

export async function signIn(page: Page, baseUrl: string, apiKey: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await signInWithKeyForm(page, apiKey);
  await page.getByRole('heading', { name: 'Meetings' }).waitFor();
}

/** The sign-in page's API key form (behind "Use an API key instead"), filled and sent. */
export async function signInWithKeyForm(page: Page, apiKey: string): Promise<void> {
  const field = page.getByLabel('API key');
  if (!(await field.isVisible())) await page.getByText('Use an API key instead').click();
  await field.fill(apiKey);
  await page.getByRole('button', { name: 'Sign in with the key' }).click();
}

/** Signs in, starts a live meeting from the list, and returns its id. */
export async function startLiveMeeting(
  page: Page,
  baseUrl: string,
  apiKey: string,
  title: string,
): Promise<string> {
  await signIn(page, baseUrl, apiKey);
  await page.getByLabel('Title', { exact: true }).fill(title);
  await page.getByRole('button', { name: /Record/ }).click();
  await page.getByRole('heading', { name: title }).waitFor();
  return /#\/meetings\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
}

/** How many chunks the meeting page says this tab has cut so far. */
export async function chunksCaptured(page: Page): Promise<number> {
  return Number(await page.locator('article').getAttribute('data-chunks-captured'));
}

/** A new workspace and an API key for it, so one test's quota or keys do not touch another's. */
export async function newWorkspaceKey(
  h: Harness,
  name: string,
): Promise<{ workspaceId: string; keyId: string; apiKey: string }> {
  const workspaceId = await h.app.workspaces.createWorkspace(name);
  return h.app.workspaces.createApiKey(workspaceId, name);
}

/** The sequence numbers the server has stored for a live meeting, in order. */
export async function storedChunkSeqs(h: Harness, meetingId: string): Promise<number[]> {
  const rows = await h.app.database.db
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .orderBy('seq')
    .execute();
  return rows.map((r) => r.seq);
}

/** The meeting's status as stored, or `gone` once it is deleted. */
export async function storedMeetingStatus(h: Harness, id: string): Promise<string> {
  const row = await h.app.database.db
    .selectFrom('meetings')
    .select('status')
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.status ?? 'gone';
}

/** E1–E7: the sizes every page is checked at, a desktop and a phone. */
export const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** E6: axe-core on the page as it stands: no serious or critical violation. */
export async function assertAccessible(page: Page, where: string): Promise<void> {
  // Evaluated through DevTools, as an extension would: the app's CSP (rightly) refuses inline scripts.
  await page.evaluate(fs.readFileSync(AXE, 'utf8'));
  const found = await page.evaluate<string[]>(`(async () => {
    const result = await window.axe.run();
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => v.impact + ' ' + v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', '));
  })()`);
  assert.deepEqual(found, [], `${where}: axe-core found serious or critical violations`);
}
