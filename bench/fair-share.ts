/**
 * (o) A quiet workspace under a noisy one (F5). One api and one worker in this process with the
 * defaults (real PocketSphinx, one transcription slot per CPU). In the same run:
 * - alone: a quiet workspace's 30 s upload, upload start → complete; and its live meeting's
 *   30 s (six 5 s chunks sent at once), End → complete;
 * - loaded: a noisy workspace uploads `noisyHours` of audio (silent FLACs of five hours at most,
 *   which its split turns into 60 s windows); once every window is cut and queued, the same two
 *   quiet measurements again, with how many of the noisy windows were still waiting;
 * - capped: the noisy workspace's running cap set one below the transcription slots, the same two
 *   measurements again under the same backlog.
 * The target: the loaded upload within 1.5 × alone, End → complete within 2 × alone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildAppApi, openApp, startAppWorker } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { sentenceAudio } from './live-captions.ts';
import { queueNoisyBacklog } from './noisy-backlog.ts';

const RATE = 16_000;

export interface FairShare {
  noisyHours: number;
  noisyWindows: number;
  alone: Quiet;
  loaded: Quiet & { noisyWaitingBefore: number; noisyWaitingAfter: number };
  /** The same under the same backlog, with the noisy workspace capped at `cap` running jobs. */
  capped: Quiet & { cap: number };
}

/** The quiet upload's time, and its window's: due → claimed (a slot freed), and claimed → done. */
export interface Quiet {
  uploadS: number;
  windowWaitS: number;
  windowRunS: number;
  liveEndS: number;
}

export async function fairShare(noisyHours = 20): Promise<FairShare> {
  const { samples: once } = sentenceAudio();
  const speech = new Int16Array(30 * RATE);
  for (let at = 0; at < speech.length; at += once.length)
    speech.set(once.subarray(0, Math.min(once.length, speech.length - at)), at);
  const wav = encodeWav(speech, RATE);
  const chunks = Array.from({ length: 6 }, (_, i) =>
    encodeWav(speech.subarray(i * 5 * RATE, (i + 1) * 5 * RATE), RATE),
  );

  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-fair-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
  });
  const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
  const worker = await startAppWorker(app);
  const api = buildAppApi(app);
  await api.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  const keyOf = async (name: string) => {
    const ws = await app.workspaces.createWorkspace(name);
    return (await app.workspaces.createApiKey(ws, name)).apiKey;
  };
  const call = async (key: string, method: string, url: string, body?: Buffer | object, type?: string) => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': type ?? 'application/json' }),
      },
      body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
  const statusOf = async (id: string) =>
    await app.database.db
      .selectFrom('meetings')
      .select(['status', 'windows_cut_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  const until = async (what: string, ok: () => Promise<boolean>, limitMs = 3_600_000) => {
    const deadline = Date.now() + limitMs;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const complete = (id: string) =>
    until(`meeting ${id} to complete`, async () => {
      const s = (await statusOf(id)).status;
      if (s === 'failed') throw new Error(`meeting ${id} failed`);
      return s === 'complete';
    });
  const quiet = await keyOf('quiet');
  const upload = async (key: string, body: Buffer, type: string, title: string) => {
    const { id } = (await call(key, 'POST', '/v1/meetings', { source: 'upload', title })) as { id: string };
    await call(key, 'PUT', `/v1/meetings/${id}/recording`, body, type);
    return id;
  };
  const quietUpload = async () => {
    const t = performance.now();
    const id = await upload(quiet, wav, 'audio/wav', 'quiet upload');
    await complete(id);
    const uploadS = (performance.now() - t) / 1000;
    const w = await app.database.db
      .selectFrom('jobs')
      .innerJoin('job_attempts', 'job_attempts.job_id', 'jobs.id')
      .select(['jobs.created_at', 'job_attempts.started_at', 'job_attempts.ended_at'])
      .where('jobs.meeting_id', '=', id)
      .where('jobs.kind', '=', 'transcribe-window')
      .orderBy('job_attempts.started_at')
      .executeTakeFirstOrThrow();
    const ms = (d: Date | string | null) => new Date(d ?? Number.NaN).getTime();
    return {
      uploadS,
      windowWaitS: (ms(w.started_at) - ms(w.created_at)) / 1000,
      windowRunS: (ms(w.ended_at) - ms(w.started_at)) / 1000,
    };
  };
  const quietLive = async () => {
    const { id } = (await call(quiet, 'POST', '/v1/meetings', { source: 'live', title: 'quiet live' })) as {
      id: string;
    };
    for (const [seq, chunk] of chunks.entries())
      await call(quiet, 'PUT', `/v1/meetings/${id}/chunks/${seq}`, chunk, 'audio/wav');
    const t = performance.now();
    await call(quiet, 'POST', `/v1/meetings/${id}/end`, {});
    await complete(id);
    return (performance.now() - t) / 1000;
  };
  const runningOf = async (ws: string) => {
    const row = await app.database.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('workspace_id', '=', ws)
      .where('queue', 'in', ['intake', 'transcription'])
      .where('status', '=', 'running')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  };
  try {
    const alone = { ...(await quietUpload()), liveEndS: await quietLive() };

    const noisy = await queueNoisyBacklog(app, base, noisyHours);
    const noisyWaitingBefore = await noisy.waiting();
    const loadedUpload = await quietUpload();
    const liveEndS = await quietLive();
    const noisyWaitingAfter = await noisy.waiting();
    // The same again with the noisy workspace's running cap one below the transcription slots
    // (verbatim workspaces running-cap): a slot is always free for another workspace.
    const cap = Math.max(1, config.concurrency.transcription - 1);
    await app.workspaces.setMaxRunningJobs(noisy.workspaceId, cap);
    await until(
      'the noisy workspace to run within its cap',
      async () => (await runningOf(noisy.workspaceId)) <= cap,
    );
    const capped = { ...(await quietUpload()), liveEndS: await quietLive(), cap };
    return {
      noisyHours,
      noisyWindows: noisy.windows,
      alone,
      loaded: { ...loadedUpload, liveEndS, noisyWaitingBefore, noisyWaitingAfter },
      capped,
    };
  } finally {
    await api.close();
    await worker.stop(5_000);
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
