import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  coverage,
  markedChunk,
  startChunkRecognizer,
  type ChunkRecognizer,
} from './support/chunk-recognizer.ts';
import {
  METRICS_AUTH,
  processState,
  startHarness,
  supervise,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';
import { assertTimeline, firstGapAndCut } from './support/timeline-oracle.ts';
import { listen, plainSegments, spawnApi, transcriptOf } from './support/sse.ts';

const CHUNKS = 29;
/**
 * Chunks of 4 to 6 s, not the nominal 5 s a missing one is reserved as: when a late chunk arrives,
 * everything after it moves, and the checks below see whether anything was lost or doubled.
 */
const lengthOf = (seq: number) => 64_000 + ((seq * 7_919) % 32_000);

/** Short windows, no gap patience (the timeline goes past a missing chunk at once: most repairs). */
function lateEnv(recognizer: ChunkRecognizer, extra: Record<string, string> = {}): Record<string, string> {
  return {
    VERBATIM_ASR: 'whisper',
    VERBATIM_WHISPER_URL: recognizer.url,
    VERBATIM_WINDOW_SECONDS: '20',
    VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
    VERBATIM_CHUNK_SECONDS: '5',
    VERBATIM_GAP_PATIENCE_SECONDS: '0',
    VERBATIM_TRANSCRIPTION_CONCURRENCY: '2',
    ...extra,
  };
}

async function createLive(h: Harness): Promise<string> {
  const res = await h.request('POST', '/v1/meetings', { source: 'live', title: 'late audio' });
  assert.equal(res.status, 201);
  return res.json.id as string;
}

function put(h: Harness, id: string, seq: number) {
  return h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq, lengthOf(seq)), {
    'content-type': 'audio/wav',
  });
}

async function putAll(h: Harness, id: string, seqs: number[], parallel = 1): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < seqs.length; i += parallel) {
    const batch = await Promise.all(seqs.slice(i, i + parallel).map((seq) => put(h, id, seq)));
    for (const r of batch) {
      assert.ok(r.status === 200 || r.status === 201, `PUT answered ${r.status}: ${r.text}`);
      statuses.push(r.status);
    }
  }
  return statuses;
}

async function segments(h: Harness, id: string): Promise<Array<{ startMs: number; text: string }>> {
  const res = await h.request('GET', `/v1/meetings/${id}/transcript`);
  assert.equal(res.status, 200);
  return res.json.segments;
}

/** Every sample of chunks 0..n−1 is in the transcript exactly once, in sequence order. */
async function assertEveryChunkOnce(h: Harness, id: string, n = CHUNKS): Promise<void> {
  const { samples, order } = coverage(await segments(h, id));
  for (let seq = 0; seq < n; seq++) {
    assert.equal(
      samples.get(seq) ?? 0,
      lengthOf(seq),
      `chunk ${seq}: every sample once (not missing, not doubled)`,
    );
  }
  assert.deepEqual(order, [...Array(n).keys()], 'in order along the timeline');
}

/** The meeting has nothing left to place or repair. */
async function waitForRepairs(h: Harness, id: string) {
  return waitFor(`meeting ${id} to have no late audio left`, async () => {
    const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
    return m.lateAudio.lateChunks === 0 && !m.lateAudio.repairing && m.lateAudio.waitingChunks === 0
      ? m
      : null;
  });
}

