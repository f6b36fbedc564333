/**
 * (f) Many meetings at once: M live meetings stream their 5 s chunks concurrently through
 * `storeChunk` (in-process, as the chunk endpoint calls it) in accelerated time, while the app's
 * worker transcribes the windows they cut with an instant recogniser. Measured from the database:
 * windows transcribed per second (first window cut to last window transcribed) and, per window,
 * the lag from its slot filling (the window row is cut in the transaction that stores the chunk
 * completing the slot) to its transcript commit. Each meeting is ended after its last chunk and the
 * run waits for every meeting to complete.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openApp, startAppWorker } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { JobKind, MeetingStatus } from '../src/domain/status.ts';
import { createLogger } from '../src/log.ts';
import { endMeeting, storeChunk } from '../src/meetings/live.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { countOf, dropWhenIdle, InstantTranscriber, pollUntil, silentWav, sleep } from './fixtures.ts';

const CHUNK_S = 5;
/** Short, so the run ends soon after the last chunk; they only affect the close-out, not the windows. */
const CLOSEOUT_GRACE_S = 0.5;
const CLOSEOUT_POLL_S = 0.5;
const COMPLETE_TIMEOUT_MS = 600_000;

export interface ManyMeetingsOptions {
  meetings: number;
  windowsPerMeeting: number;
  concurrency: number;
  /** Pause between one meeting's chunks; 0 streams as fast as storeChunk returns. */
  chunkGapMs: number;
}

export interface ManyMeetingsResult {
  /** Live-cut windows (those with a transcribe-window job), all transcribed. */
  windows: number;
  windowSeconds: number;
  chunks: number;
  /** Windows per second from the first window cut to the last window transcribed. */
  rate: number;
  /** Windows per second cut by the chunk stream, first cut to last cut. */
  cutRate: number;
  lagP50Ms: number;
  lagP95Ms: number;
  lagMaxMs: number;
  notes: string[];
}

