// Issue 38 (F2): limits by workspace, each refusal a 429 with Retry-After naming its limit.
import assert from 'node:assert/strict';
import http from 'node:http';
import { it } from 'node:test';
import { sql } from 'kysely';
import { markedChunk } from './support/chunk-recognizer.ts';
import { SPEECH, speechWav, spawnVerbatim, startHarness, waitFor } from './support/harness.ts';
import { listen, spawnApi } from './support/sse.ts';

void it('F2: a burst of concurrent calls within the workspace’s budget is answered in full, and the budget still holds past it', async () => {
  // 600 calls a window: blocks of 6 tokens. Before refills were shared, each of the 300 calls that
  // found no token took a block of its own and kept only its own, and most of them got 429.
  const h = await startHarness({
    env: {
      VERBATIM_WORKSPACE_RATE_LIMIT_REQUESTS: '600',
      VERBATIM_RATE_LIMIT_WINDOW_SECONDS: '600',
      VERBATIM_RATE_LIMIT_REQUESTS: '10000',
    },
  });
  try {
    const burst = await Promise.all(Array.from({ length: 300 }, () => h.request('GET', '/v1/meetings')));
    const statuses = burst.map((r) => r.status);
    assert.equal(
      statuses.filter((s) => s === 200).length,
      300,
      `every call of the burst answered: ${[...new Set(statuses)].join(' ')}`,
    );
    // The rest of the budget, and not much more: the limit still holds.
    const more = await Promise.all(Array.from({ length: 400 }, () => h.request('GET', '/v1/meetings')));
    const granted = more.filter((r) => r.status === 200).length;
    assert.ok(
      granted >= 290 && granted <= 310,
      `about the 300 calls left of 600 (and the few refilled meanwhile) were granted (${granted})`,
    );
    assert.ok(more.some((r) => r.status === 429 && r.json.error.code === 'request.workspace_rate_limited'));
  } finally {
    await h.close();
  }
});

void it('F2: a workspace’s call budget holds across its keys and api processes; live chunks and other workspaces are not held by it', async () => {
  const h = await startHarness({
    env: {
      VERBATIM_WORKSPACE_RATE_LIMIT_REQUESTS: '10',
      // Ten calls in ten minutes: nothing refills while the test runs.
      VERBATIM_RATE_LIMIT_WINDOW_SECONDS: '600',
      VERBATIM_RATE_LIMIT_REQUESTS: '1000',
    },
  });
  const { proc, base } = await spawnApi(h);
  try {
    const { apiKey: second } = await h.app.workspaces.createApiKey(h.workspaceId, 'second key');
    const otherWs = await h.app.workspaces.createWorkspace('other team');
    const { apiKey: other } = await h.app.workspaces.createApiKey(otherWs, 'other');

    const live = await h.request('POST', '/v1/meetings', { source: 'live', title: 'standup' });
    assert.equal(live.status, 201, live.text);
    const statuses: number[] = [];
    const refusals: Array<{ retryAfter: string | null; body: { error: { code: string; message: string } } }> =
      [];
    for (let i = 0; i < 6; i++) {
      // One key through this process…
      const here = await h.request('GET', '/v1/meetings');
      statuses.push(here.status);
      if (here.status === 429)
        refusals.push({ retryAfter: String(here.headers['retry-after'] ?? ''), body: here.json });
      // …the other through a second api process.
      const there = await fetch(`${base}/v1/meetings`, { headers: { authorization: `Bearer ${second}` } });
      statuses.push(there.status);
      if (there.status === 429)
        refusals.push({
          retryAfter: there.headers.get('retry-after'),
          body: (await there.json()) as (typeof refusals)[number]['body'],
        });
      else await there.arrayBuffer();
    }
    assert.equal(
      statuses.filter((s) => s === 200).length,
      9,
      `ten calls in all (the meeting's creation and nine reads), across both keys and both processes: ${statuses.join(' ')}`,
    );
    assert.equal(refusals.length, 3);
    for (const r of refusals) {
      assert.equal(r.body.error.code, 'request.workspace_rate_limited');
      assert.match(r.body.error.message, /more than 10 calls .*VERBATIM_WORKSPACE_RATE_LIMIT_REQUESTS/);
      assert.ok(Number(r.retryAfter) >= 1, `Retry-After ${r.retryAfter}`);
    }
    // A recording is never held back by its workspace's reads.
    const chunk = await h.request('PUT', `/v1/meetings/${live.json.id}/chunks/0`, markedChunk(0), {
      'content-type': 'audio/wav',
    });
    assert.equal(chunk.status, 201, chunk.text);
    // Another workspace has its own budget.
    const theirs = await h.request('GET', '/v1/meetings', undefined, { authorization: `Bearer ${other}` });
    assert.equal(theirs.status, 200);
  } finally {
    await proc.stop();
    await h.close();
  }
});

