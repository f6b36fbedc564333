import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import { encodeWav, parseWav } from '../src/domain/wav.ts';
import { OUTAGE_WAITS } from '../src/jobs/pg-job-store.ts';
import {
  SPEECH,
  speechWav,
  webmOpus,
  startHarness,
  supervise,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';
import { startFakeChat } from './support/fake-openai.ts';
import { assertTimeline, firstGapAndCut } from './support/timeline-oracle.ts';

const CHUNK_SECONDS = 5;

/** Synthetic speech cut into 5 s WAV chunks, as the browser sends them. */
function chunksOf(text: string): Buffer[] {
  const audio = parseWav(speechWav(text))!;
  const size = CHUNK_SECONDS * audio.sampleRate;
  const out: Buffer[] = [];
  for (let i = 0; i < audio.samples.length; i += size) {
    out.push(encodeWav(audio.samples.subarray(i, i + size), audio.sampleRate));
  }
  return out;
}

async function createLive(h: Harness): Promise<string> {
  const res = await h.request('POST', '/v1/meetings', { source: 'live', title: 'standup' });
  assert.equal(res.status, 201);
  return res.json.id as string;
}

function putChunk(h: Harness, id: string, seq: number, body: Buffer, type = 'audio/wav') {
  return h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, body, { 'content-type': type });
}

