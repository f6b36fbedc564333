/**
 * (l) Upload speed against the machine's limit: a 10-minute recording (the flite
 * sentences of (i), repeated) uploaded through Verbatim's API to an api and a worker on this machine
 * with the defaults (real PocketSphinx; transcription concurrency `auto`, one per CPU), timed from
 * the start of the upload to the published transcript and to `complete`, next to the recogniser
 * alone on the same whole file, in the same run. The minutes are the offline extractive writer,
 * which takes milliseconds; the target is on the transcript.
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

const RATE = 16_000;

export interface UploadSpeed {
  audioSeconds: number;
  cpus: number;
  concurrency: number;
  /** The recogniser alone on the whole file. */
  recogniserS: number;
  /** Upload start → transcript published (meeting.transcribed), and → complete. */
  transcribedS: number;
  completeS: number;
  windows: number;
  /** Where the time went: upload start → first window attempt started, the window attempts' own times, last window attempt ended → transcript. */
  phases: { firstWindowS: number; windowS: number[]; afterLastWindowS: number };
}

export async function uploadSpeed(minutes = 10): Promise<UploadSpeed> {
  const { samples: once } = sentenceAudio();
  const total = minutes * 60 * RATE;
  const samples = new Int16Array(total);
  for (let at = 0; at < total; at += once.length)
    samples.set(once.subarray(0, Math.min(once.length, total - at)), at);
  const wav = encodeWav(samples, RATE);

  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-upload-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
  });
  const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
  try {
    // The recogniser alone first, with nothing else running.
    let t = performance.now();
    await app.deps.transcriber.transcribe({ wav, language: null });
    const recogniserS = (performance.now() - t) / 1000;

    const worker = await startAppWorker(app);
    const api = buildAppApi(app);
    await api.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
    try {
      const workspaceId = await app.workspaces.createWorkspace('bench');
      const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
      const auth = { authorization: `Bearer ${apiKey}` };
      const created = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'upload', title: 'ten minutes' }),
      });
      const id = ((await created.json()) as { id: string }).id;
      t = performance.now();
      const wallStart = Date.now();
      const put = await fetch(`${base}/v1/meetings/${id}/recording`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'audio/wav' },
        body: wav,
      });
      if (put.status !== 202) throw new Error(`upload: ${put.status} ${await put.text()}`);
      let transcribedS = Number.NaN;
      let completeS = Number.NaN;
      const deadline = performance.now() + 1_800_000;
      while (Number.isNaN(completeS) && performance.now() < deadline) {
        const m = await app.database.db
          .selectFrom('meetings')
          .select(['status', 'transcript_completed_at'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const now = (performance.now() - t) / 1000;
        if (m.transcript_completed_at && Number.isNaN(transcribedS)) transcribedS = now;
        if (m.status === 'complete') completeS = now;
        if (m.status === 'failed') throw new Error('the meeting failed');
        await new Promise((r) => setTimeout(r, 100));
      }
      const windows = await app.database.db
        .selectFrom('windows')
        .select('id')
        .where('meeting_id', '=', id)
        .where('status', '=', 'transcribed')
        .execute();
      const attempts = await app.database.db
        .selectFrom('job_attempts')
        .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
        .select(['job_attempts.started_at', 'job_attempts.ended_at'])
        .where('jobs.meeting_id', '=', id)
        .where('jobs.kind', '=', 'transcribe-window')
        .where('job_attempts.status', '=', 'completed')
        .execute();
      const at = (d: Date | string | null) => (new Date(d ?? Number.NaN).getTime() - wallStart) / 1000;
      const phases = {
        firstWindowS: Math.min(...attempts.map((a) => at(a.started_at))),
        windowS: attempts.map((a) => at(a.ended_at) - at(a.started_at)).sort((a, b) => a - b),
        afterLastWindowS: transcribedS - Math.max(...attempts.map((a) => at(a.ended_at))),
      };
      return {
        phases,
        audioSeconds: total / RATE,
        cpus: os.availableParallelism(),
        concurrency: config.concurrency.transcription,
        recogniserS,
        transcribedS,
        completeS,
        windows: windows.length,
      };
    } finally {
      await api.close();
      await worker.stop(5_000);
    }
  } finally {
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
