/**
 * Shared pieces of the benchmark: an instant recogniser, meetings seeded straight into the database
 * (as `splitRecordingJob` would leave them), polling and small statistics helpers.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type pg from 'pg';
import type { App } from '../src/app.ts';
import { MeetingSource, MeetingStatus, WindowStatus } from '../src/domain/status.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { blobKey } from '../src/meetings/intake.ts';
import { createTranscribeJob } from '../src/meetings/transcribe-job.ts';
import type { TestDatabase } from '../test/support/db.ts';
import type { TranscribeRequest, Transcriber, TranscriptSegment } from '../src/ports.ts';

/** Returns one segment at once: the benchmark measures the job machinery, not recognition. */
export class InstantTranscriber implements Transcriber {
  readonly name = 'instant';

  transcribe(_request: TranscribeRequest): Promise<TranscriptSegment[]> {
    return Promise.resolve([{ startMs: 0, endMs: 100, text: 'benchmark' }]);
  }
}

/** 0.1 s of 16 kHz silence: a valid window WAV for any recogniser. */
export function silentWav(seconds = 0.1): Buffer {
  return encodeWav(new Int16Array(Math.round(16_000 * seconds)), 16_000);
}

export interface SeedOptions {
  workspaceId: string;
  windows: number;
  /** Pre-chosen so a fault can match it before the meeting exists. */
  meetingId?: string;
  /** Windows (and their jobs) committed per transaction. */
  batch?: number;
}

/**
 * A meeting in `processing` with `windows` pending windows, each with its stored WAV and one
 * `transcribe-window` job created through the job store, like the split step does.
 */
export async function seedMeeting(app: App, opts: SeedOptions): Promise<string> {
  const { deps } = app;
  const meetingId = opts.meetingId ?? randomUUID();
  const windowMs = 1000;
  const wav = silentWav();
  await deps.db
    .insertInto('meetings')
    .values({
      id: meetingId,
      workspace_id: opts.workspaceId,
      source: MeetingSource.upload,
      title: 'benchmark meeting',
      language: 'en',
      status: MeetingStatus.processing,
      window_ms: windowMs,
      duration_ms: opts.windows * windowMs,
      processing_at: sql<Date>`now()`,
    })
    .execute();

  const batch = opts.batch ?? 250;
  for (let from = 0; from < opts.windows; from += batch) {
    const planned: Array<{ index: number; key: string; sha256: string; blobId: string; windowId: string }> =
      [];
    for (let index = from; index < Math.min(opts.windows, from + batch); index++) {
      const { key, sha256 } = blobKey(opts.workspaceId, meetingId, `window-${index}`, wav);
      await deps.blobs.put(key, wav);
      planned.push({ index, key, sha256, blobId: randomUUID(), windowId: randomUUID() });
    }
    await deps.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('blobs')
        .values(
          planned.map((w) => ({
            id: w.blobId,
            workspace_id: opts.workspaceId,
            meeting_id: meetingId,
            kind: 'window',
            object_key: w.key,
            sha256: w.sha256,
            size_bytes: wav.length,
            content_type: 'audio/wav',
          })),
        )
        .execute();
      await trx
        .insertInto('windows')
        .values(
          planned.map((w) => ({
            id: w.windowId,
            workspace_id: opts.workspaceId,
            meeting_id: meetingId,
            index: w.index,
            start_ms: w.index * windowMs,
            end_ms: (w.index + 1) * windowMs,
            blob_id: w.blobId,
            status: WindowStatus.pending,
          })),
        )
        .execute();
      for (const w of planned) {
        await createTranscribeJob(deps, trx, opts.workspaceId, meetingId, w.windowId, w.index, 'bench');
      }
    });
  }
  return meetingId;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a rejection naming `what` after `ms`; the timer never outlives the race. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `fn` every `everyMs` until it returns a value other than null; throws after `timeoutMs`. */
export async function pollUntil<T>(
  what: string,
  fn: () => Promise<T | null>,
  timeoutMs: number,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * Watches a countdown (items left) and times it. The rate is taken from the first poll that saw
 * items finished to the last, so one-off start-up (migration checks, LISTEN, first connections) is
 * left out of it; `wallMs` includes it.
 */
export async function timeDrain(
  total: number,
  remaining: () => Promise<number>,
  timeoutMs: number,
  start = performance.now(),
): Promise<{ wallMs: number; startupMs: number; rate: number }> {
  let first: { at: number; done: number } | null = null;
  await pollUntil(
    'the queue to drain',
    async () => {
      const left = await remaining();
      if (first === null && left < total) first = { at: performance.now(), done: total - left };
      return left === 0 ? true : null;
    },
    timeoutMs,
    10,
  );
  const end = performance.now();
  let from: { at: number; done: number } = first ?? { at: start, done: 0 };
  // Everything finished before the first poll: only the wall time is left to go by.
  if (from.done === total) from = { at: start, done: 0 };
  const rate = (total - from.done) / Math.max(1e-3, (end - from.at) / 1000);
  return { wallMs: end - start, startupMs: from.at - start, rate };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function max(values: number[]): number {
  return values.length === 0 ? Number.NaN : Math.max(...values);
}

export async function countOf(client: pg.Client, query: string, params: unknown[] = []): Promise<number> {
  const result = await client.query<{ n: number }>(query, params);
  return Number(result.rows[0]?.n ?? 0);
}

/**
 * pg's Pool.end() resolves before its connections have finished closing; dropping the database
 * `with (force)` at that moment makes the app log terminated connections. Wait for them first.
 */
export async function dropWhenIdle(probe: pg.Client, db: TestDatabase): Promise<void> {
  try {
    const deadline = Date.now() + 3_000;
    while (Date.now() < deadline) {
      const others = await countOf(
        probe,
        'select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
      );
      if (others === 0) break;
      await sleep(50);
    }
  } catch {
    /* the probe never connected: nothing to wait for */
  }
  await probe.end().catch(() => undefined);
  await db.drop();
}
