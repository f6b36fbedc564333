import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  freePort,
  memoryOf,
  SPEECH,
  spawnVerbatim,
  speechWav,
  startHarness,
  waitFor,
  waitForMeeting,
  type Harness,
  type WorkerProcess,
} from './support/harness.ts';

const MiB = 1024 * 1024;

/** A WAV header for `dataBytes` of 16 kHz mono 16-bit samples. */
function wavHeader(dataBytes: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(Math.min(0xffffffff, 36 + dataBytes), 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(16_000, 24);
  h.writeUInt32LE(32_000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/**
 * PUTs a body of `total` bytes (a WAV header, then a repeated 1 MiB piece) to `url`, announcing its
 * length; with `cutAfter`, the connection is destroyed once that many bytes were written.
 */
function putBody(
  url: string,
  apiKey: string,
  total: number,
  cutAfter?: number,
  announce = true,
): Promise<{ status: number; body: string } | 'cut'> {
  return new Promise((resolve, reject) => {
    // Without a Content-Length, Node sends the body chunked.
    const req = http.request(url, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'audio/wav',
        ...(announce ? { 'content-length': total } : {}),
      },
    });
    const piece = Buffer.alloc(MiB);
    for (let i = 0; i < piece.length; i += 2) piece.writeInt16LE(Math.round(3000 * Math.sin(i / 20)), i);
    let sent = 0;
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', (err) => (cutAfter !== undefined ? resolve('cut') : reject(err)));
    const write = () => {
      for (;;) {
        if (cutAfter !== undefined && sent >= cutAfter) {
          req.destroy();
          resolve('cut');
          return;
        }
        if (sent >= total) {
          req.end();
          return;
        }
        const chunk =
          sent === 0 ? wavHeader(total - 44) : piece.subarray(0, Math.min(piece.length, total - sent));
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', write);
          return;
        }
      }
    };
    write();
  });
}

void describe('B10: uploads stream into storage', () => {
  let h: Harness;
  let api: WorkerProcess;
  let base: string;

  before(async () => {
    h = await startHarness({ env: { VERBATIM_MAX_UPLOAD_BYTES: String(2048 * MiB) } });
    const port = await freePort();
    api = spawnVerbatim(['api'], h.env({ VERBATIM_PORT: String(port) }));
    base = `http://127.0.0.1:${port}`;
    await waitFor(
      `api on ${port}`,
      async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok ?? false,
    );
  });
  after(async () => {
    await api.stop();
    await h.close();
  });

  const createMeeting = async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'streamed' });
    assert.equal(created.status, 201);
    return created.json.id as string;
  };

  void it('B10: an upload whose connection drops halfway leaves no object and the meeting unchanged; the same meeting then takes its recording', async () => {
    const id = await createMeeting();
    const cut = await putBody(`${base}/v1/meetings/${id}/recording`, h.apiKey, 40 * MiB, 20 * MiB);
    assert.equal(cut, 'cut');
    const db = h.app.database.db;
    // The api notices the cut and compensates: the staged row becomes a pending cleanup and no
    // object exists; a worker's sweep then removes the cleanup row (the stage deadline is the
    // backstop for an api that died midway).
    const worker = h.spawnWorker();
    try {
      await waitFor('the cut upload cleaned up', async () => {
        const rows = await db
          .selectFrom('object_cleanups')
          .select('state')
          .where('meeting_id', '=', id)
          .execute();
        return rows.length === 0;
      });
      const meeting = await h.request('GET', `/v1/meetings/${id}`);
      assert.equal(meeting.json.status, 'created');
      const blobs = await db.selectFrom('blobs').select('id').where('meeting_id', '=', id).execute();
      assert.deepEqual(blobs, []);
      const dir = path.join(h.dataDir, 'blobs', h.workspaceId, id);
      const files = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
      assert.deepEqual(files, [], 'no object and no temporary on disk');

      // Nothing is stuck: the meeting takes its recording and is transcribed.
      const wav = speechWav(SPEECH);
      const put = await fetch(`${base}/v1/meetings/${id}/recording`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
        body: wav,
      });
      assert.equal(put.status, 202, await put.text());
      const done = await waitForMeeting(h, id);
      assert.equal(done.status, 'complete');
      const stored = await db
        .selectFrom('blobs')
        .select(['size_bytes', 'sha256'])
        .where('meeting_id', '=', id)
        .where('kind', '=', 'recording')
        .executeTakeFirstOrThrow();
      assert.equal(Number(stored.size_bytes), wav.length);
      const { createHash } = await import('node:crypto');
      assert.equal(stored.sha256, createHash('sha256').update(wav).digest('hex'));
    } finally {
      await worker.stop();
    }
  });

  void it('B10: a 1 GB body streams through with the api process staying flat in memory', async () => {
    const id = await createMeeting();
    // Warm the process up (the upload path's code loaded, pools open) before taking its size.
    const small = await createMeeting();
    const warm = await fetch(`${base}/v1/meetings/${small}/recording`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
      body: speechWav('warm up'),
    });
    assert.equal(warm.status, 202);
    const before = memoryOf(api.pid);
    const total = 1024 * MiB;
    const res = await putBody(`${base}/v1/meetings/${id}/recording`, h.apiKey, total);
    assert.notEqual(res, 'cut');
    if (res === 'cut') return;
    assert.equal(res.status, 202, res.body);
    const after = memoryOf(api.pid);
    const growth = after.peak - Math.max(before.peak, before.rss);
    // Generous: a whole-body buffer would be over 1 GB; the stream needs a few MB of buffers.
    assert.ok(growth < 128 * MiB, `the api's peak resident size grew by ${(growth / MiB).toFixed(1)} MiB`);
    const stored = await h.app.database.db
      .selectFrom('blobs')
      .select(['size_bytes'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'recording')
      .executeTakeFirstOrThrow();
    assert.equal(Number(stored.size_bytes), total);
  });
});

