import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import ffmpegInstaller from '@ffmpeg-installer/ffmpeg';
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
    const s = buildApi({ deps: h.app.deps, workspaces: h.app.workspaces, log: h.app.log, webRoot });
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
  execFileSync(ffmpegInstaller.path, [
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
  close(): Promise<void>;
}

/** Debian's Chromium with a fresh profile, driven over the DevTools pipe. */
export async function launchChromium(opts: { microphoneFile?: string } = {}): Promise<Browser> {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-chromium-'));
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
  return {
    context,
    page,
    close: async () => {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
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
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Meetings' }).waitFor();
}
