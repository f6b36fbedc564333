/**
 * (d) Close-out latency: End → complete, minus the grace period, for a live meeting of
 * three 5 s chunks, with an instant recogniser and the extractive minutes writer, in-process.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, startAppWorker } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { endMeeting, storeChunk } from '../src/meetings/live.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { InstantTranscriber, silentWav } from './fixtures.ts';

const GRACE_S = 0.5;

export async function closeOutLatency(samples: number): Promise<number[]> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-closeout-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_CLOSEOUT_GRACE_SECONDS: String(GRACE_S),
  });
  const app = await openApp(config, {
    transcriber: new InstantTranscriber(),
    logger: createLogger(config.logLevel, 'verbatim-bench'),
  });
  const worker = await startAppWorker(app);
  try {
    const workspaceId = await app.workspaces.createWorkspace('bench');
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const meeting = await app.deps.meetings.create(workspaceId, {
        source: 'live',
        title: `close-out ${i}`,
        language: null,
        windowMs: config.windowMs,
      });
      for (let seq = 0; seq < 3; seq++) {
        await storeChunk(app.deps, workspaceId, meeting.id, String(seq), silentWav(5));
      }
      const started = performance.now();
      await endMeeting(app.deps, workspaceId, meeting.id);
      for (;;) {
        const row = await app.deps.meetings.get(workspaceId, meeting.id);
        if (row.status === 'complete') break;
        if (row.status === 'failed') throw new Error(`close-out failed: ${row.failure_code ?? ''}`);
        if (performance.now() - started > 60_000) throw new Error('close-out did not finish within 60 s');
        await new Promise((r) => setTimeout(r, 10));
      }
      latencies.push((performance.now() - started) / 1000 - GRACE_S);
    }
    return latencies;
  } finally {
    await worker.stop(5_000);
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