void describe('live meetings', () => {
  let h: Harness;
  const speech = `${SPEECH} ${SPEECH}`;
  let chunks: Buffer[];
  before(async () => {
    h = await startHarness({
      env: {
        VERBATIM_WINDOW_SECONDS: '8',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: String(CHUNK_SECONDS),
        VERBATIM_GAP_PATIENCE_SECONDS: String(2 * CHUNK_SECONDS),
        VERBATIM_MAX_CHUNK_BYTES: '400000',
      },
    });
    chunks = chunksOf(speech);
  });
  after(async () => {
    await h?.close();
  });

  void it('L1/S2: chunks are stored once per (meeting, seq); bad chunks get a clear 4xx', async () => {
    const id = await createLive(h);
    const first = await putChunk(h, id, 0, chunks[0]!);
    assert.equal(first.status, 201);
    assert.equal(first.json.meeting.status, 'recording');
    const again = await putChunk(h, id, 0, chunks[0]!);
    assert.equal(again.status, 200);
    assert.equal(again.json.created, false);
    const rows = await h.app.database.db
      .selectFrom('chunks')
      .selectAll()
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(rows.length, 1, 'a duplicate chunk is stored once');
    const blobs = await h.app.database.db
      .selectFrom('blobs')
      .selectAll()
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(blobs.length, 1);

    const other = await putChunk(h, id, 0, chunks[1]!);
    assert.equal(other.status, 409);
    assert.equal(other.json.error.code, 'chunk.conflict');
    assert.equal((await putChunk(h, id, 1, Buffer.from('not audio'), 'text/plain')).status, 415);
    assert.equal((await putChunk(h, id, 1, Buffer.alloc(500_000, 1))).status, 413);
    assert.equal((await putChunk(h, id, -1, chunks[1]!)).status, 400);
    const notWav = await putChunk(h, id, 1, Buffer.from('RIFF....WAVEjunk'));
    assert.equal(notWav.status, 415);

    const upload = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'u' });
    const wrong = await putChunk(h, upload.json.id, 0, chunks[0]!);
    assert.equal(wrong.status, 409);
    assert.equal(wrong.json.error.code, 'meeting.not_live');

    // L19/L20: after End a chunk the client still holds is taken; one past End's count is not.
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 2 })).status, 202);
    const late = await putChunk(h, id, 1, chunks[1]!);
    assert.equal(late.status, 201, late.text);
    const past = await putChunk(h, id, 2, chunks[2]!);
    assert.equal(past.status, 409);
    assert.equal(past.json.error.code, 'chunk.after_end');
    const stored = await h.app.database.db
      .selectFrom('chunks')
      .selectAll()
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(stored.length, 2, 'nothing already stored was lost');
  });

  void it('L2/L4/L18: windows are cut as slots fill, and the close-out transcribes the last stretch itself', async () => {
    const worker = h.spawnWorker();
    const id = await createLive(h);
    // Out of order within the meeting is fine: 0, 2, 1, 3, …
    const order = chunks.map((_, i) => i);
    [order[1], order[2]] = [order[2]!, order[1]!];
    for (const seq of order) {
      const res = await putChunk(h, id, seq, chunks[seq]!);
      assert.equal(res.status, 201, res.text);
    }
    await waitFor('a window transcribed by its own job', async () => {
      const m = await h.request('GET', `/v1/meetings/${id}`);
      return m.json.windows.done >= 1;
    });
    const ended = await h.request('POST', `/v1/meetings/${id}/end`);
    assert.equal(ended.json.status, 'finalizing');
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.done, meeting.windows.total);
    assert.deepEqual(meeting.missingChunks, []);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    for (const word of ['budget', 'marketing', 'finance', 'friday'])
      assert.ok(text.includes(word), `lacks ${word}`);

    const db = h.app.database.db;
    const windows = await db
      .selectFrom('windows')
      .selectAll()
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    const total = chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0);
    assert.equal(windows[0]!.start_ms, 0);
    for (let i = 1; i < windows.length; i++)
      assert.equal(windows[i]!.start_ms, windows[i - 1]!.end_ms, 'contiguous');
    assert.ok(Math.abs(windows.at(-1)!.end_ms - total / 16) <= 1, 'the windows cover the whole recording');
    for (const w of windows.slice(0, -1)) {
      const slotEnd = (w.index + 1) * 8000;
      assert.ok(
        w.end_ms <= slotEnd && w.end_ms > slotEnd - 2000,
        `boundary ${w.end_ms} near slot end ${slotEnd}`,
      );
    }
    const jobs = await db
      .selectFrom('jobs')
      .select(['subject_id'])
      .where('kind', '=', 'transcribe-window')
      .where('meeting_id', '=', id)
      .execute();
    const last = windows.at(-1)!;
    assert.ok(!jobs.some((j) => j.subject_id === last.id), 'the last stretch had no job of its own');
    assert.ok(jobs.length >= 1 && jobs.length === windows.length - 1);

    // L4: audio deletion and completion come after every window settled and after the minutes.
    const trail = await db
      .selectFrom('audit_events')
      .select(['id', 'subject_id', 'to_status'])
      .orderBy('id')
      .execute();
    const settled = trail.filter(
      (a) => windows.some((w) => w.id === a.subject_id) && a.to_status === 'transcribed',
    );
    // Every window's settling is in the trail (an empty list would make the order check vacuous).
    assert.equal(settled.length, windows.length, 'one audited settling per window');
    const lastWindowSettled = Math.max(...settled.map((a) => Number(a.id)));
    const minutes = trail.find((a) => a.subject_id === id && a.to_status === 'minutes:written');
    const complete = trail.find((a) => a.subject_id === id && a.to_status === 'complete');
    assert.ok(minutes && complete);
    assert.ok(lastWindowSettled < Number(minutes.id) && Number(minutes.id) < Number(complete.id));
    assert.ok(meeting.audioDeletedAt);
    const left = await db
      .selectFrom('blobs')
      .select('id')
      .where('meeting_id', '=', id)
      .where('deleted_at', 'is', null)
      .execute();
    assert.deepEqual(left, [], 'every chunk and window object was deleted');
    await worker.stop();
  });

  void it('L1: a chunk that never arrived is reported and its stretch settled; the rest is transcribed', async () => {
    h.spawnWorker();
    const id = await createLive(h);
    for (const seq of [0, 1, 3]) assert.equal((await putChunk(h, id, seq, chunks[seq]!)).status, 201);
    await h.request('POST', `/v1/meetings/${id}/end`);
    const meeting = await waitForMeeting(h, id);
    assert.deepEqual(meeting.missingChunks, [2]);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    assert.ok(text.includes('budget'), text);
  });

  void it('L1: WebM/Opus chunks cut at arbitrary bytes are decoded as one stream and transcribed', async () => {
    h.spawnWorker();
    const wav = speechWav(speech);
    const stream = webmOpus(wav);
    const pieces: Buffer[] = [];
    for (let i = 0; i < stream.length; i += 20_000) pieces.push(stream.subarray(i, i + 20_000));
    assert.ok(pieces.length >= 4, `${pieces.length} pieces`);

    const id = await createLive(h);
    const order = pieces.map((_, i) => i);
    [order[1], order[2]] = [order[2]!, order[1]!];
    for (const seq of order) {
      const res = await putChunk(h, id, seq, pieces[seq]!, 'audio/webm;codecs=opus');
      assert.equal(res.status, 201, res.text);
    }
    const wrongFormat = await putChunk(h, id, pieces.length, chunks[0]!);
    assert.equal(wrongFormat.status, 415);
    assert.equal(wrongFormat.json.error.code, 'chunk.format_changed');
    await h.request('POST', `/v1/meetings/${id}/end`);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    assert.deepEqual(meeting.missingChunks, []);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    for (const word of ['budget', 'marketing', 'engineers', 'friday'])
      assert.ok(text.includes(word), `lacks ${word}: ${text}`);

    // Decoded piece by piece, the stream is exactly as long as decoded whole: nothing skipped or doubled.
    const whole = await new FfmpegAudioDecoder().decode(stream);
    const rows = await h.app.database.db
      .selectFrom('chunks')
      .select(['samples'])
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(
      rows.reduce((n, r) => n + (r.samples ?? 0), 0),
      whole.samples.length,
    );
    const windows = await h.app.database.db
      .selectFrom('windows')
      .select(['start_ms', 'end_ms'])
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    assert.equal(windows[0]!.start_ms, 0);
    for (let i = 1; i < windows.length; i++) assert.equal(windows[i]!.start_ms, windows[i - 1]!.end_ms);
    assert.ok(Math.abs(windows.at(-1)!.end_ms - (whole.samples.length * 1000) / 16_000) <= 1);

    const headless = await createLive(h);
    const refused = await putChunk(h, headless, 0, pieces[1]!, 'audio/webm');
    assert.equal(refused.status, 415);
    assert.equal(refused.json.error.code, 'chunk.bad_format');
  });
});

const LIVE_ENV = {
  VERBATIM_WINDOW_SECONDS: '8',
  VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
  VERBATIM_CHUNK_SECONDS: '5',
};

