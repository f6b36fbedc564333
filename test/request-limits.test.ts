import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KeyRateLimiter } from '../src/api/rate-limit.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { startHarness, type Harness } from './support/harness.ts';

const MiB = 1024 * 1024;
const TWENTY_MB = 20 * MiB;
const SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;

/** Silence as 16 kHz mono WAV, `bytes` long (give or take the header). */
function silentWav(bytes: number): Buffer {
  return encodeWav(new Int16Array(Math.floor((bytes - 44) / 2)), 16_000);
}

interface RawExchange {
  /** Everything the server sent. */
  answer: string;
  /** Body bytes the client had written when the first answer byte arrived (or the socket closed). */
  writtenBeforeAnswer: number;
  /** Bytes the server's side of the connection read from the wire, headers included. */
  serverRead: number;
}

void describe('request limits (S7)', () => {
  let h: Harness;
  let port: number;
  const serverSockets = new Map<number, net.Socket>();

  before(async () => {
    h = await startHarness({
      env: {
        VERBATIM_HEADERS_TIMEOUT_SECONDS: '0.5',
        VERBATIM_REQUEST_TIMEOUT_SECONDS: '1',
        VERBATIM_IDLE_TIMEOUT_SECONDS: '2',
        VERBATIM_UPLOAD_TIMEOUT_SECONDS: '30',
        VERBATIM_RATE_LIMIT_REQUESTS: '30',
        VERBATIM_RATE_LIMIT_CHUNKS: '30',
        VERBATIM_RATE_LIMIT_WINDOW_SECONDS: '3600',
        VERBATIM_MAX_UPLOAD_BYTES: String(4 * MiB),
        VERBATIM_RECALL_WEBHOOK_SECRETS: SECRET,
      },
    });
    h.api.server.on('connection', (s: net.Socket) => serverSockets.set(s.remotePort ?? 0, s));
    await h.api.listen({ port: 0, host: '127.0.0.1' });
    port = (h.api.server.address() as net.AddressInfo).port;
  });
  after(async () => {
    await h?.close();
  });

  /**
   * Sends `head`, then body bytes (64 KiB at a time, as fast as the socket takes them) until the
   * server answers or closes, `total` at most; resolves once the connection is closed.
   */
  async function sendBody(head: string, total: number, opts: { chunked?: boolean } = {}) {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const serverSide = await serverSocketOf(socket);
    let answer = '';
    let written = 0;
    let writtenBeforeAnswer: number | null = null;
    let closed = false;
    socket.on('data', (d: Buffer) => {
      writtenBeforeAnswer ??= written;
      answer += d.toString();
    });
    // EPIPE / ECONNRESET: the server cut the upload off, which is what is tested.
    socket.on('error', () => {});
    const closing = new Promise<void>((resolve) =>
      socket.once('close', () => {
        closed = true;
        resolve();
      }),
    );
    socket.write(head);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    while (written < total && writtenBeforeAnswer === null && !closed) {
      const frame = opts.chunked
        ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')])
        : piece;
      written += piece.length;
      if (!socket.write(frame)) {
        await new Promise((resolve) => {
          socket.once('drain', resolve);
          socket.once('close', resolve);
        });
      } else {
        // A turn of the event loop per piece, so an answer is seen as soon as it arrives.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    await closing;
    return {
      answer,
      writtenBeforeAnswer: writtenBeforeAnswer ?? written,
      serverRead: serverSide.bytesRead,
    } satisfies RawExchange;
  }

  /** The server's end of `client`'s connection (its 'connection' event may come a turn later). */
  async function serverSocketOf(client: net.Socket): Promise<net.Socket> {
    for (let turn = 0; turn < 1000; turn++) {
      const found = serverSockets.get(client.localPort ?? -1);
      if (found) return found;
      await new Promise((resolve) => setImmediate(resolve));
    }
    throw new Error('the server never saw the connection');
  }

  function statusOf(answer: string): number {
    return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
  }

  function errorOf(answer: string): { kind: string; code: string; message: string } {
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    return (JSON.parse(body) as { error: { kind: string; code: string; message: string } }).error;
  }

  function signedHeaders(): string {
    // Plausible headers (fresh timestamp), a signature that will not verify: only a body read
    // could tell, and the body is over the limit.
    return `webhook-id: msg_1\r\nwebhook-timestamp: ${Math.floor(Date.now() / 1000)}\r\nwebhook-signature: v1,AAAA\r\n`;
  }

  void it('S7: an unauthenticated 20 MB body is cut off without being read', async () => {
    const cases = [
      {
        what: 'provider webhook, Content-Length over its 64 KiB',
        head: `POST /providers/recall/webhooks HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${signedHeaders()}content-length: ${TWENTY_MB}\r\n\r\n`,
        status: 413,
        code: 'request.too_large',
        chunked: false,
      },
      {
        what: 'provider webhook, chunked, no length said',
        head: `POST /providers/recall/webhooks HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n${signedHeaders()}transfer-encoding: chunked\r\n\r\n`,
        status: 413,
        code: 'request.too_large',
        chunked: true,
      },
      {
        what: 'provider webhook without signature headers',
        head: `POST /providers/recall/webhooks HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
        status: 401,
        code: 'webhook.bad_signature',
        chunked: true,
      },
      {
        what: 'a recording upload without an API key',
        head: `PUT /v1/meetings/00000000-0000-4000-8000-000000000000/recording HTTP/1.1\r\nHost: x\r\ncontent-type: audio/wav\r\ncontent-length: ${TWENTY_MB}\r\n\r\n`,
        status: 401,
        code: 'auth.invalid_key',
        chunked: false,
      },
      {
        what: 'a recording upload with a wrong key',
        head: `PUT /v1/meetings/00000000-0000-4000-8000-000000000000/recording HTTP/1.1\r\nHost: x\r\nauthorization: Bearer vbt_000000000000_nope\r\ncontent-type: audio/wav\r\ntransfer-encoding: chunked\r\n\r\n`,
        status: 401,
        code: 'auth.invalid_key',
        chunked: true,
      },
      {
        what: 'no such route',
        head: `POST /nowhere HTTP/1.1\r\nHost: x\r\ncontent-type: application/octet-stream\r\ncontent-length: ${TWENTY_MB}\r\n\r\n`,
        status: 413,
        code: 'request.too_large',
        chunked: false,
      },
    ];
    for (const c of cases) {
      const x = await sendBody(c.head, TWENTY_MB, { chunked: c.chunked });
      assert.equal(statusOf(x.answer), c.status, `${c.what}: ${x.answer}`);
      assert.equal(errorOf(x.answer).code, c.code, c.what);
      assert.match(x.answer, /\r\nconnection: close\r\n/i, `${c.what}: the connection is closed`);
      // The server answered and hung up long before the client was through (what the client
      // wrote is mostly in kernel buffers), having read little: what arrived before the answer,
      // and at most 1 MiB dropped after it so the client sees the answer (docs/security.md).
      assert.ok(x.writtenBeforeAnswer < TWENTY_MB / 2, `${c.what}: client wrote ${x.writtenBeforeAnswer}`);
      assert.ok(x.serverRead < 2 * MiB, `${c.what}: the server read ${x.serverRead} bytes`);
      if (c.status === 413 && c.what.startsWith('provider')) {
        assert.match(errorOf(x.answer).message, /64 KiB \(65536 bytes\)/, c.what);
      }
    }
  });

  void it('S7: a JSON body over 1 MiB gets 413 naming the limit', async () => {
    // Over a socket: the headers alone get the answer, not one byte of the body is sent.
    const head = `POST /v1/meetings HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${h.apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${MiB + 1}\r\n\r\n`;
    const x = await sendBody(head, 0);
    assert.equal(statusOf(x.answer), 413, x.answer);
    assert.equal(x.writtenBeforeAnswer, 0);
    assert.equal(x.serverRead, Buffer.byteLength(head), 'the server read the headers and nothing else');
    const refusal = errorOf(x.answer);
    assert.equal(refusal.code, 'request.too_large');
    assert.equal(refusal.kind, 'too_large');
    assert.match(refusal.message, /limit of 1 MiB \(1048576 bytes\)/);

    // A body that says no length is counted as it comes.
    const padded = (n: number) => ({ source: 'upload', title: 'x'.repeat(n) });
    const over = await h.request('POST', '/v1/meetings', padded(MiB));
    assert.equal(over.status, 413);
    assert.match(over.json.error.message, /1 MiB/);
    // Just under the limit the body is read, and refused for what it says, not for its size.
    const under = await h.request('POST', '/v1/meetings', padded(MiB - 100));
    assert.equal(under.status, 400, under.text);
    assert.equal(under.json.error.code, 'meeting.title');
    // Any other type on a JSON route has the same small limit.
    const text = await h.request('POST', '/v1/webhooks', Buffer.alloc(2 * MiB, 0x61), {
      'content-type': 'text/plain',
    });
    assert.equal(text.status, 413);
    const bytes = await h.request('POST', '/v1/meetings/x/end', Buffer.alloc(2 * MiB, 0x61), {
      'content-type': 'application/octet-stream',
    });
    assert.equal(bytes.status, 413);
  });

  void it('S7: a slow client is timed out', async () => {
    // Slowloris: headers a byte at a time, each byte well inside the idle timeout, the whole past
    // the 0.5 s header timeout.
    const socket = net.connect(port, '127.0.0.1');
    const head = `GET /healthz HTTP/1.1\r\nHost: x\r\nx-padding: ${'a'.repeat(400)}\r\n\r\n`;
    let sent = 0;
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('error', () => {});
    const drip = setInterval(() => {
      if (sent < head.length && !socket.destroyed) socket.write(head[sent++]!);
    }, 20);
    await new Promise((resolve) => socket.once('close', resolve));
    clearInterval(drip);
    assert.ok(sent < head.length, `closed before the headers were through (${sent} of ${head.length})`);
    assert.equal(statusOf(answer), 408, answer);
    assert.equal(errorOf(answer).code, 'request.timeout');

    // A small body dripped slower than the 1 s request timeout allows: 408, closed.
    const body = JSON.stringify({ source: 'upload', title: 'slow' });
    const slow = net.connect(port, '127.0.0.1');
    let slowAnswer = '';
    let bodySent = 0;
    slow.on('data', (d: Buffer) => (slowAnswer += d.toString()));
    slow.on('error', () => {});
    slow.write(
      `POST /v1/meetings HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${h.apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    );
    const bodyDrip = setInterval(() => {
      if (bodySent < body.length && !slow.destroyed) slow.write(body[bodySent++]!);
    }, 100);
    await new Promise((resolve) => slow.once('close', resolve));
    clearInterval(bodyDrip);
    assert.ok(bodySent < body.length, 'cut off before the body was through');
    assert.equal(statusOf(slowAnswer), 408, slowAnswer);
    const timedOut = errorOf(slowAnswer);
    assert.equal(timedOut.code, 'request.timeout');
    assert.match(timedOut.message, /within 1 s/);

    // An upload that stops mid-body is closed after the 2 s idle timeout (its own deadline is 30 s),
    // while its body is being streamed to storage (B10).
    const meeting = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'stalled' });
    const stalled = net.connect(port, '127.0.0.1');
    stalled.on('error', () => {});
    const started = Date.now();
    stalled.write(
      `PUT /v1/meetings/${meeting.json.id}/recording HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${h.apiKey}\r\ncontent-type: audio/wav\r\ncontent-length: 100000\r\n\r\nRIFF`,
    );
    await new Promise((resolve) => stalled.once('close', resolve));
    const waited = Date.now() - started;
    assert.ok(waited >= 1900 && waited < 20_000, `closed after ${waited} ms`);
  });

  void it('S7: the per-key limit answers 429 with Retry-After', async () => {
    const { apiKey } = await h.app.workspaces.createApiKey(h.workspaceId, 'rate');
    const as = (key: string) => ({ authorization: `Bearer ${key}` });
    const live = await h.request('POST', '/v1/meetings', { source: 'live', title: 'rate' });
    assert.equal(live.status, 201);
    for (let i = 0; i < 30; i++) {
      const ok = await h.request('GET', `/v1/meetings/${live.json.id}`, undefined, as(apiKey));
      assert.equal(ok.status, 200, `call ${i + 1}: ${ok.text}`);
    }
    const refused = await h.api.inject({ method: 'GET', url: '/v1/meetings', headers: as(apiKey) });
    assert.equal(refused.statusCode, 429, refused.body);
    const error = refused.json<{ error: { kind: string; code: string; message: string } }>().error;
    assert.equal(error.code, 'request.rate_limited');
    assert.match(error.message, /more than 30 calls in 3600 s/);
    // 30 an hour: one more call in (just under) two minutes.
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter > 100 && retryAfter <= 120, `Retry-After ${retryAfter}`);

    // Chunks have their own budget, so a recording never waits behind its tab's polling.
    const chunk = silentWav(32_044);
    const put = () =>
      h.request('PUT', `/v1/meetings/${live.json.id}/chunks/0`, chunk, {
        ...as(apiKey),
        'content-type': 'audio/wav',
      });
    const first = await put();
    assert.equal(first.status, 201, first.text);
    for (let i = 1; i < 30; i++) assert.equal((await put()).status, 200);
    const chunkRefused = await put();
    assert.equal(chunkRefused.status, 429);
    assert.match(chunkRefused.json.error.message, /more than 30 chunk uploads/);

    // The limit is the key's: another key of the same workspace goes on.
    assert.equal((await h.request('GET', `/v1/meetings/${live.json.id}`)).status, 200);
  });

  void it('S7: uploads and live chunks keep their own larger limits', async () => {
    // A 3 MB recording (over the 1 MiB JSON limit, under the 4 MiB upload limit), over a socket.
    const upload = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'big' });
    const wav = silentWav(3 * MiB);
    const res = await fetch(`http://127.0.0.1:${port}/v1/meetings/${upload.json.id}/recording`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'audio/wav' },
      body: wav,
    });
    assert.equal(res.status, 202, await res.text());
    const tooBig = await h.request('PUT', `/v1/meetings/${upload.json.id}/recording`, silentWav(5 * MiB), {
      'content-type': 'audio/wav',
    });
    assert.equal(tooBig.status, 413);
    assert.match(tooBig.json.error.message, /limit of 4 MiB/);

    // A 1.5 MB chunk (over the JSON limit, under the 2 MiB chunk limit) is taken.
    const live = await h.request('POST', '/v1/meetings', { source: 'live', title: 'big chunk' });
    const chunk = await h.request('PUT', `/v1/meetings/${live.json.id}/chunks/0`, silentWav(1_500_000), {
      'content-type': 'audio/wav',
    });
    assert.equal(chunk.status, 201, chunk.text);
    const overChunk = await h.request('PUT', `/v1/meetings/${live.json.id}/chunks/1`, silentWav(3 * MiB), {
      'content-type': 'audio/wav',
    });
    assert.equal(overChunk.status, 413);
    // The code the web app's outbox takes as a final refusal of that chunk (docs/web-app.md).
    assert.equal(overChunk.json.error.code, 'request.too_large');
    assert.match(overChunk.json.error.message, /limit of 2 MiB/);
  });
});

void it('S7: a key budget allows a burst of the limit, then one call per window/limit, per key', () => {
  let now = 0;
  const limiter = new KeyRateLimiter(3, 60_000, () => now);
  for (let i = 0; i < 3; i++) assert.equal(limiter.take('a'), null);
  assert.equal(limiter.take('a'), 20, 'the next token comes in 60 s / 3');
  assert.equal(limiter.take('b'), null, 'another key has its own budget');
  now += 19_000;
  assert.equal(limiter.take('a'), 1);
  now += 1_000;
  assert.equal(limiter.take('a'), null);
  assert.equal(limiter.take('a'), 20);
  now += 10 * 60_000;
  for (let i = 0; i < 3; i++) assert.equal(limiter.take('a'), null, 'refilled to the limit, no more');
  assert.notEqual(limiter.take('a'), null);
  assert.equal(new KeyRateLimiter(0, 60_000).take('a'), null, '0 is no limit');
});