/** Nearest-rank percentile of `values` (0 < p ≤ 100). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]!;
}

export async function manyMeetings(opts: ManyMeetingsOptions): Promise<ManyMeetingsResult> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-many-'));
  const probe = new pg.Client({ connectionString: db.url });
  try {
    await probe.connect();
    const config = loadConfig({
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dataDir,
      VERBATIM_LOG_LEVEL: 'warn',
      VERBATIM_TRANSCRIPTION_CONCURRENCY: String(opts.concurrency),
      VERBATIM_CHUNK_SECONDS: String(CHUNK_S),
      VERBATIM_CLOSEOUT_GRACE_SECONDS: String(CLOSEOUT_GRACE_S),
      VERBATIM_CLOSEOUT_POLL_SECONDS: String(CLOSEOUT_POLL_S),
    });
    const windowSeconds = config.windowMs / 1000;
    const chunksPerWindow = windowSeconds / CHUNK_S;
    if (!Number.isInteger(chunksPerWindow)) throw new Error('the window must be a whole number of chunks');
    const chunksPerMeeting = chunksPerWindow * opts.windowsPerMeeting;
    const expected = opts.meetings * opts.windowsPerMeeting;

    const app = await openApp(config, {
      transcriber: new InstantTranscriber(),
      logger: createLogger(config.logLevel, 'verbatim-bench'),
    });
    try {
      const workspaceId = await app.workspaces.createWorkspace('bench');
      const meetingIds: string[] = [];
      for (let i = 0; i < opts.meetings; i++) {
        const meeting = await app.deps.meetings.create(workspaceId, {
          source: 'live',
          title: `many ${i}`,
          language: null,
          windowMs: config.windowMs,
        });
        meetingIds.push(meeting.id);
      }
      const chunk = silentWav(CHUNK_S);
      const storeMs: number[] = [];
      const cutStoreMs: number[] = [];
      /** Epoch ms at which the storeChunk that cut window `index` of a meeting returned (committed). */
      const cutCommittedAt = new Map<string, number>();

      const worker = await startAppWorker(app);
      const start = performance.now();
      let streamedMs = 0;
      let completedMs = 0;
      try {
        await Promise.all(
          meetingIds.map(async (meetingId) => {
            for (let seq = 0; seq < chunksPerMeeting; seq++) {
              if (opts.chunkGapMs > 0 && seq > 0) await sleep(opts.chunkGapMs);
              const t0 = performance.now();
              await storeChunk(app.deps, workspaceId, meetingId, String(seq), chunk);
              const took = performance.now() - t0;
              storeMs.push(took);
              if ((seq + 1) % chunksPerWindow === 0) {
                cutStoreMs.push(took);
                cutCommittedAt.set(
                  `${meetingId}:${(seq + 1) / chunksPerWindow - 1}`,
                  performance.timeOrigin + t0 + took,
                );
              }
            }
            await endMeeting(app.deps, workspaceId, meetingId);
          }),
        );
        streamedMs = performance.now() - start;
        await pollUntil(
          'every meeting to complete',
          async () => {
            const failed = await countOf(probe, `select count(*)::int as n from meetings where status = $1`, [
              MeetingStatus.failed,
            ]);
            if (failed > 0) throw new Error(`${failed} meeting(s) failed`);
            const done = await countOf(probe, `select count(*)::int as n from meetings where status = $1`, [
              MeetingStatus.complete,
            ]);
            return done === opts.meetings ? true : null;
          },
          COMPLETE_TIMEOUT_MS,
          50,
        );
        completedMs = performance.now() - start;
      } finally {
        await worker.stop(5_000);
      }

      // Live-cut windows are the ones with a transcribe-window job; the close-out's last stretch
      // (windows without jobs, transcribed by the close-out itself) is left out.
      const live = await probe.query<{
        meeting_id: string;
        index: number;
        status: string;
        lag_ms: number;
        wait_ms: number;
        created_epoch_ms: number;
        claimed_epoch_ms: number;
        attempts: number;
      }>(
        `select w.meeting_id, w.index, w.status,
                (extract(epoch from w.transcribed_at - w.created_at) * 1000)::float8 as lag_ms,
                (extract(epoch from a.first_start - w.created_at) * 1000)::float8 as wait_ms,
                (extract(epoch from w.created_at) * 1000)::float8 as created_epoch_ms,
                (extract(epoch from a.first_start) * 1000)::float8 as claimed_epoch_ms,
                a.attempts
           from windows w
           join jobs j on j.subject_id = w.id and j.kind = $1
           cross join lateral (select min(started_at) as first_start, count(*)::int as attempts
                                 from job_attempts where job_id = j.id) a`,
        [JobKind.transcribeWindow],
      );
      const span = await probe.query<{ rate_span_s: number; cut_span_s: number; tail: number }>(
        `select extract(epoch from max(w.transcribed_at) - min(w.created_at))::float8 as rate_span_s,
                extract(epoch from max(w.created_at) - min(w.created_at))::float8 as cut_span_s,
                (select count(*)::int from windows w2
                  where not exists (select 1 from jobs j2 where j2.subject_id = w2.id)) as tail
           from windows w
           join jobs j on j.subject_id = w.id and j.kind = $1`,
        [JobKind.transcribeWindow],
      );
      const rows = live.rows;
      const transcribed = rows.filter((r) => r.status === 'transcribed').length;
      if (rows.length !== expected || transcribed !== expected) {
        throw new Error(
          `expected ${expected} live windows transcribed, found ${transcribed} of ${rows.length}`,
        );
      }
      const { rate_span_s: rateSpanS, cut_span_s: cutSpanS, tail } = span.rows[0]!;
      const lags = rows.map((r) => r.lag_ms);
      const inside = rows.map((r) => r.lag_ms - r.wait_ms);
      // The cut transaction's commit is seen from the client (same host, so the same clock).
      const cutting: number[] = [];
      const queued: number[] = [];
      for (const r of rows) {
        const committed = cutCommittedAt.get(`${r.meeting_id}:${r.index}`);
        if (committed === undefined)
          throw new Error(`window ${r.index} of ${r.meeting_id} was not cut by a chunk`);
        cutting.push(committed - r.created_epoch_ms);
        queued.push(r.claimed_epoch_ms - committed);
      }
      const retried = rows.filter((r) => r.attempts !== 1).length;
      const chunks = opts.meetings * chunksPerMeeting;
      const cutRate = (expected - 1) / Math.max(1e-3, cutSpanS);
      const ms = (v: number) => v.toFixed(0);
      return {
        windows: expected,
        windowSeconds,
        chunks,
        rate: expected / Math.max(1e-3, rateSpanS),
        cutRate,
        lagP50Ms: percentile(lags, 50),
        lagP95Ms: percentile(lags, 95),
        lagMaxMs: percentile(lags, 100),
        notes: [
          `${opts.meetings} meetings × ${chunksPerMeeting} chunks of ${CHUNK_S} s = ${opts.windowsPerMeeting} ` +
            `windows of ${windowSeconds} s each; ${opts.chunkGapMs > 0 ? `${opts.chunkGapMs} ms between a meeting's chunks` : 'no pacing'}; ` +
            `close-out grace ${CLOSEOUT_GRACE_S} s and poll ${CLOSEOUT_POLL_S} s (shortened)`,
          `streamed ${chunks} chunks in ${(streamedMs / 1000).toFixed(1)} s ` +
            `(${(chunks / (streamedMs / 1000)).toFixed(0)} chunks/s, ` +
            `${((chunks * CHUNK_S) / (streamedMs / 1000)).toFixed(0)}× real time over all meetings); ` +
            `windows cut at ${cutRate.toFixed(1)}/s (first cut to last); ` +
            `all meetings complete after ${(completedMs / 1000).toFixed(1)} s`,
          `storeChunk p50 ${ms(percentile(storeMs, 50))} ms, p95 ${ms(percentile(storeMs, 95))} ms; ` +
            `chunks that fill a slot (cut a window) p50 ${ms(percentile(cutStoreMs, 50))} ms, ` +
            `p95 ${ms(percentile(cutStoreMs, 95))} ms`,
          `lag = window created_at → transcribed_at (the now() of the cutting and the committing ` +
            `transaction); of it: cut transaction start → its commit (client clock) p50 ` +
            `${ms(percentile(cutting, 50))} ms, p95 ${ms(percentile(cutting, 95))} ms; commit → first claim ` +
            `p50 ${ms(percentile(queued, 50))} ms, p95 ${ms(percentile(queued, 95))} ms; claim → transcript ` +
            `p50 ${ms(percentile(inside, 50))} ms, p95 ${ms(percentile(inside, 95))} ms`,
          cutRate > 0 && expected / Math.max(1e-3, rateSpanS) >= 0.9 * cutRate
            ? `the worker kept up with the stream (windows cut at ${cutRate.toFixed(1)}/s): the rate is ` +
              `bound by chunk intake (storeChunk), not by transcription`
            : `the stream cut windows faster (${cutRate.toFixed(1)}/s) than they were transcribed: ` +
              `the lag includes a backlog`,
          `${retried} window(s) needed more than one attempt; ${tail} last-stretch window(s) cut by ` +
            `close-outs, not counted`,
        ],
      };
    } finally {
      await app.close();
    }
  } finally {
    await dropWhenIdle(probe, db);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
