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