void it('L19: a WebM piece held back until the timeline went past it is read with the pieces after it again; nothing is lost or doubled', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_GAP_PATIENCE_SECONDS: '0' } });
  try {
    h.spawnWorker();
    const stream = webmOpus(speechWav(`${SPEECH} ${SPEECH}`));
    const pieces: Buffer[] = [];
    for (let i = 0; i < stream.length; i += 20_000) pieces.push(stream.subarray(i, i + 20_000));
    const id = await createLive(h);
    const db = h.app.database.db;
    for (const [seq, piece] of pieces.entries()) {
      if (seq === 2) continue;
      assert.equal((await putChunk(h, id, seq, piece, 'audio/webm')).status, 201);
    }
    const gap = await waitFor('piece 2 to be reserved and windows cut past it', async () => {
      const { gap: g, cut } = await firstGapAndCut(db, id);
      return g && cut > Number(g.start_samples) + Number(g.samples) ? g : null;
    });
    assert.equal(gap.first_seq, 2);
    const after = await db
      .selectFrom('chunks')
      .select('decoded_after_gap')
      .where('meeting_id', '=', id)
      .where('seq', '=', 3)
      .executeTakeFirstOrThrow();
    assert.equal(after.decoded_after_gap, true, 'piece 3 was read from its first cluster, its bytes kept');

    assert.equal((await putChunk(h, id, 2, pieces[2]!, 'audio/webm')).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: pieces.length })).status, 202);
    const meeting = await waitForMeeting(h, id);
    assert.deepEqual(meeting.missingChunks, []);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    for (const word of ['budget', 'marketing', 'engineers', 'friday'])
      assert.ok(text.includes(word), `lacks ${word}`);
    // Read again in order, the pieces add up to exactly the stream decoded whole.
    const whole = await new FfmpegAudioDecoder().decode(stream);
    const rows = await db
      .selectFrom('chunks')
      .select(['samples', 'decoded_after_gap', 'undecodable'])
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(
      rows.reduce((n, r) => n + (r.samples ?? 0), 0),
      whole.samples.length,
    );
    assert.ok(rows.every((r) => !r.decoded_after_gap && !r.undecodable));
    const replaced = await db
      .selectFrom('windows')
      .select('id')
      .where('meeting_id', '=', id)
      .where('status', '=', 'superseded')
      .execute();
    assert.ok(replaced.length > 0, 'the windows around the late piece were re-cut');
    await assertTimeline(db, id, { settled: true });
  } finally {
    await h.close();
  }
});

async function streamAndEnd(h: Harness, chunks: Buffer[]): Promise<string> {
  const id = await createLive(h);
  for (const [seq, chunk] of chunks.entries()) assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
  assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
  return id;
}

async function closeOutJob(h: Harness, meetingId: string) {
  const jobs = await h.app.database.db
    .selectFrom('jobs')
    .selectAll()
    .where('kind', '=', 'close-out-meeting')
    .where('meeting_id', '=', meetingId)
    .execute();
  assert.equal(
    jobs.length,
    1,
    'one close-out job for the meeting, returned to the queue rather than replaced',
  );
  const attempts = await h.app.database.db
    .selectFrom('job_attempts')
    .select('status')
    .where('job_id', '=', jobs[0]!.id)
    .orderBy('attempt_no')
    .execute();
  return { job: jobs[0]!, attempts: attempts.map((a) => a.status) };
}

/**
 * WebM pieces of a real stream, at these byte offsets and then every `every` bytes. Cuts close
 * together give pieces that hold no cluster start, and pieces that complete no block at all.
 */
function piecesOf(stream: Buffer, cuts: number[], every: number): Buffer[] {
  const pieces: Buffer[] = [];
  let at = 0;
  for (const c of cuts) {
    pieces.push(stream.subarray(at, c));
    at = c;
  }
  for (let i = at; i < stream.length; i += every) pieces.push(stream.subarray(i, i + every));
  return pieces;
}

/** Sends all pieces but `held`, waits until the timeline went past it, then sends it, and ends. */
async function holdBackPiece(h: Harness, pieces: Buffer[], held: number): Promise<string> {
  const id = await createLive(h);
  const db = h.app.database.db;
  for (const [seq, piece] of pieces.entries()) {
    if (seq !== held) assert.equal((await putChunk(h, id, seq, piece, 'audio/webm')).status, 201);
  }
  await waitFor('every piece but the held one to be placed', async () => {
    const m = await db
      .selectFrom('meetings')
      .select('next_seq')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return m.next_seq === pieces.length;
  });
  assert.equal((await putChunk(h, id, held, pieces[held]!, 'audio/webm')).status, 201);
  assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: pieces.length })).status, 202);
  await waitForMeeting(h, id);
  return id;
}

/** Read piece by piece after the repairs, the pieces hold exactly the stream decoded whole. */
async function assertWholeStream(h: Harness, id: string, stream: Buffer): Promise<void> {
  const whole = await new FfmpegAudioDecoder().decode(stream);
  const rows = await h.app.database.db
    .selectFrom('chunks')
    .select(['samples', 'decoded_after_gap'])
    .where('meeting_id', '=', id)
    .execute();
  assert.equal(
    rows.reduce((n, r) => n + (r.samples ?? 0), 0),
    whole.samples.length,
    'no sample of the stream lost or doubled',
  );
  assert.ok(
    rows.every((r) => !r.decoded_after_gap),
    'every piece read in full in the end',
  );
  await assertTimeline(h.app.database.db, id, { settled: true });
}

void it('L19: WebM pieces that hold no cluster start or no whole block, after a late piece, are read again in full and keep their places', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_GAP_PATIENCE_SECONDS: '0' } });
  try {
    h.spawnWorker();
    const stream = webmOpus(speechWav(`${SPEECH} ${SPEECH}`));
    // Piece 0 (the stream header) late: every piece after it is read as nothing until it comes.
    const first = await holdBackPiece(h, piecesOf(stream, [], 8000), 0);
    await assertWholeStream(h, first, stream);
    // Piece 2 late, pieces 3 and 4 too short to hold a cluster start.
    const second = await holdBackPiece(h, piecesOf(stream, [2000, 4400, 5400, 6400, 7400, 9000], 5000), 2);
    await assertWholeStream(h, second, stream);
    const text = (await h.request('GET', `/v1/meetings/${second}/transcript?format=txt`)).text.toLowerCase();
    for (const word of ['budget', 'engineers', 'friday']) assert.ok(text.includes(word), `lacks ${word}`);
  } finally {
    await h.close();
  }
});

