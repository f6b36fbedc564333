/**
 * (k) Memory against the recording's length (J19/B10): one `verbatim start` process (api
 * and worker in one) on this machine, idle, then uploading and splitting a recording of 10 min, 1 h
 * and 6 h (the flite sentences of (i), repeated; sent as a stream, never built whole), transcribed
 * by an instant recogniser (a Whisper-compatible server on 127.0.0.1 that answers at once), until
 * the meeting is complete. A fresh process per length, so each peak is its own. The figure is the
 * process's peak resident size (VmHWM) over its idle size (VmRSS once it answers /healthz).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { startFakeWhisper } from '../test/support/fake-openai.ts';
import { freePort, memoryOf, spawnVerbatim } from '../test/support/harness.ts';
import { sentenceAudio } from './live-captions.ts';

const RATE = 16_000;
const MiB = 1024 * 1024;

export interface MemoryStep {
  minutes: number;
  uploadBytes: number;
  idleMiB: number;
  peakMiB: number;
  growthMiB: number;
  /** The highest resident size sampled (every 100 ms) while the body was sent, and after it. */
  uploadPeakMiB: number;
  processPeakMiB: number;
  completeS: number;
  windows: number;
}

/** PUTs `minutes` of the sentences, repeated, as one WAV body written piece by piece. */
function uploadStream(url: string, apiKey: string, once: Int16Array, minutes: number): Promise<number> {
  const total = minutes * 60 * RATE;
  const header = encodeWav(new Int16Array(0), RATE);
  header.writeUInt32LE(36 + total * 2, 4);
  header.writeUInt32LE(total * 2, 40);
  const bytes = header.length + total * 2;
  const pcm = Buffer.from(once.buffer, once.byteOffset, once.byteLength);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'audio/wav', 'content-length': bytes },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () =>
        res.statusCode === 202 ? resolve(bytes) : reject(new Error(`upload: ${res.statusCode} ${body}`)),
      );
    });
    let left = total * 2;
    let at = 0;
    const write = () => {
      if (req.write(header)) more();
      else req.once('drain', more);
    };
    const more = () => {
      while (left > 0) {
        const n = Math.min(left, pcm.length - at, MiB);
        const piece = pcm.subarray(at, at + n);
        at = (at + n) % pcm.length;
        left -= n;
        if (!req.write(piece)) {
          req.once('drain', more);
          return;
        }
      }
      req.end();
    };
    write();
  });
}

export async function memoryStep(minutes: number): Promise<MemoryStep> {
  const { samples: once } = sentenceAudio();
  const whisper = await startFakeWhisper(() => 'ok');
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-memory-'));
  const env: Record<string, string> = {
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_ASR: 'whisper',
    VERBATIM_WHISPER_URL: whisper.url,
    VERBATIM_EGRESS_ALLOW: '127.0.0.0/8',
    VERBATIM_MAX_UPLOAD_BYTES: String(2048 * MiB),
    VERBATIM_MAX_AUDIO_SECONDS: String(7 * 3600),
  };
  // The workspace and key, made through the app on the same database.
  const config = loadConfig(env);
  const app = await openApp(config, { logger: createLogger('error', 'verbatim-bench') });
  const workspaceId = await app.workspaces.createWorkspace('bench');
  const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
  const port = await freePort();
  const proc = spawnVerbatim(['start'], { ...env, VERBATIM_PORT: String(port) });
  const base = `http://127.0.0.1:${port}`;
  const auth = { authorization: `Bearer ${apiKey}` };
  try {
    const deadline = Date.now() + 120_000;
    while (!(await fetch(`${base}/healthz`).catch(() => null))?.ok) {
      if (Date.now() > deadline || proc.proc.exitCode !== null) throw new Error(`start: ${proc.output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const idle = memoryOf(proc.pid);
    const created = await fetch(`${base}/v1/meetings`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'upload', title: `${minutes} minutes` }),
    });
    const id = ((await created.json()) as { id: string }).id;
    const t = performance.now();
    const sampled = { upload: 0, process: 0, phase: 'upload' as 'upload' | 'process' };
    const sampler = setInterval(() => {
      const rss = memoryOf(proc.pid).rss;
      sampled[sampled.phase] = Math.max(sampled[sampled.phase], rss);
    }, 100);
    const uploadBytes = await uploadStream(
      `${base}/v1/meetings/${id}/recording`,
      apiKey,
      once,
      minutes,
    ).finally(() => (sampled.phase = 'process'));
    let meeting: { status: string; windows?: { total: number } } = { status: 'processing' };
    while (meeting.status !== 'complete') {
      if (meeting.status === 'failed') throw new Error(`the ${minutes}-minute meeting failed`);
      if (proc.proc.exitCode !== null) throw new Error(`the process exited: ${proc.output().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 500));
      meeting = (await (
        await fetch(`${base}/v1/meetings/${id}`, { headers: auth })
      ).json()) as typeof meeting;
    }
    const completeS = (performance.now() - t) / 1000;
    clearInterval(sampler);
    const end = memoryOf(proc.pid);
    return {
      minutes,
      uploadBytes,
      idleMiB: idle.rss / MiB,
      peakMiB: end.peak / MiB,
      growthMiB: (end.peak - idle.rss) / MiB,
      uploadPeakMiB: sampled.upload / MiB,
      processPeakMiB: sampled.process / MiB,
      completeS,
      windows: meeting.windows?.total ?? 0,
    };
  } finally {
    await proc.stop();
    await app.close();
    await whisper.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