void it('B10/B6: a body of unknown length reserves a step of the quota and grows it: a small chunked upload fits a quota far below the upload limit, one past the quota is refused with 413 and stores nothing', async () => {
  const h = await startHarness({
    env: { VERBATIM_MAX_UPLOAD_BYTES: String(2048 * MiB), VERBATIM_WORKSPACE_QUOTA_BYTES: String(100 * MiB) },
  });
  const port = await freePort();
  const api = spawnVerbatim(['api'], h.env({ VERBATIM_PORT: String(port) }));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      `api on ${port}`,
      async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok ?? false,
    );
    const db = h.app.database.db;
    const create = async () =>
      (await h.request('POST', '/v1/meetings', { source: 'upload', title: 'chunked' })).json.id as string;

    // 3 MiB sent chunked: before, it reserved the whole 2 GiB upload limit and was refused.
    const small = await create();
    const fits = await putBody(`${base}/v1/meetings/${small}/recording`, h.apiKey, 3 * MiB, undefined, false);
    assert.ok(fits !== 'cut');
    assert.equal(fits.status, 202, fits.body);
    const stored = await db
      .selectFrom('blobs')
      .select('size_bytes')
      .where('meeting_id', '=', small)
      .executeTakeFirstOrThrow();
    assert.equal(
      Number(stored.size_bytes),
      3 * MiB,
      'the ledger holds the bytes received, not the reservation',
    );

    // 150 MiB sent chunked against a 100 MiB quota: refused once its reservation would pass it.
    const big = await create();
    const refused = await putBody(
      `${base}/v1/meetings/${big}/recording`,
      h.apiKey,
      150 * MiB,
      undefined,
      false,
    );
    assert.ok(refused !== 'cut', 'the client is answered, not cut off');
    assert.equal(refused.status, 413, refused.body);
    assert.match(refused.body, /storage\.quota_exceeded/);
    assert.match(refused.body, /quota of the workspace/);
    assert.equal((await h.request('GET', `/v1/meetings/${big}`)).json.status, 'created');
    assert.deepEqual(await db.selectFrom('blobs').select('id').where('meeting_id', '=', big).execute(), []);
    await waitFor('the refused body’s staged row to be handed to cleanup', async () => {
      const rows = await db
        .selectFrom('object_cleanups')
        .select('state')
        .where('meeting_id', '=', big)
        .execute();
      return rows.every((r) => r.state === 'pending');
    });
  } finally {
    await api.stop();
    await h.close();
  }
});
