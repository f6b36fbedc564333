// Issue 38 (F3, in part): an event stream has a lifetime; its client comes back with its
// Last-Event-ID and misses nothing, gets nothing twice.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { markedChunk } from './support/chunk-recognizer.ts';
import { startHarness, waitFor } from './support/harness.ts';
import { listen, spawnApi } from './support/sse.ts';

void it('F3: a stream ends after VERBATIM_STREAM_MAX_SECONDS; opened again with its last id it sends only what came after, nothing twice', async () => {
  const h = await startHarness({ env: { VERBATIM_STREAM_MAX_SECONDS: '2' } });
  const { proc, base } = await spawnApi(h);
  try {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'short streams' });
    const id = created.json.id as string;
    const put = async (seq: number) => {
      const res = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq), {
        'content-type': 'audio/wav',
      });
      assert.equal(res.status, 201, res.text);
    };
    await put(0);
    const first = listen(base, h.apiKey, id);
    let ended = false;
    void first.done.then(() => (ended = true));
    await waitFor('the stream to end by itself', async () => ended, 30_000);
    assert.equal(first.status(), 200);
    assert.ok(
      first.events.some((e) => e.event === 'meeting'),
      'it sent the meeting first',
    );
    const last = first.lastId();
    assert.ok(last !== null, 'with ids to come back with');

    // Something happens while no stream is open; the client comes back with its last id.
    await put(1);
    const again = listen(base, h.apiKey, id, last);
    await waitFor('what came after', async () =>
      again.events.some((e) => e.event === 'meeting' && e.id !== null && e.id > last),
    );
    assert.ok(
      again.events.every((e) => e.id === null || e.id > last),
      `nothing twice: ${again.events.map((e) => e.id).join(', ')} after ${last}`,
    );
    await again.close();
  } finally {
    await proc.stop();
    await h.close();
  }
});

void it('F3: a stream ends when its meeting is settled (its last batch, then `end`); opened again with its last id it gets 204', async () => {
  const h = await startHarness();
  const { proc, base } = await spawnApi(h);
  try {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'a short call' });
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/chunks/0`, markedChunk(0), {
      'content-type': 'audio/wav',
    });
    assert.equal(put.status, 201, put.text);
    const stream = listen(base, h.apiKey, id);
    let ended = false;
    void stream.done.then(() => (ended = true));
    await waitFor('the stream to send the meeting', async () =>
      stream.events.some((e) => e.event === 'meeting'),
    );
    h.spawnWorker();
    const end = await h.request('POST', `/v1/meetings/${id}/end`, {});
    assert.ok(end.status < 300, end.text);
    await waitFor('the stream to end by itself once the meeting is settled', async () => ended, 120_000);
    const meetings = stream.events.filter((e) => e.event === 'meeting');
    const lastMeeting = meetings.at(-1)?.data as { status: string; minutes: { status: string } };
    assert.equal(lastMeeting.status, 'complete', 'the last batch showed it complete');
    assert.notEqual(lastMeeting.minutes.status, 'pending');
    assert.equal(stream.events.at(-1)?.event, 'end', 'and the stream said it was done');
    const last = stream.lastId();
    assert.ok(last !== null);

    // The meeting row may still change once after it settled (its audio handed to cleanup): a
    // client back with its last id then gets that change and `end` again, and next time 204.
    let cursor = last;
    let answered = 0;
    for (let tries = 0; ; tries++) {
      assert.ok(tries < 3, 'the reconnecting ends with 204');
      const again = listen(base, h.apiKey, id, cursor);
      await again.done;
      answered = again.status();
      if (answered === 204) break;
      assert.equal(answered, 200);
      assert.ok(
        again.events.every((e) => e.id === null || e.id > cursor),
        `only what came after ${cursor}: ${again.events.map((e) => `${e.event}@${e.id}`).join(', ')}`,
      );
      assert.equal(again.events.at(-1)?.event, 'end', 'a settled meeting’s stream ends again');
      cursor = again.lastId() ?? cursor;
    }
    assert.equal(answered, 204, 'nothing came since: 204 ends the reconnecting');
    // Without an id the client gets the whole meeting, then `end`.
    const fresh = listen(base, h.apiKey, id);
    await fresh.done;
    assert.equal(fresh.status(), 200);
    assert.equal(fresh.events.at(-1)?.event, 'end');
    assert.ok(fresh.events.some((e) => e.event === 'window'));
  } finally {
    await proc.stop();
    await h.close();
  }
});
