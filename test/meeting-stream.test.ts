import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { encodeWav, parseWav } from '../src/domain/wav.ts';
import { listen, plainSegments, spawnApi, transcriptOf } from './support/sse.ts';
import { compactStreams } from '../src/meetings/stream-store.ts';
import {
  METRICS_AUTH,
  SPEECH,
  speechWav,
  startHarness,
  waitFor,
  waitForMeeting,
  type Harness,
  type WorkerProcess,
} from './support/harness.ts';

const CHUNK_SECONDS = 5;

/** Speech cut into 5 s WAV chunks, as the browser sends them. */
function chunksOf(text: string): Buffer[] {
  const audio = parseWav(speechWav(text))!;
  const size = CHUNK_SECONDS * audio.sampleRate;
  const out: Buffer[] = [];
  for (let i = 0; i < audio.samples.length; i += size)
    out.push(encodeWav(audio.samples.subarray(i, i + size), audio.sampleRate));
  return out;
}

void describe('meeting streams and draft captions (issue 15 scopes 1 and 2)', () => {
  let h: Harness;
  const apis: WorkerProcess[] = [];
  let worker: WorkerProcess;
  let listener: { base: string };
  let chunks: Buffer[];

  async function createLive(title: string): Promise<string> {
    const res = await h.request('POST', '/v1/meetings', { source: 'live', title });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }
  async function put(id: string, seq: number): Promise<void> {
    const res = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, chunks[seq], {
      'content-type': 'audio/wav',
    });
    assert.ok(res.status < 300, `chunk ${seq}: ${res.text}`);
  }
  async function endWithAll(id: string): Promise<void> {
    const res = await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length });
    assert.equal(res.status, 202, res.text);
  }
  const draftRows = (id: string) =>
    h.app.database.db.selectFrom('drafts').selectAll().where('meeting_id', '=', id).execute();

  before(async () => {
    h = await startHarness({
      env: {
        VERBATIM_WINDOW_SECONDS: '8',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: String(CHUNK_SECONDS),
        VERBATIM_GAP_PATIENCE_SECONDS: String(2 * CHUNK_SECONDS),
        VERBATIM_MAX_CHUNK_BYTES: '400000',
        VERBATIM_DRAFTS: 'on',
      },
    });
    chunks = chunksOf(`${SPEECH} ${SPEECH} ${SPEECH}`);
    worker = h.spawnWorker();
    const api = await spawnApi(h);
    apis.push(api.proc);
    listener = api;
  });
  after(async () => {
    await Promise.all(apis.map((a) => a.stop()));
    await h?.close();
  });

  void it('L23: a client streaming to one api process and a listener on another get every event once, in order; a reconnect with Last-Event-ID misses nothing', async () => {
    const a = await spawnApi(h);
    apis.push(a.proc);
    const b = listener;
    const auth = { authorization: `Bearer ${h.apiKey}` };
    const created = await fetch(`${a.base}/v1/meetings`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'live', title: 'streamed' }),
    });
    const meetingId = ((await created.json()) as { id: string }).id;

    const putToA = async (seq: number) => {
      const res = await fetch(`${a.base}/v1/meetings/${meetingId}/chunks/${seq}`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'audio/wav' },
        body: chunks[seq],
      });
      assert.ok(res.status < 300, `chunk ${seq}: ${res.status}`);
    };

    // The listener is on the other process: what it gets came through Postgres, not memory.
    const first = listen(b.base, h.apiKey, meetingId);
    const half = Math.floor(chunks.length / 2);
    for (let seq = 0; seq < half; seq++) await putToA(seq);
    // Live: a window's words reach the listener while the meeting is still being recorded.
    await waitFor('a window streamed before End', async () =>
      first.events.some((e) => e.event === 'window' && e.data.status === 'transcribed'),
    );
    await first.close();
    const cut = first.lastId();
    assert.ok(cut !== null && cut > 0, 'the first connection got positioned events');

    // Changes go on while nobody listens; the reconnect names the last event it had.
    for (let seq = half; seq < chunks.length; seq++) await putToA(seq);
    const endRes = await fetch(`${a.base}/v1/meetings/${meetingId}/end`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ chunks: chunks.length }),
    });
    assert.equal(endRes.status, 202);
    const second = listen(b.base, h.apiKey, meetingId, cut);
    await waitForMeeting(h, meetingId, 'complete');
    await waitFor('the completed meeting on the stream', async () =>
      second.events.some(
        (e) => e.event === 'meeting' && e.data.status === 'complete' && e.data.transcriptComplete,
      ),
    );
    await second.close();

    const all = [...first.events, ...second.events];
    const ids = all.map((e) => e.id).filter((id): id is number => id !== null);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i]! > ids[i - 1]!, `ids in order: ${ids.join(',')}`);
    assert.ok(
      second.events.every((e) => e.id === null || e.id > cut),
      'nothing before Last-Event-ID again',
    );
    // Streamed in order, nothing re-cut: each window changes once (pending → transcribed).
    const windowEvents = all.filter((e) => e.event === 'window');
    const perWindow = new Map<string, number>();
    for (const e of windowEvents) perWindow.set(e.data.windowId, (perWindow.get(e.data.windowId) ?? 0) + 1);
    assert.ok(windowEvents.length >= 3, `windows streamed: ${windowEvents.length}`);
    assert.deepEqual(
      [...perWindow.values()].filter((n) => n !== 1),
      [],
      'every window event once',
    );
    const transcript = await h.request('GET', `/v1/meetings/${meetingId}/transcript`);
    assert.deepEqual(
      transcriptOf(all),
      plainSegments(transcript.json.segments),
      'the streamed transcript is the transcript',
    );
    assert.ok(transcript.json.segments.length > 0);
  });

  void it('L23: a bad Last-Event-ID gets a 400 naming it; an unknown or another workspace’s meeting a 404, before any stream', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'quiet' });
    const id = created.json.id as string;
    const bad = await h.request('GET', `/v1/meetings/${id}/events`, undefined, { 'last-event-id': 'abc' });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.code, 'stream.bad_last_event_id');
    assert.match(bad.json.error.message, /Last-Event-ID/);
    const unknown = await h.request('GET', '/v1/meetings/00000000-0000-4000-8000-000000000000/events');
    assert.equal(unknown.status, 404);
    const other = await h.app.workspaces.createWorkspace('other');
    const { apiKey } = await h.app.workspaces.createApiKey(other, 'other');
    const foreign = await h.api.inject({
      method: 'GET',
      url: `/v1/meetings/${id}/events`,
      headers: { authorization: `Bearer ${apiKey}` },
    });
    assert.equal(foreign.statusCode, 404, foreign.body);
  });

  void it('L23/S9: a stream stops once its key is revoked, and an api process shutting down ends its open streams instead of waiting on them', async () => {
    const id = await createLive('revoked');
    const temp = await h.app.workspaces.createApiKey(h.workspaceId, 'short-lived');
    const stream = listen(listener.base, temp.apiKey, id);
    await waitFor('the stream open', async () => stream.events.some((e) => e.event === 'meeting'));
    await h.app.workspaces.revokeApiKey(temp.keyId);
    await stream.done; // the server ends it: the body closes without the client hanging up
    assert.equal(stream.status(), 200);

    const api = await spawnApi(h);
    const open = listen(api.base, h.apiKey, id);
    await waitFor('a stream on the api to stop', async () => open.events.some((e) => e.event === 'meeting'));
    api.proc.proc.kill('SIGTERM');
    assert.equal(await api.proc.exited, 0, 'the api process stopped cleanly with a stream open');
    await open.done;
  });

  void it('L22: drafts appear for a streamed meeting before its first window is cut, and are gone once the finals cover them', async () => {
    const id = await createLive('drafted');
    await put(id, 0);
    // 5 s of audio, 8 s windows: no window yet, but the chunk's words are on the stream.
    const stream = listen(listener.base, h.apiKey, id);
    await waitFor('a draft on the stream', async () =>
      stream.events.find((e) => e.event === 'draft' && e.data.chunkSeq === 0 && e.data.text.length > 0),
    );
    const windowsBefore = await h.app.database.db
      .selectFrom('windows')
      .select('id')
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(windowsBefore.length, 0, 'the draft came before any window was cut');
    assert.equal(stream.events.filter((e) => e.event === 'window').length, 0);
    const draft = stream.events.find((e) => e.event === 'draft')!;
    assert.equal(draft.data.startMs, 0);
    // It ends at the quietest frame of the chunk's last second; the rest opens the next draft.
    assert.ok(
      draft.data.endMs > CHUNK_SECONDS * 1000 - 1000 && draft.data.endMs <= CHUNK_SECONDS * 1000,
      `draft ends at ${draft.data.endMs} ms`,
    );

    for (let seq = 1; seq < chunks.length; seq++) await put(id, seq);
    await endWithAll(id);
    await waitForMeeting(h, id, 'complete');
    await waitFor('the completed meeting on the stream', async () =>
      stream.events.some((e) => e.event === 'meeting' && e.data.transcriptComplete),
    );
    await stream.close();
    assert.deepEqual(await draftRows(id), [], 'no draft outlives the finals');
    // A client arriving now sees the finals only.
    const late = listen(listener.base, h.apiKey, id);
    await waitFor('the replay', async () => late.events.some((e) => e.event === 'meeting'));
    await late.close();
    assert.equal(late.events.filter((e) => e.event === 'draft').length, 0);
    const transcript = await h.request('GET', `/v1/meetings/${id}/transcript`);
    assert.deepEqual(transcriptOf(late.events), plainSegments(transcript.json.segments));
  });

  void it('L23: a compacted stream (each window, draft and the meeting kept at its last change) gives a client resuming from any position the same events, and later changes still reach it', async () => {
    const id = await createLive('compacted');
    for (let seq = 0; seq < chunks.length; seq++) await put(id, seq);
    await endWithAll(id);
    await waitForMeeting(h, id, 'complete');
    const db = h.app.database.db;
    const rows = () =>
      db
        .selectFrom('meeting_stream')
        .select(['seq', 'kind', 'ref'])
        .where('meeting_id', '=', id)
        .orderBy('seq')
        .execute();
    // What a client resuming from `from` is sent: the meeting is settled, so its stream sends what
    // came after `from`, then `end`, and closes (F3); from the top, nothing (204).
    const resume = async (from: number) => {
      const s = listen(listener.base, h.apiKey, id, from === 0 ? undefined : from);
      await s.done;
      assert.equal(s.status(), from === top ? 204 : 200, `the stream from ${from}`);
      if (from !== top) assert.equal(s.events.at(-1)?.event, 'end');
      return s.events;
    };
    let top = Number.NaN;
    await resume(0); // positions every row
    const before = await rows();
    top = Number(before.at(-1)!.seq);
    const froms = [0, ...before.filter((_, i) => i % 7 === 3).map((r) => Number(r.seq)), top];
    const seen = new Map<number, unknown>();
    for (const from of froms) seen.set(from, await resume(from));

    await compactStreams(db);
    const after = await rows();
    assert.ok(after.length < before.length, `compacted: ${before.length} rows → ${after.length}`);
    assert.equal(Number(after.at(-1)!.seq), top, "the meeting's last position stays");
    const subjects = after.map((r) => `${r.kind} ${r.ref ?? ''}`);
    assert.equal(new Set(subjects).size, subjects.length, 'one row per window, draft and the meeting');
    for (const from of froms)
      assert.deepEqual(await resume(from), seen.get(from), `the same events from position ${from}`);

    // A change after the compaction is positioned after the last one, and reaches a client back
    // there (then `end`: the meeting is still settled).
    await db.updateTable('meetings').set({ title: 'renamed' }).where('id', '=', id).execute();
    const s = listen(listener.base, h.apiKey, id, top);
    await s.done;
    assert.ok(s.events.find((e) => e.event === 'meeting' && e.data.title === 'renamed'));
    assert.equal(s.events.at(-1)?.event, 'end');
    assert.ok(s.lastId()! > top, `positioned after ${top}: ${s.lastId()}`);
  });

  void it('L22: the finals are the same with drafts on and off', async () => {
    const config = h.app.deps.config as { drafts: boolean };
    const run = async (drafts: boolean) => {
      config.drafts = drafts;
      try {
        const id = await createLive(`drafts ${drafts ? 'on' : 'off'}`);
        for (let seq = 0; seq < chunks.length; seq++) await put(id, seq);
        await endWithAll(id);
        await waitForMeeting(h, id, 'complete');
        const made = await h.app.database.db
          .selectFrom('meeting_stream')
          .select('id')
          .where('meeting_id', '=', id)
          .where('kind', '=', 'draft')
          .execute();
        return {
          transcript: (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text,
          made,
        };
      } finally {
        config.drafts = true;
      }
    };
    const on = await run(true);
    const off = await run(false);
    assert.ok(on.made.length > 0, 'drafts were made with drafts on');
    assert.equal(off.made.length, 0, 'and none with drafts off');
    assert.ok(on.transcript.length > 0);
    assert.equal(on.transcript, off.transcript, 'byte-identical finals');
  });

  void it('L22: with the drafts queue made slow, drafts are shed and counted while every window is transcribed', async () => {
    await worker.stop();
    // Every draft takes 3 s more; a draft job starting over 1 s after its chunk is shed.
    worker = h.spawnWorker({
      VERBATIM_DRAFT_LAG_SECONDS: '1',
      VERBATIM_FAULTS: JSON.stringify([{ at: 'draft.recognise', action: 'delay', ms: 3000 }]),
    });
    const id = await createLive('slow drafts');
    for (let seq = 0; seq < chunks.length; seq++) await put(id, seq);
    await endWithAll(id);
    const done = await waitForMeeting(h, id, 'complete');
    assert.equal(done.windows.done, done.windows.total, 'every window has its final words');
    assert.ok(done.drafts.shed > 0, `drafts shed: ${done.drafts.shed}`);
    const metrics = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
    const shed = /^verbatim_drafts_shed_total (\d+)$/m.exec(metrics.body);
    assert.ok(shed && Number(shed[1]) >= done.drafts.shed, metrics.body.slice(0, 200));
  });
});
