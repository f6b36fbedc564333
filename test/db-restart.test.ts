import assert from 'node:assert/strict';
import { it } from 'node:test';
import { encodeWav, parseWav } from '../src/domain/wav.ts';
import { startCluster } from './support/cluster.ts';
import { SPEECH, speechWav, startHarness, waitFor, waitForMeeting } from './support/harness.ts';

void it('L12: Postgres restarts while chunks stream in; no process exits, uploads resume, nothing is lost', async () => {
  // Below Linux's ephemeral range (32768–60999): no outgoing connection of a test file running
  // beside this one can hold the port (55432 was taken so once, in CI, and the cluster could not start).
  const cluster = startCluster(31432);
  try {
    const h = await startHarness({
      adminUrl: cluster.url,
      env: {
        VERBATIM_WINDOW_SECONDS: '8',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: '5',
      },
    });
    try {
      const worker = h.spawnWorker();
      const audio = parseWav(speechWav(`${SPEECH} ${SPEECH}`))!;
      const chunks: Buffer[] = [];
      for (let i = 0; i < audio.samples.length; i += 5 * 16000) {
        chunks.push(encodeWav(audio.samples.subarray(i, i + 5 * 16000), 16000));
      }
      const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'failover' });
      const id = created.json.id as string;
      // A client retries a chunk the server could not take, as the browser recorder does.
      let lastAnswer = '';
      const send = async (seq: number) =>
        waitFor(
          () => `chunk ${seq} to be stored (last answer: ${lastAnswer})`,
          async () => {
            const res = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, chunks[seq]!, {
              'content-type': 'audio/wav',
            });
            if (res.status !== 201 && res.status !== 200) lastAnswer = `${res.status} ${res.text}`;
            return res.status === 201 || res.status === 200;
          },
        );
      const half = Math.floor(chunks.length / 2);
      for (let seq = 0; seq < half; seq++) await send(seq);
      cluster.restart();
      for (let seq = half; seq < chunks.length; seq++) await send(seq);
      await waitFor('the meeting to end', async () => {
        const res = await h.request('POST', `/v1/meetings/${id}/end`);
        return res.status === 202;
      });
      const meeting = await waitForMeeting(h, id);
      assert.equal(worker.proc.exitCode, null, 'the worker survived the restart');
      assert.equal(meeting.windows.done, meeting.windows.total);
      assert.deepEqual(meeting.missingChunks, []);
      const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
      for (const word of ['budget', 'marketing', 'finance'])
        assert.ok(text.includes(word), `lacks ${word}: ${text}`);
    } finally {
      await h.close();
    }
  } finally {
    cluster.stop();
  }
});
