/**
 * (i) Speech → text on screen: a meeting of flite sentences streamed at real pace in 5 s
 * chunks over HTTP to an api and a worker on this machine (real PocketSphinx), its SSE stream read
 * as a browser reads it. For each sentence: the time from the end of its audio (when it was
 * "spoken") until most of its longer words are on screen, counting the text of every event (draft
 * or final window) received so far whose stretch overlaps the sentence's, as the web app shows
 * them (a sentence spoken across two drafts is on screen when the second arrives). The stricter
 * reading, one single event holding most of its words, is reported next to it. Run with
 * drafts off (the baseline: finals only) and on, in the same run. Also End → complete, next to the
 * recogniser's own time for the last stretch (the audio after the last full window).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { sql } from 'kysely';
import type { AddressInfo } from 'node:net';
import { buildAppApi, openApp, startAppWorker } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { encodeWav, parseWav } from '../src/domain/wav.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { queueNoisyBacklog } from './noisy-backlog.ts';

const RATE = 16_000;
const CHUNK_S = 5;

/** 24 sentences, about 145 s with flite's rms voice. */
const SENTENCES = [
  'Good morning everyone and thank you for joining the quarterly planning meeting.',
  'The first topic today is the marketing budget for the spring campaign.',
  'Finance asked us to reduce spending on travel by twenty percent.',
  'The engineering team will hire two more engineers before the summer.',
  'Our customer support queue doubled after the last product release.',
  'We should publish the new pricing page before the end of the month.',
  'The design review for the mobile application is scheduled for Friday.',
  'Please send your comments on the roadmap document by Wednesday.',
  'The data warehouse migration is two weeks behind the original plan.',
  'Security wants every service to rotate its keys once a quarter.',
  'The sales team closed three large contracts in the northern region.',
  'We need a volunteer to organise the company picnic in July.',
  'Legal approved the new privacy policy with two small changes.',
  'The office in the city centre will close for renovation in August.',
  'Recruiting will attend the university career fair next month.',
  'The board meeting has been moved to the second week of June.',
  'Operations reported that the backup system worked during the outage.',
  'Our partner in Germany wants a demonstration of the reporting tool.',
  'The training budget covers one conference per person this year.',
  'Customer churn went down slightly compared with the previous quarter.',
  'The product team will present the research findings next Tuesday.',
  'Remember to submit your expense reports before the deadline.',
  'Thank you all for the good work during a busy season.',
  'The next meeting will take place on Monday at ten in the morning.',
];

export interface CaptionRun {
  drafts: boolean;
  /**
   * Seconds from each sentence's end until most of its words are on screen: the text of the events
   * (drafts, final windows) covering its stretch, as a browser shows them; 0 when they were shown
   * before the sentence ended; null if they never came.
   */
  latencies: Array<number | null>;
  /** The stricter reading: until one single event holds most of its words. */
  oneEvent: Array<number | null>;
  /** Seconds from sending a chunk to its draft on the stream. */
  draftPipeline: number[];
  endToComplete: number;
  shed: number;
  /** Another workspace's backlog beside the meeting (bench (o)): its windows, waiting before and after. */
  noisy?: { hours: number; windows: number; waitingBefore: number; waitingAfter: number };
}

/** BENCH_CAPTION_RUNS=on (or off) runs one of the two, when tuning. */
function defaultPlan(): Array<{ drafts: boolean }> {
  const which = process.env.BENCH_CAPTION_RUNS ?? 'off,on';
  return [false, true].filter((d) => which.includes(d ? 'on' : 'off')).map((drafts) => ({ drafts }));
}

export interface CaptionResult {
  audioSeconds: number;
  lastStretchRecognitionS: number;
  runs: CaptionRun[];
}

