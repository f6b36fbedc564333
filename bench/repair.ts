/**
 * (h) Repair latency: a chunk that arrives after its meeting completed → the transcript
 * revised (its repair committed), with an instant recogniser, in-process. Next to it, in the same
 * run and on the same worker, the on-time path: a chunk that fills a window → that window
 * transcribed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, startAppWorker, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { endMeeting, storeChunk } from '../src/meetings/live.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { InstantTranscriber, silentWav } from './fixtures.ts';

const CHUNKS = 12;
const LATE = 5;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > 60_000) throw new Error(`${what} did not happen within 60 s`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function repairLatency(samples: number): Promise<{ repair: number[]; onTime: number[] }> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-repair-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_WINDOW_SECONDS: '20',
    VERBATIM_CLOSEOUT_GRACE_SECONDS: '0.2',
    VERBATIM_GAP_PATIENCE_SECONDS: '0',
  });
  const app = await openApp(config, {
    transcriber: new InstantTranscriber(),
    logger: createLogger(config.logLevel, 'verbatim-bench'),
  });
  const worker = await startAppWorker(app);
  try {
    const workspaceId = await app.workspaces.createWorkspace('bench');
    const repair: number[] = [];
    const onTime: number[] = [];
    for (let i = 0; i < samples; i++) {
      onTime.push(await onTimeWindow(app, workspaceId, i));
      const id = await completedWithout(app, workspaceId, i);
      const started = performance.now();
      await storeChunk(app.deps, workspaceId, id, String(LATE), silentWav(5));
      await until('the transcript revision', async () => {
        const row = await app.deps.meetings.get(workspaceId, id);
        return row.transcript_revision === 1;
      });
      repair.push((performance.now() - started) / 1000);
    }
    return { repair, onTime };
  } finally {
    await worker.stop(5_000);
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A completed live meeting of 12 chunks, chunk 5 never sent. */
async function completedWithout(app: App, workspaceId: string, i: number): Promise<string> {
  const meeting = await app.deps.meetings.create(workspaceId, {
    source: 'live',
    title: `repair ${i}`,
    language: null,
    windowMs: app.config.windowMs,
  });
  for (let seq = 0; seq < CHUNKS; seq++) {
    if (seq !== LATE) await storeChunk(app.deps, workspaceId, meeting.id, String(seq), silentWav(5));
  }
  await endMeeting(app.deps, workspaceId, meeting.id, CHUNKS);
  await until('the meeting to complete', async () => {
    const row = await app.deps.meetings.get(workspaceId, meeting.id);
    if (row.status === 'failed') throw new Error(`meeting failed: ${row.failure_code ?? ''}`);
    return row.status === 'complete';
  });
  return meeting.id;
}

/** The chunk that fills a 20 s window (the fourth of 5 s) → that window transcribed. */
async function onTimeWindow(app: App, workspaceId: string, i: number): Promise<number> {
  const meeting = await app.deps.meetings.create(workspaceId, {
    source: 'live',
    title: `on time ${i}`,
    language: null,
    windowMs: app.config.windowMs,
  });
  for (let seq = 0; seq < 3; seq++)
    await storeChunk(app.deps, workspaceId, meeting.id, String(seq), silentWav(5));
  const started = performance.now();
  await storeChunk(app.deps, workspaceId, meeting.id, '3', silentWav(5));
  await until(
    'the window to be transcribed',
    async () => (await app.deps.meetings.windowCounts(meeting.id)).transcribed >= 1,
  );
  const took = (performance.now() - started) / 1000;
  await endMeeting(app.deps, workspaceId, meeting.id, 4);
  return took;
}