function shuffled(n: number, seed: number): number[] {
  const out = [...Array(n).keys()];
  let s = seed;
  const next = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

async function superseded(h: Harness, id: string) {
  return h.app.database.db
    .selectFrom('windows')
    .select(['id', 'start_samples', 'end_samples'])
    .where('meeting_id', '=', id)
    .where('status', '=', 'superseded')
    .execute();
}

void describe('late and out-of-order audio', () => {
  let h: Harness;
  let recognizer: ChunkRecognizer;
  before(async () => {
    recognizer = await startChunkRecognizer();
    h = await startHarness({ env: lateEnv(recognizer) });
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await recognizer?.close();
  });

  void it('L19: 29 chunks sent reversed, shuffled 8 at a time, and with 20 % sent twice: every PUT is 2xx and every sample is transcribed once, in order', async () => {
    const seed = 20261201;
    const reversed = [...Array(CHUNKS).keys()].reverse();
    const shuffle = shuffled(CHUNKS, seed);
    const twice = shuffled(CHUNKS, seed + 1);
    const withDuplicates = [...twice];
    for (const seq of twice.slice(0, Math.round(CHUNKS * 0.2))) {
      withDuplicates.splice(Math.floor((seq * 7919) % withDuplicates.length), 0, seq);
    }
    const runs: Array<[string, number[], number]> = [
      ['reversed', reversed, 1],
      ['shuffled, 8 in parallel', shuffle, 8],
      ['shuffled, 8 in parallel, 20 % twice', withDuplicates, 8],
    ];
    for (const [name, order, parallel] of runs) {
      const id = await createLive(h);
      const statuses = await putAll(h, id, order, parallel);
      assert.equal(statuses.filter((s) => s === 201).length, CHUNKS, `${name}: each chunk created once`);
      const ended = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS });
      assert.equal(ended.status, 202, ended.text);
      const meeting = await waitForMeeting(h, id);
      await waitForRepairs(h, id);
      assert.deepEqual(meeting.missingChunks, [], name);
      await assertEveryChunkOnce(h, id);
      await assertTimeline(h.app.database.db, id, { settled: true });
      if (name === 'reversed') {
        assert.ok(
          (await superseded(h, id)).length > 0,
          'the timeline went past missing chunks and was repaired',
        );
      }
      const left = await h.app.database.db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      assert.deepEqual(left, [], `${name}: all audio deleted once transcribed`);
    }
  });

  void it('L19: a chunk held back until its stretch was cut past is re-cut in; each window it touched is superseded exactly once', async () => {
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(CHUNKS).keys()].filter((s) => s !== 10),
    );
    // Chunk 10's stretch is reserved at the nominal 5 s: wait until the windows over it are
    // transcribed without it.
    const db = h.app.database.db;
    const from = [...Array(10).keys()].reduce((n, s) => n + lengthOf(s), 0);
    const to = from + 80_000;
    await waitFor('the windows over chunk 10 to be transcribed', async () => {
      const over = await db
        .selectFrom('windows')
        .select('status')
        .where('meeting_id', '=', id)
        .where('status', '<>', 'superseded')
        .where('start_samples', '<', to)
        .where('end_samples', '>', from)
        .execute();
      return over.length > 0 && over.every((w) => w.status === 'transcribed');
    });
    const before = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.deepEqual(before.missingChunks, [10]);
    assert.equal(coverage(await segments(h, id)).samples.get(10), undefined);

    const late = await put(h, id, 10);
    assert.equal(late.status, 201, late.text);
    assert.deepEqual(late.json.meeting.missingChunks, [], 'missingChunks shrinks at once');
    await waitForRepairs(h, id);
    assert.equal(coverage(await segments(h, id)).samples.get(10), lengthOf(10), 'its words are in');
    const replaced = await superseded(h, id);
    assert.ok(replaced.some((w) => Number(w.start_samples) < to && Number(w.end_samples) > from));
    for (const w of replaced) {
      const trail = await db
        .selectFrom('audit_events')
        .select('to_status')
        .where('subject_id', '=', w.id)
        .where('to_status', '=', 'superseded')
        .execute();
      assert.equal(trail.length, 1, `window ${w.id} superseded exactly once`);
    }
    await assertTimeline(db, id, { settled: false });

    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    const done = await waitForMeeting(h, id);
    assert.equal(done.revision, 0, 'repaired before the transcript was published');
    await assertEveryChunkOnce(h, id);
    await assertTimeline(db, id, { settled: true });
  });

  void it('L20: End with chunks: N refuses a seq at or past N and takes a missing seq below N later, repairing the transcript', async () => {
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(10).keys()].filter((s) => s !== 7),
    );
    const below = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 5 });
    assert.equal(below.status, 409);
    assert.equal(below.json.error.code, 'end.chunks_below_stored');
    const bad = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 'ten' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'end.chunks');
    const ended = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 10 });
    assert.equal(ended.status, 202);
    assert.equal(ended.json.declaredChunks, 10);
    for (const seq of [10, 11, 500]) {
      const after = await put(h, id, seq);
      assert.equal(after.status, 409, `seq ${seq}`);
      assert.equal(after.json.error.code, 'chunk.after_end');
      assert.match(after.json.error.message, /ended with 10 chunks/);
    }
    const again = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 12 });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, 'end.chunks_conflict');

    const complete = await waitForMeeting(h, id);
    assert.deepEqual(complete.missingChunks, [7]);
    const late = await put(h, id, 7);
    assert.equal(late.status, 201, late.text);
    const revised = await waitFor('revision 1', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.revision === 1 && m.lateAudio.lateChunks === 0 && !m.lateAudio.repairing ? m : null;
    });
    assert.deepEqual(revised.missingChunks, []);
    await assertEveryChunkOnce(h, id, 10);
    await assertTimeline(h.app.database.db, id, { settled: true });
    const stored = await h.app.database.db
      .selectFrom('chunks')
      .select('seq')
      .where('meeting_id', '=', id)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      stored.map((c) => c.seq),
      [...Array(10).keys()],
      'nothing past the count was stored',
    );
  });

  void it('L19: without a count, chunks sent after completion past the last one are added at the end, the seqs between reported missing', async () => {
    const id = await createLive(h);
    await putAll(h, id, [...Array(6).keys()]);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    await waitForMeeting(h, id);
    assert.equal((await put(h, id, 6)).status, 201);
    await waitFor(
      'revision 1',
      async () => (await h.request('GET', `/v1/meetings/${id}`)).json.revision === 1,
    );
    await waitForRepairs(h, id);
    await assertEveryChunkOnce(h, id, 7);
    assert.equal((await put(h, id, 9)).status, 201);
    const m = await waitFor('revision 2', async () => {
      const v = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return v.revision === 2 && v.lateAudio.lateChunks === 0 && !v.lateAudio.repairing ? v : null;
    });
    assert.deepEqual(m.missingChunks, [7, 8]);
    const { samples, order } = coverage(await segments(h, id));
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 9]);
    assert.equal(samples.get(9), lengthOf(9));
    await assertTimeline(h.app.database.db, id, { settled: true });
  });

  void it('L21: seven tiny chunks just below seq 60,000 (within End’s count) make a few rows, not thousands of windows', async () => {
    const id = await createLive(h);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 60_000 })).status, 202);
    for (let seq = 59_993; seq < 60_000; seq++) {
      const res = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq % 400, 1_600), {
        'content-type': 'audio/wav',
      });
      assert.equal(res.status, 201, res.text);
    }
    const done = await waitForMeeting(h, id);
    await waitForRepairs(h, id);
    assert.equal(done.missingChunkCount, 59_993);
    assert.equal(done.missingChunks.length, 1000, 'the list is capped; the count is whole');
    const db = h.app.database.db;
    const windows = await db.selectFrom('windows').select('id').where('meeting_id', '=', id).execute();
    const gaps = await db.selectFrom('timeline_gaps').select('id').where('meeting_id', '=', id).execute();
    assert.ok(windows.length <= 10, `${windows.length} windows`);
    assert.ok(gaps.length <= 3, `${gaps.length} gap rows`);
    await assertTimeline(db, id, { settled: true });
  });

  void it('L21: a seq far ahead of the highest stored is refused with Retry-After, storing nothing', async () => {
    const id = await createLive(h);
    const res = await put(h, id, 10_000);
    assert.equal(res.status, 409);
    assert.equal(res.json.error.code, 'chunk.too_far_ahead');
    const retry = await h.api.inject({
      method: 'PUT',
      url: `/v1/meetings/${id}/chunks/10000`,
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
      payload: markedChunk(0, 1600),
    });
    assert.equal(retry.statusCode, 409);
    assert.ok(Number(retry.headers['retry-after']) > 0, 'Retry-After says when to try again');
    const db = h.app.database.db;
    const chunks = await db.selectFrom('chunks').select('id').where('meeting_id', '=', id).execute();
    const blobs = await db.selectFrom('blobs').select('id').where('meeting_id', '=', id).execute();
    const staged = await db.selectFrom('object_cleanups').select('id').where('meeting_id', '=', id).execute();
    assert.deepEqual([chunks.length, blobs.length, staged.length], [0, 0, 0], 'nothing stored');
    // Within the limit it is taken, and waits for the chunks before it.
    assert.equal((await put(h, id, 700)).status, 201);
    const view = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.equal(view.lateAudio.waitingChunks, 1);
    assert.equal((await put(h, id, 700 + 721)).status, 409);
    assert.equal((await put(h, id, 700 + 720)).status, 201);
  });
});

