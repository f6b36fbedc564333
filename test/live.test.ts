import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { encodeWav, parseWav } from '../src/domain/wav.ts';
import { SPEECH, speechWav, startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';

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

    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    const late = await putChunk(h, id, 1, chunks[1]!);
    assert.equal(late.status, 409);
    assert.equal(late.json.error.code, 'meeting.not_recording');
    const stored = await h.app.database.db
      .selectFrom('chunks')
      .selectAll()
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(stored.length, 1, 'nothing already stored was lost');
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
    const lastWindowSettled = Math.max(
      ...trail
        .filter((a) => windows.some((w) => w.id === a.subject_id) && a.to_status === 'transcribed')
        .map((a) => Number(a.id)),
    );
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
});
