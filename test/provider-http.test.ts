// V6: a provider's Retry-After holds the adapter's other requests to that endpoint too.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { AppError } from '../src/domain/errors.ts';
import { ProviderHolds, providerFetch } from '../src/adapters/provider-http.ts';
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