void it('L19: a chunk sent during the close-out, after the last stretch was cut, is repaired before the audio is deleted', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    const stop = [{ at: 'close-out-meeting.after-last-stretch', action: 'stop', times: 1 }];
    const worker = h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(stop) });
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(CHUNKS).keys()].filter((s) => s !== 12),
    );
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    await waitFor(
      'the close-out to stop after the last stretch',
      async () => processState(worker.pid) === 'T',
    );
    const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.equal(m.status, 'finalizing');
    assert.deepEqual(m.missingChunks, [12]);
    const late = await put(h, id, 12);
    assert.equal(late.status, 201, late.text);
    assert.equal(late.json.meeting.lateAudio.lateChunks, 1);
    process.kill(worker.pid, 'SIGCONT');
    const done = await waitForMeeting(h, id);
    assert.deepEqual(done.missingChunks, []);
    await assertEveryChunkOnce(h, id);
    await assertTimeline(h.app.database.db, id, { settled: true });
    // L4: the late chunk's audio is deleted, and only after its repair committed. The close-out may
    // hand off the meeting's audio before the repair commits, but it keeps what is not yet in the
    // transcript; the repair's commit hands off the rest (the wait covers that last step).
    await waitFor('the late chunk handed to cleanup', async () => {
      const blob = await h.app.database.db
        .selectFrom('chunks as c')
        .innerJoin('blobs as b', 'b.id', 'c.blob_id')
        .select('b.deleted_at')
        .where('c.meeting_id', '=', id)
        .where('c.seq', '=', 12)
        .executeTakeFirstOrThrow();
      return blob.deleted_at !== null;
    });
    const trail = await h.app.database.db
      .selectFrom('audit_events')
      .select(['id', 'to_status', 'reason'])
      .where('subject_id', '=', id)
      .orderBy('id')
      .execute();
    const repaired = trail.findIndex((a) => a.reason?.startsWith('repair committed'));
    assert.ok(repaired >= 0, 'the repair committed');
    const deletions = trail.flatMap((a, i) =>
      a.to_status === 'audio:deleted' ? [{ i, reason: a.reason }] : [],
    );
    for (const d of deletions.filter((d) => d.i < repaired))
      assert.match(
        d.reason ?? '',
        /kept for late audio/,
        'audio handed off before the repair kept the late chunk',
      );
    assert.ok(
      deletions.some((d) => d.i > repaired),
      'the late chunk was handed off after the repair committed',
    );
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('L19/L23: a chunk sent after the meeting completed is spliced in: revision 1, one meeting.transcript_revised webhook, the repair on an open event stream, minutes rewritten once, its audio deleted after the repair', async () => {
  const recognizer = await startChunkRecognizer();
  const received: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const h = await startHarness({ env: lateEnv(recognizer, { VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2' }) });
  let stopApi = () => Promise.resolve();
  try {
    const hook = await h.request('POST', '/v1/webhooks', {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      events: ['meeting.transcript_revised'],
    });
    assert.equal(hook.status, 201, hook.text);
    h.spawnWorker();
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(CHUNKS).keys()].filter((s) => s !== 20),
    );
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    const complete = await waitForMeeting(h, id);
    assert.equal(complete.revision, 0);
    assert.equal(complete.minutes.status, 'written');
    assert.deepEqual(complete.missingChunks, [20]);
    assert.ok(complete.audioDeletedAt);
    // A browser still showing the finished meeting, on an api process of its own.
    const api = await spawnApi(h);
    stopApi = () => api.proc.stop();
    const stream = listen(api.base, h.apiKey, id);
    await waitFor('the stream to replay the finished meeting', async () =>
      stream.events.some((e) => e.event === 'meeting' && e.data.revision === 0),
    );
    const replayed = stream.events.length;

    const late = await put(h, id, 20);
    assert.equal(late.status, 201, late.text);
    const revised = await waitFor('the transcript revised and its minutes rewritten', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.revision === 1 &&
        m.minutes.status === 'written' &&
        m.minutes.revision === 1 &&
        !m.lateAudio.repairing
        ? m
        : null;
    });
    assert.equal(revised.status, 'complete');
    assert.equal(revised.minutes.stale, false);
    assert.deepEqual(revised.missingChunks, []);
    assert.match(revised.lateAudio.message, /revised 1 time/);
    await assertEveryChunkOnce(h, id);
    await assertTimeline(h.app.database.db, id, { settled: true });
    const transcript = await h.request('GET', `/v1/meetings/${id}/transcript`);
    assert.equal(transcript.json.revision, 1);
    // L23: the open stream was told of the repair without asking: the windows it replaced are
    // superseded, the new ones carry the late chunk's words, and the meeting's revision is 1.
    await waitFor('the revision on the stream', async () =>
      stream.events.some((e) => e.event === 'meeting' && e.data.revision === 1),
    );
    const pushed = stream.events.slice(replayed);
    assert.ok(
      pushed.some((e) => e.event === 'window' && e.data.status === 'superseded'),
      'a replaced window is sent as superseded',
    );
    assert.ok(
      pushed.some(
        (e) =>
          e.event === 'window' &&
          e.data.status === 'transcribed' &&
          coverage(e.data.segments).samples.has(20),
      ),
      "a new window with the late chunk's words is sent",
    );
    assert.deepEqual(
      transcriptOf(stream.events),
      plainSegments(transcript.json.segments),
      'what the stream shows is the revised transcript',
    );
    await stream.close();

    const db = h.app.database.db;
    await waitFor('the webhook delivery', async () => received.length >= 1);
    await waitFor('the outbox to drain', async () => {
      const pending = await db.selectFrom('outbox').select('id').where('status', '=', 'pending').execute();
      const deliveries = await db.selectFrom('webhook_deliveries').select('status').execute();
      return pending.length === 0 && deliveries.every((d) => d.status === 'delivered');
    });
    assert.equal(received.length, 1, 'meeting.transcript_revised delivered once');
    const event = JSON.parse(received[0]!);
    assert.equal(event.type, 'meeting.transcript_revised');
    assert.equal(event.data.revision, 1);
    assert.deepEqual(event.data.lateChunks, [20]);

    const trail = await db
      .selectFrom('audit_events')
      .select(['id', 'to_status', 'reason'])
      .where('subject_id', '=', id)
      .orderBy('id')
      .execute();
    assert.equal(
      trail.filter((a) => a.to_status === 'minutes:written').length,
      2,
      'minutes written, then rewritten once',
    );
    const repaired = trail.findIndex((a) => a.reason?.startsWith('repair committed'));
    const lastDeleted = trail.map((a) => a.to_status).lastIndexOf('audio:deleted');
    assert.ok(repaired >= 0 && lastDeleted > repaired, 'its audio was deleted after the repair committed');
    await waitFor('the late audio to be deleted', async () => {
      const left = await db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      return left.length === 0;
    });
  } finally {
    await stopApi();
    await h.close();
    await recognizer.close();
    await new Promise<void>((r) => receiver.close(() => r()));
  }
});

void it('L19: a worker SIGKILLed during a repair: the repair is redone and the transcript is not doubled', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    const kill = [{ at: 'repair-timeline.before-commit', action: 'kill', times: 1 }];
    const sup = supervise(h, { VERBATIM_FAULTS: JSON.stringify(kill) });
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(CHUNKS).keys()].filter((s) => s !== 5),
    );
    await waitFor('the windows past chunk 5 to be cut', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.windows.done >= 2;
    });
    assert.equal((await put(h, id, 5)).status, 201);
    await waitForRepairs(h, id);
    assert.equal(coverage(await segments(h, id)).samples.get(5), lengthOf(5), 'chunk 5 once, not twice');
    const db = h.app.database.db;
    const repair = await db
      .selectFrom('jobs')
      .select(['id', 'reclaim_count'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'repair-timeline')
      .execute();
    const attempts = await db
      .selectFrom('job_attempts')
      .select('status')
      .where(
        'job_id',
        'in',
        repair.map((j) => j.id),
      )
      .execute();
    assert.ok(
      attempts.some((a) => a.status === 'lease_expired'),
      'the killed attempt was reclaimed',
    );
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    await waitForMeeting(h, id);
    await assertEveryChunkOnce(h, id);
    await assertTimeline(db, id, { settled: true });
    await sup.stop();
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('L19/X2: a repair that gives up leaves its late chunk stored and counted as stuck, said in plain words; a resubmission adds it', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    const broken = [
      {
        at: 'repair-timeline.before-commit',
        action: 'throw',
        kind: 'permanent',
        code: 'asr.bad_request',
        times: 1,
      },
    ];
    const worker = h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(broken) });
    const id = await createLive(h);
    await putAll(
      h,
      id,
      [...Array(10).keys()].filter((s) => s !== 4),
    );
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 10 })).status, 202);
    await waitForMeeting(h, id);
    assert.equal((await put(h, id, 4)).status, 201);
    const stuck = await waitFor('the repair to give up', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.lateAudio.failure && !m.lateAudio.repairing ? m : null;
    });
    assert.equal(stuck.lateAudio.lateChunks, 1);
    assert.match(stuck.lateAudio.message, /could not be added to the transcript yet/);
    const metrics = await h.api.inject({
      method: 'GET',
      url: '/metrics',
      headers: METRICS_AUTH,
    });
    assert.match(metrics.body, /verbatim_late_chunks_stuck 1/);
    const kept = await h.app.database.db
      .selectFrom('chunks')
      .innerJoin('blobs', 'blobs.id', 'chunks.blob_id')
      .select('blobs.deleted_at')
      .where('chunks.meeting_id', '=', id)
      .where('chunks.seq', '=', 4)
      .executeTakeFirstOrThrow();
    assert.equal(kept.deleted_at, null, 'its audio is kept');

    const again = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(again.status, 202, again.text);
    const fixed = await waitForRepairs(h, id);
    assert.equal(fixed.revision, 1);
    assert.equal(fixed.lateAudio.failure, null);
    await assertEveryChunkOnce(h, id, 10);
    await worker.stop();
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('L19: two chunks that arrive after completion, in windows far apart, are spliced in one repair; every sample once and in order', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    let worker = h.spawnWorker();
    const id = await createLive(h);
    const late = [5, 20];
    await putAll(
      h,
      id,
      [...Array(CHUNKS).keys()].filter((s) => !late.includes(s)),
    );
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    assert.ok((await waitForMeeting(h, id)).audioDeletedAt);
    // With no worker running, both wait for the same repair run.
    await worker.stop();
    for (const seq of late) assert.equal((await put(h, id, seq)).status, 201);
    worker = h.spawnWorker();
    const m = await waitForRepairs(h, id);
    assert.equal(m.revision, 1, 'one repair, one revision');
    await assertEveryChunkOnce(h, id);
    await assertTimeline(h.app.database.db, id, { settled: true });
    await worker.stop();
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('L19: a late chunk shorter than the 5 s reserved for it, where the cut had stopped inside its gap, loses nothing after it', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    h.spawnWorker();
    const id = await createLive(h);
    const send = (seq: number, samples: number) =>
      h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq, samples), {
        'content-type': 'audio/wav',
      });
    for (const seq of [0, 1, 2, 4, 5]) assert.equal((await send(seq, 80_000)).status, 201);
    const db = h.app.database.db;
    // The quietest place near the end of the first 20 s slot is the silence reserved for chunk 3.
    await waitFor('the cut to stop inside chunk 3’s gap', async () => {
      const { gap, cut } = await firstGapAndCut(db, id);
      return gap && cut > Number(gap.start_samples) && cut < Number(gap.start_samples) + Number(gap.samples);
    });
    assert.equal((await send(3, 16_000)).status, 201, 'one second, not five');
    await waitForRepairs(h, id);
    await assertTimeline(db, id, { settled: false });
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 6 })).status, 202);
    await waitForMeeting(h, id);
    const { samples, order } = coverage(await segments(h, id));
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
    for (const seq of [0, 1, 2, 4, 5]) assert.equal(samples.get(seq), 80_000, `chunk ${seq} whole`);
    assert.equal(samples.get(3), 16_000);
    await assertTimeline(db, id, { settled: true });
  } finally {
    await h.close();
    await recognizer.close();
  }
});

void it('L19: chunks that arrive after a close-out that had no audio to cut, one of them late, are all transcribed', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({ env: lateEnv(recognizer) });
  try {
    // The close-out stops after cutting (nothing), its audio not yet deleted; another worker repairs.
    const stop = [{ at: 'close-out-meeting.after-last-stretch', action: 'stop', times: 1 }];
    const closer = h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(stop) });
    const id = await createLive(h);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    await waitFor(
      'the close-out to stop after the last stretch',
      async () => processState(closer.pid) === 'T',
    );
    const repairer = h.spawnWorker();
    for (const seq of [0, 2, 1]) assert.equal((await put(h, id, seq)).status, 201);
    await waitForRepairs(h, id);
    await assertEveryChunkOnce(h, id, 3);
    process.kill(closer.pid, 'SIGCONT');
    await waitForMeeting(h, id);
    await assertEveryChunkOnce(h, id, 3);
    await assertTimeline(h.app.database.db, id, { settled: true });
    await repairer.stop();
  } finally {
    await h.close();
    await recognizer.close();
  }
});