void it('L19: a WebM piece that arrives after its meeting completed is spliced in without losing the words after it', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_GAP_PATIENCE_SECONDS: '0' } });
  try {
    h.spawnWorker();
    const stream = webmOpus(speechWav(`${SPEECH} ${SPEECH}`));
    const pieces = piecesOf(stream, [], 8000);
    const id = await createLive(h);
    for (const [seq, piece] of pieces.entries()) {
      if (seq !== 2) assert.equal((await putChunk(h, id, seq, piece, 'audio/webm')).status, 201);
    }
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: pieces.length })).status, 202);
    await waitForMeeting(h, id);
    const before = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    assert.equal((await putChunk(h, id, 2, pieces[2]!, 'audio/webm')).status, 201);
    await waitFor('the late piece spliced in', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.revision === 1 && !m.lateAudio.repairing && m.lateAudio.lateChunks === 0;
    });
    const after = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    // The words heard before stay (the audio around the piece is gone, so they cannot be heard again).
    for (const word of ['finance', 'friday', 'marketing']) {
      if (before.includes(word)) assert.ok(after.includes(word), `${word} was lost by the splice`);
    }
    await assertTimeline(h.app.database.db, id, { settled: true });
  } finally {
    await h.close();
  }
});

void it('L10: a close-out worker killed after the last stretch is reclaimed as the same job and completes', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const kill = [{ at: 'close-out-meeting.after-last-stretch', action: 'kill', times: 1 }];
    const sup = supervise(h, { VERBATIM_FAULTS: JSON.stringify(kill) });
    const id = await streamAndEnd(h, chunksOf(`${SPEECH} ${SPEECH}`));
    const meeting = await waitForMeeting(h, id);
    await sup.stop();
    assert.equal(meeting.minutes.status, 'written');
    const { job, attempts } = await closeOutJob(h, id);
    assert.equal(job.reclaim_count, 1, 'the reclaim was counted');
    assert.equal(job.error_count, 0);
    // Earlier runs may have ended normally while waiting for windows in retry (requeues, L4 step 2).
    assert.equal(attempts.filter((a) => a === 'lease_expired').length, 1);
    assert.equal(attempts.at(-1), 'completed');
    // The last stretch was committed once, before the kill, and not redone.
    const db = h.app.database.db;
    const windows = await db.selectFrom('windows').selectAll().where('meeting_id', '=', id).execute();
    assert.ok(windows.every((w) => w.status === 'transcribed'));
    const lastStretch = windows.reduce((a, b) => (b.start_ms > a.start_ms ? b : a));
    const settled = await db
      .selectFrom('audit_events')
      .select('id')
      .where('subject_id', '=', lastStretch.id)
      .where('to_status', '=', 'transcribed')
      .execute();
    assert.equal(settled.length, 1, 'the last stretch was committed once');
    const killed = await db
      .selectFrom('audit_events')
      .innerJoin('job_attempts', (j) =>
        j.on(sql`job_attempts.id::text`, '=', sql.ref('audit_events.subject_id')),
      )
      .select('audit_events.id')
      .where('job_attempts.job_id', '=', job.id)
      .where('audit_events.to_status', '=', 'lease_expired')
      .executeTakeFirstOrThrow();
    assert.ok(
      Number(settled[0]!.id) < Number(killed.id),
      'the last stretch was committed before the worker was killed',
    );
    const segments = await db
      .selectFrom('segments')
      .select(['start_ms', 'text'])
      .where('window_id', '=', lastStretch.id)
      .execute();
    assert.ok(segments.length > 0, 'the last stretch has words');
    assert.equal(
      new Set(segments.map((x) => `${x.start_ms}:${x.text}`)).size,
      segments.length,
      'and none of them twice: the stretch was not recognised and committed again',
    );
  } finally {
    await h.close();
  }
});

void it('L10/L11: past the reclaim cap the close-out fails the meeting with its reason and the audio is still deleted', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_MAX_RECLAIMS: '1' } });
  try {
    const kill = [{ at: 'close-out-meeting.after-last-stretch', action: 'kill' }];
    const sup = supervise(h, { VERBATIM_FAULTS: JSON.stringify(kill) });
    const id = await streamAndEnd(h, chunksOf(SPEECH));
    const meeting = await waitForMeeting(h, id, 'failed');
    assert.equal(meeting.failure.code, 'reclaim_cap_exceeded');
    assert.match(meeting.failure.message, /^This meeting stopped before it finished: /);
    const { attempts } = await closeOutJob(h, id);
    assert.deepEqual(attempts.slice(-2), ['lease_expired', 'lease_expired']);
    assert.ok(
      attempts.slice(0, -2).every((a) => a === 'completed'),
      'any earlier runs were waits',
    );
    await waitFor('the audio to be deleted', async () => {
      const left = await h.app.database.db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      return left.length === 0;
    });
    await sup.stop();
  } finally {
    await h.close();
  }
});