void it('F2: event streams are limited per key (429 stream.too_many with Retry-After); a closed stream frees its place', async () => {
  const h = await startHarness({ env: { VERBATIM_STREAMS_PER_KEY: '2' } });
  const { proc, base } = await spawnApi(h);
  try {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'watched' });
    const id = created.json.id as string;
    const a = listen(base, h.apiKey, id);
    const b = listen(base, h.apiKey, id);
    await waitFor('two streams open', async () => a.events.length > 0 && b.events.length > 0);
    const third = await fetch(`${base}/v1/meetings/${id}/events`, {
      headers: { authorization: `Bearer ${h.apiKey}` },
    });
    assert.equal(third.status, 429);
    assert.ok(Number(third.headers.get('retry-after')) >= 1);
    const body = (await third.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'stream.too_many');
    assert.match(body.error.message, /VERBATIM_STREAMS_PER_KEY/);
    // Another key of the workspace is not held by this one's streams.
    const { apiKey: second } = await h.app.workspaces.createApiKey(h.workspaceId, 'second');
    const c = listen(base, second, id);
    await waitFor('another key’s stream', async () => c.events.length > 0);
    await a.close();
    await waitFor('the place to be free again', async () => {
      const d = listen(base, h.apiKey, id);
      await waitFor('an answer', async () => d.status() !== 0);
      const ok = d.status() === 200;
      await d.close();
      return ok;
    });
    await b.close();
    await c.close();
  } finally {
    await proc.stop();
    await h.close();
  }
});

void it('F7: each workspace’s open event streams, across api processes, are shown by `verbatim status` and the operator page; closed streams and a stopped process leave the count', async () => {
  const h = await startHarness();
  const one = await spawnApi(h);
  const two = await spawnApi(h);
  let twoStopped = false;
  try {
    const other = await h.app.workspaces.createWorkspace('quiet team');
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'watched' });
    const id = created.json.id as string;
    const streams = [
      listen(one.base, h.apiKey, id),
      listen(one.base, h.apiKey, id),
      listen(two.base, h.apiKey, id),
    ];
    await waitFor('three streams open', async () => streams.every((s) => s.events.length > 0));
    const openStreams = async () =>
      (await h.request('GET', '/v1/operator/overview')).json.usage.openStreams as number;
    await waitFor(
      'the operator page to count three streams on two processes',
      async () => (await openStreams()) === 3,
    );
    const status = spawnVerbatim(['status'], h.env());
    assert.equal(await status.exited, 0, status.output());
    const lines = status.output().split('\n');
    assert.match(lines.find((l) => l.startsWith(h.workspaceId)) ?? '', /\s3$/, status.output());
    assert.match(lines.find((l) => l.startsWith(other)) ?? '', /\s0$/, 'another workspace has none');
    await streams[0]!.close();
    await waitFor('a closed stream to leave the count', async () => (await openStreams()) === 2);
    // Its stream is cut when it stops (the client sees the connection end).
    streams[2]!.done.catch(() => undefined);
    await two.proc.stop();
    twoStopped = true;
    await waitFor('a stopped process’s streams to leave the count', async () => (await openStreams()) === 1);
    await streams[1]!.close();
    await waitFor('the last stream to leave the count', async () => (await openStreams()) === 0);
  } finally {
    await one.proc.stop();
    if (!twoStopped) await two.proc.stop();
    await h.close();
  }
});

