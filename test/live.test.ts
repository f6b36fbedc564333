import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import { parseWav } from '../src/domain/wav.ts';
import {
  SPEECH,
  speechWav,
  webmOpus,
  startHarness,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';
import { assertTimeline, firstGapAndCut } from './support/timeline-oracle.ts';
import { CHUNK_SECONDS, LIVE_ENV, chunksOf, createLive, putChunk } from './support/live.ts';

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
