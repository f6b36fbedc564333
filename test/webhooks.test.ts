import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { verifyWebhook } from '../src/events/webhooks.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
} from './support/harness.ts';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A customer's receiver on 127.0.0.1: answers from `script` by request number, records everything. */
async function startReceiver(script: (n: number) => number) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(script(received.length)).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/verbatim`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const header = (r: Received, name: string) => String(r.headers[name] ?? '');

void it('O3: a receiver that fails twice then succeeds gets the event once accepted, signed; a tampered body fails verification', async () => {
  const receiver = await startReceiver((n) => (n <= 2 ? 500 : 204));
  const h = await startHarness({ env: { VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2' } });
  try {
    const bad = await h.request('POST', '/v1/webhooks', { url: 'ftp://example.com' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'webhook.url');
    const badEvents = await h.request('POST', '/v1/webhooks', { url: receiver.url, events: ['nope'] });
    assert.equal(badEvents.status, 400);

    const created = await h.request('POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['meeting.completed'],
    });
    assert.equal(created.status, 201, created.text);
    const secret = created.json.secret as string;
    assert.match(secret, /^whsec_[A-Za-z0-9+/=]{32}$/);
    const listed = await h.request('GET', '/v1/webhooks');
    assert.equal(listed.json.webhooks.length, 1);
    assert.ok(!listed.text.includes(secret.slice(6)), 'the secret is shown only at creation');

    h.spawnWorker();
    const id = await uploadMeeting(h, speechWav(SPEECH));
    await waitForMeeting(h, id);
    await waitFor('the delivery to be accepted', async () => {
      const log = await h.request('GET', `/v1/webhooks/${created.json.id}/deliveries`);
      return log.json.deliveries[0]?.status === 'delivered';
    });
    const log = (await h.request('GET', `/v1/webhooks/${created.json.id}/deliveries`)).json.deliveries;
    assert.equal(log.length, 1, 'only the subscribed event: meeting.completed');
    assert.equal(log[0].eventType, 'meeting.completed');
    assert.equal(log[0].attempts, 3);
    assert.deepEqual(
      (log[0].log as Array<{ statusCode: number }>).map((a) => a.statusCode),
      [500, 500, 204],
    );
    assert.equal(receiver.received.length, 3, 'retried until accepted, then not again');

    const ids = new Set(receiver.received.map((r) => header(r, 'webhook-id')));
    assert.equal(ids.size, 1, 'every retry carries the same id, so the receiver can dedupe');
    assert.equal(new Set(receiver.received.map((r) => r.body)).size, 1, 'and the same body');
    for (const r of receiver.received) {
      const headers = {
        'webhook-id': header(r, 'webhook-id'),
        'webhook-timestamp': header(r, 'webhook-timestamp'),
        'webhook-signature': header(r, 'webhook-signature'),
      };
      assert.equal(verifyWebhook(secret, headers, r.body), true, 'a valid signature');
      assert.equal(verifyWebhook(secret, headers, r.body.replace('"meetingId"', '"meetingID"')), false);
      assert.equal(verifyWebhook(secret, headers, `${r.body} `), false, 'a tampered body fails');
      assert.equal(verifyWebhook(`whsec_${Buffer.alloc(24, 1).toString('base64')}`, headers, r.body), false);
      const stale = Number(headers['webhook-timestamp']) + 3600;
      assert.equal(verifyWebhook(secret, headers, r.body, stale), false, 'an old timestamp fails');
    }
    const event = JSON.parse(receiver.received[2]!.body) as {
      type: string;
      data: { meetingId: string; status: string };
    };
    assert.equal(event.type, 'meeting.completed');
    assert.equal(event.data.meetingId, id);
    assert.equal(event.data.status, 'complete');
    assert.ok(!h.logs().includes(secret.slice(6)), 'the secret never reaches a log');

    assert.equal((await h.request('DELETE', `/v1/webhooks/${created.json.id}`)).status, 204);
    assert.equal((await h.request('DELETE', `/v1/webhooks/${created.json.id}`)).status, 404);
  } finally {
    await h.close();
    await receiver.close();
  }
});