void it('L4/L6: a speech failure that passes (a timeout) on the last stretch is waited out: the stretch is transcribed, not failed', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    // Found by the simulation (issue 14): one timeout on the stretch the close-out transcribes
    // itself used to fail that window at once, and its words were deleted with the audio.
    const fault = [
      {
        at: 'close-out-meeting.transcribe-directly',
        action: 'throw',
        kind: 'transient',
        code: 'asr.timeout',
        times: 2,
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 0);
    assert.equal(meeting.windows.done, meeting.windows.total);
    assert.match(h.logs(), /the last stretch could not be transcribed yet; waiting/);
    const last = await h.app.database.db
      .selectFrom('windows')
      .select(['status'])
      .where('meeting_id', '=', id)
      .orderBy('index', 'desc')
      .executeTakeFirstOrThrow();
    assert.equal(last.status, 'transcribed');
  } finally {
    await h.close();
  }
});

void it('L6: when the last stretch cannot be transcribed only that window fails, and the minutes are still written', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const totalMs = chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0) / 16;
    const lastIndex = Math.floor(totalMs / 8000);
    const fault = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'permanent',
        code: 'asr.bad_request',
        match: { windowIndex: lastIndex },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 1);
    assert.equal(meeting.windows.done, meeting.windows.total - 1);
    assert.equal(meeting.minutes.status, 'written');
    const failed = await h.app.database.db
      .selectFrom('windows')
      .selectAll()
      .where('meeting_id', '=', id)
      .where('status', '=', 'failed')
      .executeTakeFirstOrThrow();
    assert.equal(failed.index, lastIndex);
    assert.equal(failed.failure_code, 'asr.bad_request');
    assert.match(h.logs(), /audio deleted while some windows have no transcript/);
  } finally {
    await h.close();
  }
});

void it('L4/L5: a window still in a recognizer retry at the end makes the close-out wait, then continue', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_RETRY_STEP_SECONDS: '1' } });
  try {
    const fault = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 2,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunksOf(`${SPEECH} ${SPEECH}`));
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.done, meeting.windows.total, 'the retried window made it in');
    const { job } = await closeOutJob(h, id);
    assert.ok(job.wait_count >= 1, 'the close-out requeued itself to wait');
    assert.equal(job.error_count, 0, 'waiting spent no retry');
    assert.equal(job.reclaim_count, 0);
    const window0 = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .innerJoin('windows', 'windows.id', 'jobs.subject_id')
      .select('job_attempts.status')
      .where('windows.meeting_id', '=', id)
      .where('windows.index', '=', 0)
      .orderBy('job_attempts.attempt_no')
      .execute();
    assert.deepEqual(
      window0.map((a) => a.status),
      ['retryable_failed', 'retryable_failed', 'completed'],
    );
  } finally {
    await h.close();
  }
});

void it('L4/L5: a window whose job vanished is waited on only until the wall-clock cap, then counted at deletion', async () => {
  const h = await startHarness({
    // The cap leaves the stretch cut at End time to be transcribed even on a loaded machine.
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '6', VERBATIM_RESCUE_AFTER_SECONDS: '3600' },
  });
  try {
    const db = h.app.database.db;
    const id = await createLive(h);
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    // The transport row of window 0's job disappears before any worker sees it.
    const job0 = await db
      .selectFrom('jobs')
      .innerJoin('windows', 'windows.id', 'jobs.subject_id')
      .select(['jobs.delivery_id'])
      .where('windows.meeting_id', '=', id)
      .where('windows.index', '=', 0)
      .executeTakeFirstOrThrow();
    await sql`select graphile_worker.remove_job(${job0.delivery_id}::text)`.execute(db);
    h.spawnWorker();
    // Every other window is transcribed before End: only the vanished one can be left in flight.
    await waitFor('the windows other than the vanished one to be transcribed', async () => {
      const open = await db
        .selectFrom('windows')
        .select('index')
        .where('meeting_id', '=', id)
        .where('index', '<>', 0)
        .where('status', '=', 'pending')
        .execute();
      return open.length === 0;
    });
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.inFlight, 1, 'the vanished window is still counted as being attempted');
    assert.deepEqual(meeting.untranscribedWhenAudioDeleted, { inFlight: 1, exhausted: 0 });
    assert.match(h.logs(), /close-out wait cap reached/);
    assert.match(
      h.logs(),
      /"inFlight":1,"exhausted":0,"missing":0,"msg":"audio deleted while some windows have no transcript"/,
    );
    const row = await db
      .selectFrom('meetings')
      .select(['closeout_wait_started_at', 'completed_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.ok(row.closeout_wait_started_at, 'when the wait began is stored');
    const waitedMs = row.completed_at!.getTime() - row.closeout_wait_started_at.getTime();
    assert.ok(waitedMs >= 6000, `waited ${waitedMs} ms, at least the 6 s cap`);
  } finally {
    await h.close();
  }
});