export function sentenceAudio(): {
  samples: Int16Array;
  starts: number[];
  ends: number[];
  words: string[][];
} {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-captions-'));
  const parts: Int16Array[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  let at = 0;
  const pause = new Int16Array(RATE / 2);
  for (const [i, text] of SENTENCES.entries()) {
    const file = path.join(dir, `s${i}.wav`);
    execFileSync('flite', ['-voice', 'rms', '--setf', 'duration_stretch=1.2', '-t', text, '-o', file]);
    const audio = parseWav(fs.readFileSync(file))!;
    parts.push(audio.samples, pause);
    starts.push(at / RATE);
    at += audio.samples.length;
    ends.push(at / RATE);
    at += pause.length;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  const samples = new Int16Array(at);
  let off = 0;
  for (const p of parts) {
    samples.set(p, off);
    off += p.length;
  }
  const words = SENTENCES.map((s) =>
    s
      .toLowerCase()
      .replace(/[^a-z ]/g, '')
      .split(' ')
      .filter((w) => w.length >= 5),
  );
  return { samples, starts, ends, words };
}

/** Most of a sentence's longer words in one event's text. */
function holds(text: string, words: string[]): boolean {
  const t = ` ${text.toLowerCase()} `;
  const found = words.filter((w) => t.includes(` ${w} `)).length;
  return found >= Math.max(1, Math.ceil(words.length * 0.5));
}

/**
 * The runs to make: drafts off and on by default; `noisyHours` puts another workspace's backlog of
 * that many hours of windows in the queue before the meeting starts (F5's bench (o)).
 */
export async function liveCaptions(
  plan: Array<{ drafts: boolean; noisyHours?: number }> = defaultPlan(),
): Promise<CaptionResult> {
  const { samples, starts, ends, words } = sentenceAudio();
  const chunks: Buffer[] = [];
  for (let i = 0; i < samples.length; i += CHUNK_S * RATE)
    chunks.push(encodeWav(samples.subarray(i, i + CHUNK_S * RATE), RATE));
  const runs: CaptionRun[] = [];
  let lastStretchRecognitionS = 0;
  for (const { drafts, noisyHours } of plan) {
    const db = await createTestDatabase();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-captions-'));
    const config = loadConfig({
      DATABASE_URL: db.appUrl,
      VERBATIM_MIGRATION_DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dataDir,
      VERBATIM_LOG_LEVEL: 'warn',
      VERBATIM_DRAFTS: drafts ? 'on' : 'off',
    });
    const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
    const worker = await startAppWorker(app);
    const api = buildAppApi(app);
    await api.listen({ host: '127.0.0.1', port: 0 });
    const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
    try {
      if (lastStretchRecognitionS === 0) {
        // The recogniser alone on the last stretch (after the last full 60 s window), same machine.
        const lastFrom = Math.floor(samples.length / (60 * RATE)) * 60 * RATE;
        const wav = encodeWav(samples.subarray(lastFrom), RATE);
        const t = performance.now();
        await app.deps.transcriber.transcribe({ wav, language: null });
        lastStretchRecognitionS = (performance.now() - t) / 1000;
      }
      const noisy = noisyHours ? await queueNoisyBacklog(app, base, noisyHours) : null;
      const noisyWaitingBefore = noisy ? await noisy.waiting() : 0;
      const workspaceId = await app.workspaces.createWorkspace('bench');
      const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
      const auth = { authorization: `Bearer ${apiKey}` };
      const created = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'live', title: 'captions' }),
      });
      const meetingId = ((await created.json()) as { id: string }).id;

      // The listener: every event with the time it arrived.
      const seen: Array<{
        at: number;
        text: string;
        fromMs?: number;
        toMs?: number;
        status?: string;
        complete?: boolean;
      }> = [];
      const pipeline: number[] = [];
      let t0 = Number.NaN;
      const abort = new AbortController();
      const listening = (async () => {
        const res = await fetch(`${base}/v1/meetings/${meetingId}/events`, {
          headers: auth,
          signal: abort.signal,
        });
        const decoder = new TextDecoder();
        let buffer = '';
        for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(piece, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = /^event: (.*)$/m.exec(block)?.[1];
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (!event || !data) continue;
            const d = JSON.parse(data) as {
              text?: string;
              startMs?: number;
              endMs?: number;
              chunkSeq?: number;
              segments?: Array<{ text: string }>;
              status?: string;
              transcriptComplete?: boolean;
            };
            const at = performance.now();
            if (event === 'draft') {
              seen.push({ at, text: d.text ?? '', fromMs: d.startMs, toMs: d.endMs });
              pipeline.push((at - (t0 + ((d.chunkSeq ?? 0) + 1) * CHUNK_S * 1000)) / 1000);
              if (process.env.BENCH_VERBOSE)
                process.stdout.write(
                  `    draft ${d.chunkSeq} ${d.startMs}–${d.endMs} ms +${fmtS(pipeline.at(-1)!)} s: ${d.text}\n`,
                );
            } else if (event === 'window')
              seen.push({
                at,
                text: (d.segments ?? []).map((s) => s.text).join(' '),
                fromMs: d.startMs,
                toMs: d.endMs,
              });
            else if (event === 'meeting')
              seen.push({ at, text: '', status: d.status, complete: d.transcriptComplete });
          }
        }
      })().catch(() => undefined);

      // Real pace: chunk k is sent when its last sample has been "spoken".
      t0 = performance.now();
      for (const [seq, chunk] of chunks.entries()) {
        const due = t0 + ((seq + 1) * CHUNK_S * RATE * 1000) / RATE;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const res = await fetch(`${base}/v1/meetings/${meetingId}/chunks/${seq}`, {
          method: 'PUT',
          headers: { ...auth, 'content-type': 'audio/wav' },
          body: chunk,
        });
        if (res.status >= 300) throw new Error(`chunk ${seq}: ${res.status} ${await res.text()}`);
      }
      const endedAt = performance.now();
      await fetch(`${base}/v1/meetings/${meetingId}/end`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ chunks: chunks.length }),
      });
      const deadline = performance.now() + 300_000;
      while (!seen.some((e) => e.status === 'complete') && performance.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const completeAt = seen.find((e) => e.status === 'complete')?.at ?? Number.NaN;
      abort.abort();
      await listening;
      const oneEvent = ends.map((endS, i) => {
        const spokenAt = t0 + endS * 1000;
        const first = seen.find((e) => e.at >= spokenAt && e.text && holds(e.text, words[i]!));
        return first ? (first.at - spokenAt) / 1000 : null;
      });
      const latencies = ends.map((endS, i) => {
        const spokenAt = t0 + endS * 1000;
        const fromMs = starts[i]! * 1000;
        const covering = seen.filter(
          (e) => e.text && e.fromMs !== undefined && e.toMs! > fromMs && e.fromMs < endS * 1000,
        );
        for (let k = 0; k < covering.length; k++) {
          const shown = covering
            .slice(0, k + 1)
            .map((e) => e.text)
            .join(' ');
          if (holds(shown, words[i]!)) return Math.max(0, covering[k]!.at - spokenAt) / 1000;
        }
        return null;
      });
      const row = await app.database.db
        .selectFrom('meetings')
        .select('drafts_shed')
        .where('id', '=', meetingId)
        .executeTakeFirstOrThrow();
      runs.push({
        drafts,
        latencies,
        draftPipeline: pipeline,
        oneEvent,
        endToComplete: (completeAt - endedAt) / 1000,
        shed: row.drafts_shed,
        ...(noisy
          ? {
              noisy: {
                hours: noisyHours ?? 0,
                windows: noisy.windows,
                waitingBefore: noisyWaitingBefore,
                waitingAfter: await noisy.waiting(),
              },
            }
          : {}),
      });
    } finally {
      await api.close();
      await worker.stop(5_000);
      await app.close();
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  return { audioSeconds: samples.length / RATE, lastStretchRecognitionS, runs };
}