void it('F2: a workspace’s webhook endpoints are limited (429 webhook.too_many naming the setting); deleting one makes room', async () => {
  const h = await startHarness({ env: { VERBATIM_WEBHOOK_ENDPOINTS_PER_WORKSPACE: '2' } });
  try {
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const res = await h.request('POST', '/v1/webhooks', { url: `http://127.0.0.1:9/hook/${n}` });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.id as string);
    }
    const third = await h.request('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook/3' });
    assert.equal(third.status, 429, third.text);
    assert.equal(third.json.error.code, 'webhook.too_many');
    assert.match(third.json.error.message, /VERBATIM_WEBHOOK_ENDPOINTS_PER_WORKSPACE/);
    assert.ok(Number(third.headers['retry-after']) >= 1);
    const removed = await h.request('DELETE', `/v1/webhooks/${ids[0]}`);
    assert.ok(removed.status < 300, removed.text);
    const again = await h.request('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook/3' });
    assert.equal(again.status, 201, again.text);
  } finally {
    await h.close();
  }
});

/** Starts a PUT of `body` to `url` that sends its first `held` bytes and waits; `finish()` sends the rest. */
function heldUpload(url: string, apiKey: string, body: Buffer, held: number) {
  let finished = false;
  const req = http.request(url, {
    method: 'PUT',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'audio/wav',
      'content-length': String(body.length),
    },
  });
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
  });
  req.write(body.subarray(0, held));
  return {
    answer,
    finish: () => {
      if (finished) return;
      finished = true;
      req.end(body.subarray(held));
    },
  };
}

void it('F2: a workspace’s uploads in flight are limited across api processes (429 upload.too_many with Retry-After, nothing kept); other workspaces and a finished upload make room', async () => {
  const h = await startHarness({ env: { VERBATIM_UPLOADS_PER_WORKSPACE: '2' } });
  const one = await spawnApi(h);
  const two = await spawnApi(h);
  const owner = h.db.owner();
  const staged = async () =>
    Number(
      (
        await sql<{ n: number }>`select count(*)::int as n from object_cleanups
          where workspace_id = ${h.workspaceId}::uuid and state = 'staged'`.execute(owner)
      ).rows[0]?.n,
    );
  const newMeeting = async (auth: Record<string, string> = {}) => {
    const res = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'upload' }, auth);
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const wav = speechWav(SPEECH);
  const holds: Array<ReturnType<typeof heldUpload>> = [];
  try {
    // Two uploads of the workspace streaming in, one through each api process.
    for (const api of [one, two]) {
      const id = await newMeeting();
      holds.push(heldUpload(`${api.base}/v1/meetings/${id}/recording`, h.apiKey, wav, 8192));
    }
    await waitFor('both uploads to be staged', async () => ((await staged()) === 2 ? true : null));

    // A third, through either process, is refused before any byte of it is kept.
    const third = await newMeeting();
    const refused = await fetch(`${one.base}/v1/meetings/${third}/recording`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
      body: wav,
    });
    const body = (await refused.json()) as { error: { code: string; message: string } };
    assert.equal(refused.status, 429, JSON.stringify(body));
    assert.equal(body.error.code, 'upload.too_many');
    assert.match(body.error.message, /2 recordings at once \(VERBATIM_UPLOADS_PER_WORKSPACE\)/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1, 'Retry-After');
    assert.equal(await staged(), 2, 'the refused upload left nothing staged');
    assert.equal(
      (await h.request('GET', `/v1/meetings/${third}`)).json.status,
      'created',
      'its meeting waits for it',
    );

    // Another workspace uploads meanwhile.
    const otherWs = await h.app.workspaces.createWorkspace('other team');
    const { apiKey: other } = await h.app.workspaces.createApiKey(otherWs, 'other');
    const theirs = await newMeeting({ authorization: `Bearer ${other}` });
    const res = await fetch(`${two.base}/v1/meetings/${theirs}/recording`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${other}`, 'content-type': 'audio/wav' },
      body: wav,
    });
    assert.equal(res.status, 202, await res.text());

    // One upload arrives whole: the refused one now goes in.
    holds[0]!.finish();
    assert.equal((await holds[0]!.answer).status, 202);
    const again = await fetch(`${two.base}/v1/meetings/${third}/recording`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
      body: wav,
    });
    assert.equal(again.status, 202, await again.text());
    holds[1]!.finish();
    assert.equal((await holds[1]!.answer).status, 202);
  } finally {
    for (const u of holds) u.finish();
    one.proc.proc.kill('SIGTERM');
    two.proc.proc.kill('SIGTERM');
    await Promise.all([one.proc.exited, two.proc.exited]);
    await h.close();
  }
});
