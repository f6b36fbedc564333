// V6: a provider's Retry-After holds the adapter's other requests to that endpoint too.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { AppError } from '../src/domain/errors.ts';
import { ProviderHolds, providerFetch, type RetryAfterHolds } from '../src/adapters/provider-http.ts';
import { SharedProviderHolds } from '../src/adapters/provider-hold-store.ts';
import { WhisperTranscriber } from '../src/adapters/whisper-transcriber.ts';
import { openDatabase } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from './support/db.ts';
import { waitFor } from './support/harness.ts';

void it('V6: after a 429 with Retry-After, another request to the same endpoint is not sent until it runs out; other endpoints are not held', async () => {
  let sent = 0;
  const server = http.createServer((req, res) => {
    sent++;
    if (req.url === '/v1/chat/completions' && sent === 1) {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '2' });
      res.end(JSON.stringify({ error: { message: 'slow down' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const holds = new ProviderHolds();
  const send = (path: string) =>
    providerFetch({ service: 'llm', url: `${base}${path}`, body: '{}', timeoutMs: 5_000, holds });
  try {
    const first = await send('/v1/chat/completions').catch((e: unknown) => e);
    assert.ok(first instanceof AppError && first.code === 'llm.rate_limited', String(first));
    assert.equal(first.retryAfterSeconds, 2);

    // The same request from another job of this process: refused here, never sent.
    const second = await send('/v1/chat/completions').catch((e: unknown) => e);
    assert.ok(second instanceof AppError && second.code === 'llm.rate_limited', String(second));
    assert.ok(second.retryAfterSeconds !== undefined && second.retryAfterSeconds >= 1);
    assert.equal(sent, 1, 'the provider saw one request');

    // Another endpoint is not held.
    assert.equal(await send('/v1/audio/transcriptions'), '{"ok":true}');
    assert.equal(sent, 2);

    // Once the Retry-After has run out, the request goes.
    const started = Date.now();
    const answer = await waitFor(
      'the hold to end',
      () => send('/v1/chat/completions').catch(() => null),
      10_000,
    );
    assert.equal(answer, '{"ok":true}');
    assert.ok(Date.now() - started >= 1_000, 'not before the Retry-After ran out');
    assert.equal(sent, 3);
  } finally {
    server.close();
  }
});

void it('V6: a Retry-After heard by one process holds the others: a window retried on another worker is not sent before it runs out', async () => {
  let sent = 0;
  const server = http.createServer((req, res) => {
    sent++;
    req.resume();
    req.on('end', () => {
      if (sent === 1) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '2' });
        res.end(JSON.stringify({ error: { message: 'Rate limit reached' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ text: 'hello', segments: [{ start: 0, end: 1, text: ' hello' }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const database = await createTestDatabase();
  const handle = openDatabase(database.url, createLogger('silent'), 2);
  // Two processes: each its own adapter and memory, only the database in common.
  const worker = (holds: RetryAfterHolds) => new WhisperTranscriber({ baseUrl: base, holds });
  const first = worker(new SharedProviderHolds(handle.db));
  const second = worker(new SharedProviderHolds(handle.db));
  const request = { wav: Buffer.alloc(64), language: 'en' };
  try {
    const heard = await first.transcribe(request).catch((e: unknown) => e);
    assert.ok(heard instanceof AppError && heard.code === 'asr.rate_limited', String(heard));
    assert.equal(sent, 1);

    const held = await second.transcribe(request).catch((e: unknown) => e);
    assert.ok(held instanceof AppError && held.code === 'asr.rate_limited', String(held));
    assert.ok(
      held.retryAfterSeconds !== undefined && held.retryAfterSeconds >= 1,
      String(held.retryAfterSeconds),
    );
    assert.equal(sent, 1, 'the other process did not send it');

    // The hold is kept by endpoint, without a query or credentials.
    const rows = await handle.db.selectFrom('provider_holds').select('endpoint').execute();
    assert.deepEqual(
      rows.map((r) => r.endpoint),
      [`${base}/v1/audio/transcriptions`],
    );

    const started = Date.now();
    const segments = await waitFor(
      'the hold to end',
      () => second.transcribe(request).catch(() => null),
      10_000,
    );
    assert.equal(segments[0]?.text.trim(), 'hello');
    assert.ok(Date.now() - started >= 1_000, 'not before the Retry-After ran out');
    assert.equal(sent, 2);
  } finally {
    server.close();
    await handle.close();
    await database.drop();
  }
});