const fmtS = (n: number) => n.toFixed(2);

export interface CapacityStep {
  meetings: number;
  /** Drafts skipped because the drafts queue was behind, of the chunks that could have had one. */
  shed: number;
  chunks: number;
  /** Seconds from a window's slot filling (its cut) to its final words, every window of the step. */
  finalsLag: number[];
}

/**
 * The capacity figure of (i): `meetings` live meetings at once, each streamed at real pace in 5 s
 * chunks (the first `seconds` of the same speech, starts spread over one chunk), drafts on, one api
 * and one worker process's worth of runners on this machine with the defaults. Each step stops
 * once every meeting's first window has its final words.
 */
export async function captionCapacity(meetings: number, seconds = 75): Promise<CapacityStep> {
  const { samples } = sentenceAudio();
  const chunks: Buffer[] = [];
  for (let i = 0; i < Math.min(samples.length, seconds * RATE); i += CHUNK_S * RATE)
    chunks.push(encodeWav(samples.subarray(i, Math.min(i + CHUNK_S * RATE, seconds * RATE)), RATE));
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-capacity-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    // error: a worker still busy when the step ends logs its connections being dropped with the database.
    VERBATIM_LOG_LEVEL: 'error',
    VERBATIM_DRAFTS: 'on',
  });
  const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
  const worker = await startAppWorker(app);
  const api = buildAppApi(app);
  await api.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  try {
    const workspaceId = await app.workspaces.createWorkspace('bench');
    const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
    const auth = { authorization: `Bearer ${apiKey}` };
    const ids: string[] = [];
    for (let m = 0; m < meetings; m++) {
      const created = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'live', title: `capacity ${m}` }),
      });
      ids.push(((await created.json()) as { id: string }).id);
    }
    const t0 = performance.now();
    await Promise.all(
      ids.map(async (id, m) => {
        const offset = (m * CHUNK_S * 1000) / meetings;
        for (const [seq, chunk] of chunks.entries()) {
          const wait = t0 + offset + (seq + 1) * CHUNK_S * 1000 - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const res = await fetch(`${base}/v1/meetings/${id}/chunks/${seq}`, {
            method: 'PUT',
            headers: { ...auth, 'content-type': 'audio/wav' },
            body: chunk,
          });
          if (res.status >= 300) throw new Error(`chunk ${seq}: ${res.status} ${await res.text()}`);
        }
      }),
    );
    const firstWindowsDone = async () => {
      const r = await app.database.db
        .selectFrom('windows')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('meeting_id', 'in', ids)
        .where('index', '=', 0)
        .where('status', '=', 'transcribed')
        .executeTakeFirstOrThrow();
      return Number(r.n) === meetings;
    };
    const deadline = performance.now() + 600_000;
    while (!(await firstWindowsDone()) && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    const lags = await app.database.db
      .selectFrom('windows')
      .select(sql<number>`extract(epoch from transcribed_at - created_at)::float`.as('s'))
      .where('meeting_id', 'in', ids)
      .where('status', '=', 'transcribed')
      .execute();
    const shed = await app.database.db
      .selectFrom('meetings')
      .select((eb) => eb.fn.sum<number>('drafts_shed').as('n'))
      .where('id', 'in', ids)
      .executeTakeFirstOrThrow();
    return {
      meetings,
      shed: Number(shed.n ?? 0),
      chunks: chunks.length * meetings,
      finalsLag: lags.map((l) => Number(l.s)),
    };
  } finally {
    await api.close();
    await worker.stop(5_000);
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