void it('L18: live window boundaries fall in pauses, where a fixed cut would split speech', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH} ${SPEECH}`);
    const id = await streamAndEnd(h, chunks);
    h.spawnWorker();
    await waitForMeeting(h, id);
    const all = new Int16Array(chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0));
    let at = 0;
    for (const c of chunks) {
      const s = parseWav(c)!.samples;
      all.set(s, at);
      at += s.length;
    }
    const rms = (centerMs: number) => {
      const from = Math.max(0, Math.round(centerMs * 16) - 800);
      let sum = 0;
      for (let i = from; i < from + 1600 && i < all.length; i++) sum += all[i]! * all[i]!;
      return Math.sqrt(sum / 1600);
    };
    const speechLevel = [...Array(Math.floor(all.length / 1600)).keys()]
      .map((k) => rms(k * 100 + 50))
      .sort((a, b) => a - b)
      .at(Math.floor(all.length / 1600 / 2))!;
    const windows = await h.app.database.db
      .selectFrom('windows')
      .select(['end_ms'])
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    const boundaries = windows.slice(0, -1).map((w) => w.end_ms);
    assert.ok(boundaries.length >= 3);
    for (const b of boundaries) assert.ok(rms(b) < speechLevel * 0.2, `boundary at ${b} ms is in a pause`);
    const fixedCutsInSpeech = boundaries
      .map((_, k) => (k + 1) * 8000)
      .filter((ms) => rms(ms) >= speechLevel * 0.2);
    assert.ok(fixedCutsInSpeech.length >= 1, 'a fixed cut would have landed in speech at least once');
  } finally {
    await h.close();
  }
});

void it('L24: End with every declared chunk stored starts the close-out without the grace wait; End with one missing waits, and that chunk’s arrival starts it at once', async () => {
  // A grace this long would outlast the test: only a close-out that skips it can complete.
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_GRACE_SECONDS: '3600' } });
  const closeOutDueIn = async (meetingId: string) => {
    const r = await sql<{
      s: number;
      status: string;
    }>`select status, extract(epoch from run_after - now())::float as s
      from jobs where kind = 'close-out-meeting' and meeting_id = ${meetingId}`.execute(h.app.database.db);
    assert.equal(r.rows.length, 1);
    return r.rows[0]!;
  };
  try {
    h.spawnWorker();
    const chunks = chunksOf(SPEECH);
    assert.ok(chunks.length >= 2);

    const whole = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, whole, seq, chunk)).status, 201);
    const ended = await h.request('POST', `/v1/meetings/${whole}/end`, { chunks: chunks.length });
    assert.equal(ended.status, 202, ended.text);
    const due = await closeOutDueIn(whole);
    assert.ok(due.status !== 'pending' || due.s <= 1, `the close-out was put ${due.s} s away`);
    assert.equal((await waitForMeeting(h, whole)).status, 'complete');

    const missing = await createLive(h);
    const last = chunks.length - 1;
    for (const [seq, chunk] of chunks.entries())
      if (seq !== last) assert.equal((await putChunk(h, missing, seq, chunk)).status, 201);
    assert.equal(
      (await h.request('POST', `/v1/meetings/${missing}/end`, { chunks: chunks.length })).status,
      202,
    );
    const waiting = await closeOutDueIn(missing);
    assert.equal(waiting.status, 'pending');
    assert.ok(waiting.s > 3000, `a missing chunk keeps the grace wait (due in ${waiting.s} s)`);
    assert.equal((await putChunk(h, missing, last, chunks[last]!)).status, 201);
    const woken = await closeOutDueIn(missing);
    assert.ok(woken.status !== 'pending' || woken.s <= 1, `the arrival woke it (due in ${woken.s} s)`);
    const meeting = await waitForMeeting(h, missing);
    assert.equal(meeting.status, 'complete');
    const text = (await h.request('GET', `/v1/meetings/${missing}/transcript?format=txt`)).text;
    assert.ok(text.toLowerCase().includes('budget'), text);
  } finally {
    await h.close();
  }
});

void it('L24: the last stretch is split at quiet points and its pieces are transcribed at once: one piece held up does not hold the other', async () => {
  // 60 s windows: the whole meeting is the last stretch, transcribed by the close-out itself.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_WINDOW_SECONDS: '60', VERBATIM_TRANSCRIPTION_CONCURRENCY: '2' },
  });
  const pieces = (id: string) =>
    h.app.database.db
      .selectFrom('windows')
      .select(['index', 'status', 'start_samples', 'end_samples'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('index')
      .execute();
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const seconds = chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0) / 16_000;
    assert.ok(seconds >= 16, `a last stretch long enough to share (${seconds} s)`);
    // The first piece's recognition never returns in this worker.
    const first = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'close-out-meeting.transcribe-directly', action: 'hang', times: 1, match: { windowIndex: 0 } },
      ]),
    });
    const id = await streamAndEnd(h, chunks);
    await waitFor('the second piece transcribed while the first is held up', async () => {
      const rows = await pieces(id);
      return rows.length === 2 && rows[1]!.status === 'transcribed' && rows[0]!.status === 'pending';
    });
    const rows = await pieces(id);
    assert.equal(Number(rows[0]!.start_samples), 0);
    assert.equal(Number(rows[0]!.end_samples), Number(rows[1]!.start_samples), 'the pieces meet');
    assert.equal(Number(rows[1]!.end_samples), Math.round(seconds * 16_000));
    // The worker dies with the first piece held; the next one finishes the meeting.
    first.proc.kill('SIGKILL');
    await first.exited;
    h.spawnWorker();
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    assert.equal(meeting.windows.exhausted, 0);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    const times = (w: string) => text.split(w).length - 1;
    assert.ok(times('budget') >= 1 && times('friday') >= 1, text);
  } finally {
    await h.close();
  }
});

void it('L4/L6: the last stretch has outage patience of its own: a close-out past its wait cap for windows in retry still waits out a passing failure there, and only past its outage waits does that window fail (found by the 30-minute simulation)', async () => {
  // A wait cap of 0 stands for a close-out that has already waited its 10 minutes for a slow
  // backlog; the retry step is short so the outage waits run out within the test.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0', VERBATIM_RETRY_STEP_SECONDS: '0.01' },
  });
  const overloaded = (times: number) =>
    JSON.stringify([
      {
        at: 'close-out-meeting.transcribe-directly',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times,
      },
    ]);
  const lastWindow = (id: string) =>
    h.app.database.db
      .selectFrom('windows')
      .select(['status', 'failure_code'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('start_samples', 'desc')
      .executeTakeFirstOrThrow();
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const passing = h.spawnWorker({ VERBATIM_FAULTS: overloaded(3) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 0, 'no window failed');
    assert.equal((await lastWindow(id)).status, 'transcribed');
    const job = (await closeOutJob(h, id)).job;
    assert.equal(job.error_count, 0, 'no retry spent');
    assert.ok(job.outage_waits >= 1, `outage waits counted: ${job.outage_waits}`);
    await passing.stop();

    // An outage that never passes: after its outage waits only the last stretch fails (L6).
    h.spawnWorker({ VERBATIM_FAULTS: overloaded(1000) });
    const other = await streamAndEnd(h, chunks);
    const ended = await waitForMeeting(h, other);
    assert.equal(ended.status, 'complete');
    assert.equal(ended.windows.exhausted, 1);
    assert.deepEqual(await lastWindow(other), { status: 'failed', failure_code: 'asr.overloaded' });
    assert.equal((await closeOutJob(h, other)).job.outage_waits, OUTAGE_WAITS);
  } finally {
    await h.close();
  }
});

void it('L16/L19: a late chunk spliced into a window still in retry after publication is transcribed with that whole window, whose audio was kept; no piece of it fails audio.deleted (found by the 30-minute soak)', async () => {
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '0.2',
      VERBATIM_GAP_PATIENCE_SECONDS: '0',
    },
  });
  try {
    // Window 0 ([0, 8 s): chunk 0 and the start of chunk 1) meets a long speech outage, so the
    // meeting is published while it is in retry, with the rest of its audio deleted.
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries()) {
      if (seq !== 1) assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    }
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    await waitForMeeting(h, id);
    const db = h.app.database.db;
    const meeting = await db
      .selectFrom('meetings')
      .select(['audio_deleted_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.ok(meeting.audio_deleted_at, 'published with its settled audio deleted: a late chunk is spliced');
    const zero = await db
      .selectFrom('windows')
      .select(['status', 'end_ms'])
      .where('meeting_id', '=', id)
      .where('index', '=', 0)
      .executeTakeFirstOrThrow();
    assert.equal(zero.status, 'pending', 'window 0 is still in retry');
    assert.ok(zero.end_ms > 5000, 'window 0 reaches into chunk 1’s reserved stretch');

    // Chunk 1 arrives late, into the reserved stretch window 0 reaches into.
    assert.equal((await putChunk(h, id, 1, chunks[1]!)).status, 201);
    await waitFor(
      'the repair and every window settled',
      async () => {
        const open = await db
          .selectFrom('windows')
          .select('id')
          .where('meeting_id', '=', id)
          .where('status', '=', 'pending')
          .execute();
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const gaps = await db
          .selectFrom('timeline_gaps')
          .select('id')
          .where('meeting_id', '=', id)
          .where('arrived_at', 'is not', null)
          .execute();
        return open.length === 0 && gaps.length === 0 && m.transcript_revision >= 1;
      },
      120_000,
    );
    const shown = await db
      .selectFrom('windows')
      .select(['index', 'start_ms', 'end_ms', 'status', 'failure_code', 'segment_count'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('start_ms')
      .execute();
    assert.deepEqual(
      shown.filter((w) => w.failure_code === 'audio.deleted'),
      [],
      `no stretch lost its words to a deletion: ${JSON.stringify(shown)}`,
    );
    const first = shown.find((w) => w.start_ms === 0)!;
    assert.equal(first.status, 'transcribed', JSON.stringify(shown));
    assert.ok((first.segment_count ?? 0) > 0, 'the words of chunk 0 are in the transcript');
  } finally {
    await h.close();
  }
});

void it('L4/L16: a window still being attempted when the close-out stops waiting at its cap keeps its audio until it settles, so its words still reach the transcript, which is revised for them (L19) (found by the 30-minute simulation: such windows failed audio.deleted)', async () => {
  // A wait cap of 0: the close-out does not wait for windows in retry at all.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0', VERBATIM_RETRY_STEP_SECONDS: '0.2' },
  });
  try {
    // Window 0's own job meets a speech outage that lasts well past the close-out (its outage
    // waits double from 0.2 s to 6.4 s: about 40 s in all).
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['status', 'failure_code'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    assert.equal((await windowZero()).status, 'pending', 'the meeting completed while window 0 was in retry');
    const kept = await db
      .selectFrom('blobs')
      .select('id')
      .where('meeting_id', '=', id)
      .where('deleted_at', 'is', null)
      .execute();
    assert.ok(kept.length > 0, 'the audio under window 0 is kept');

    // The outage passes: window 0 is transcribed from the audio kept for it, then that audio goes.
    await waitFor('window 0 to settle', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.deepEqual(await windowZero(), { status: 'transcribed', failure_code: null });
    await waitFor(
      'the kept audio to be deleted',
      async () =>
        (
          await db
            .selectFrom('blobs')
            .select('id')
            .where('meeting_id', '=', id)
            .where('deleted_at', 'is', null)
            .execute()
        ).length === 0,
      60_000,
    );
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    const zeroSegments = await db
      .selectFrom('segments as s')
      .innerJoin('windows as w', 'w.id', 's.window_id')
      .select('s.text')
      .where('w.meeting_id', '=', id)
      .where('w.index', '=', 0)
      .execute();
    assert.ok(zeroSegments.length > 0, 'window 0 has its segments');
    for (const seg of zeroSegments)
      assert.ok(text.includes(seg.text.toLowerCase().trim()), `"${seg.text}" is in the transcript: ${text}`);

    // L19: the words came after publication, so the transcript is revised like a late chunk's
    // repair: a new revision each time late words land, meeting.transcript_revised naming the
    // windows, minutes rewritten from the last revision, and no window counted as still in flight.
    // (With a wait cap of 0 the windows that were simply running at publication are late too.)
    await waitFor(
      'the minutes of the revised transcript',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision', 'minutes_revision', 'minutes_status', 'untranscribed_in_flight'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return (
          m.transcript_revision >= 1 &&
          m.minutes_revision === m.transcript_revision &&
          m.minutes_status === 'written' &&
          m.untranscribed_in_flight === 0
        );
      },
      60_000,
    );
    const revision = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json as { revision: number };
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const payloads = revised
      .map((r) => r.payload as { meetingId: string; revision: number; lateWindows: number[] })
      .sort((a, b) => a.revision - b.revision);
    assert.deepEqual(
      payloads.map((p) => p.revision),
      Array.from({ length: revision.revision }, (_, k) => k + 1),
      'one event per revision, each revision once',
    );
    const named = payloads.flatMap((p) => p.lateWindows);
    assert.ok(named.includes(0), `window 0 is named as late: ${JSON.stringify(payloads)}`);
    assert.equal(new Set(named).size, named.length, 'no window is published twice');
    const stillMarked = await db
      .selectFrom('windows')
      .select('index')
      .where('meeting_id', '=', id)
      .where('pending_at_publication', '=', true)
      .execute();
    assert.deepEqual(stillMarked, [], 'every window marked at publication was published');
    const row = await db
      .selectFrom('meetings')
      .select(['untranscribed_in_flight', 'untranscribed_exhausted'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { untranscribed_in_flight: 0, untranscribed_exhausted: 0 });
  } finally {
    await h.close();
  }
});

void it('J13/L19: a resubmit after the transcript was published gives a window still in retry a job again, so its words still come and revise the transcript (before, it was left pending with no job and its audio deleted)', async () => {
  // The minutes wait out an outage, so the close-out is still waiting for them after it published.
  let chatBack = false;
  const chat = await startFakeChat(() => (chatBack ? 'ok' : '503'));
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '0.2',
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  try {
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['id', 'status'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    await waitFor(
      'the transcript to be published while window 0 is in retry',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['status', 'transcript_completed_at'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return m.transcript_completed_at !== null;
      },
      60_000,
    );
    assert.equal((await windowZero()).status, 'pending', 'published while window 0 was in retry');

    const resubmitted = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(resubmitted.status, 202, resubmitted.text);
    const w0 = await windowZero();
    const active = await db
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', '=', w0.id)
      .where('status', 'in', ['pending', 'running'])
      .execute();
    assert.equal(active.length, 1, `window 0 (${w0.status}) has a job again`);
    chatBack = true;
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    await waitFor('window 0 to settle', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.equal((await windowZero()).status, 'transcribed');
    await waitFor(
      'the minutes of the revised transcript',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision', 'minutes_revision', 'minutes_status', 'untranscribed_in_flight'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return (
          m.transcript_revision >= 1 &&
          m.minutes_revision === m.transcript_revision &&
          m.minutes_status === 'written' &&
          m.untranscribed_in_flight === 0
        );
      },
      60_000,
    );
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const named = revised.flatMap((r) => (r.payload as { lateWindows: number[] }).lateWindows);
    assert.ok(named.includes(0), `window 0 revised the transcript: ${JSON.stringify(named)}`);
  } finally {
    await h.close();
    await chat.close();
  }
});

void it('L5/L19: a window that fails after its transcript was published is counted as untranscribed in the same transaction, and revises nothing', async () => {
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '1',
      VERBATIM_TRANSCRIBE_MAX_ERRORS: '6',
    },
  });
  try {
    // Window 0's job meets an error that spends its retries (not an outage) every time: it fails
    // for good after about half a minute of backoff, well after the close-out published.
    const broken = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.bad_response',
        times: 100,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(broken) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['status', 'failure_code', 'pending_at_publication'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    assert.equal((await windowZero()).status, 'pending', 'the meeting completed while window 0 was in retry');

    await waitFor('window 0 to fail', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.deepEqual(await windowZero(), {
      status: 'failed',
      failure_code: 'asr.bad_response',
      pending_at_publication: false,
    });
    // Its failure and the new counts commit together: no moment shows it neither in flight nor failed.
    const m = await db
      .selectFrom('meetings')
      .select(['untranscribed_in_flight', 'untranscribed_exhausted', 'transcript_revision'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(m.untranscribed_in_flight, 0);
    assert.equal(m.untranscribed_exhausted, 1, 'the failed window is counted');
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const named = revised.flatMap((r) => (r.payload as { lateWindows: number[] }).lateWindows);
    assert.ok(!named.includes(0), 'a window that failed revises nothing');
    assert.equal(revised.length, m.transcript_revision, 'one event per revision');
    const view = (await h.request('GET', `/v1/meetings/${id}`)).json as {
      untranscribedWhenAudioDeleted: { inFlight: number; exhausted: number } | null;
    };
    assert.deepEqual(view.untranscribedWhenAudioDeleted, { inFlight: 0, exhausted: 1 });
  } finally {
    await h.close();
  }
});
