import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { verifyWebhook } from '../src/events/webhooks.ts';
import { openApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { checkSecretKey } from '../src/secrets/key-check.ts';
import { secretBoxOf } from '../src/secrets/secret-box.ts';
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

void it('U7: a signing secret is sealed at rest; a rotation keeps the old one valid through its overlap (both signatures), then only the new; a process with another secret key refuses to start', async () => {
  const receiver = await startReceiver(() => 204);
  const h = await startHarness({ env: { VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2' } });
  try {
    const created = await h.request('POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['meeting.completed'],
    });
    assert.equal(created.status, 201, created.text);
    const first = created.json.secret as string;
    const stored = await h.app.database.db
      .selectFrom('webhook_endpoints')
      .select(['secret', 'previous_secret'])
      .where('id', '=', created.json.id)
      .executeTakeFirstOrThrow();
    assert.match(stored.secret, /^sealed:v1:/);
    assert.ok(!stored.secret.includes(first.slice(6)), 'the database holds no readable secret');

    // Rotated with an hour of overlap: deliveries carry both signatures.
    const rotated = await h.request('POST', `/v1/webhooks/${created.json.id}/rotate-secret`, {
      overlapHours: 1,
    });
    assert.equal(rotated.status, 200, rotated.text);
    const second = rotated.json.secret as string;
    assert.notEqual(second, first);
    const until = Date.parse(rotated.json.previousValidUntil as string);
    assert.ok(Math.abs(until - (Date.now() + 3_600_000)) < 60_000, rotated.text);
    const bad = await h.request('POST', `/v1/webhooks/${created.json.id}/rotate-secret`, {
      overlapHours: -1,
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'webhook.overlap_hours');

    h.spawnWorker();
    const deliveredFor = async () => {
      const id = await uploadMeeting(h, speechWav(SPEECH));
      await waitForMeeting(h, id);
      await waitFor('its delivery', async () => receiver.received.find((r) => r.body.includes(id)) ?? null);
      const r = receiver.received.find((x) => x.body.includes(id))!;
      return {
        headers: {
          'webhook-id': header(r, 'webhook-id'),
          'webhook-timestamp': header(r, 'webhook-timestamp'),
          'webhook-signature': header(r, 'webhook-signature'),
        },
        body: r.body,
      };
    };
    const during = await deliveredFor();
    assert.equal(during.headers['webhook-signature'].split(' ').length, 2);
    assert.equal(verifyWebhook(second, during.headers, during.body), true, 'the new secret verifies');
    assert.equal(verifyWebhook(first, during.headers, during.body), true, 'so does the old, in the overlap');

    // Rotated with no overlap: only the newest verifies.
    const third = (
      await h.request('POST', `/v1/webhooks/${created.json.id}/rotate-secret`, { overlapHours: 0 })
    ).json.secret as string;
    const after = await deliveredFor();
    assert.equal(verifyWebhook(third, after.headers, after.body), true);
    assert.equal(verifyWebhook(second, after.headers, after.body), false);
    assert.equal(verifyWebhook(first, after.headers, after.body), false);
    for (const s of [first, second, third]) assert.ok(!h.logs().includes(s.slice(6)), 'no secret is logged');

    // A secret stored before sealing is sealed at the next start, and still signs the same.
    await h.app.database.db
      .updateTable('webhook_endpoints')
      .set({ secret: third })
      .where('id', '=', created.json.id)
      .execute();
    await checkSecretKey(h.app.database.db, secretBoxOf(h.app.config), h.app.log);
    const resealed = await h.app.database.db
      .selectFrom('webhook_endpoints')
      .select('secret')
      .where('id', '=', created.json.id)
      .executeTakeFirstOrThrow();
    assert.match(resealed.secret, /^sealed:v1:/);
    assert.equal(secretBoxOf(h.app.config).open(resealed.secret), third);

    // Another key: the process refuses to start, and says what to do.
    const other = loadConfig({ ...h.env(), VERBATIM_SECRET_KEY: 'ab'.repeat(32) });
    await assert.rejects(openApp(other), /give every process the same VERBATIM_SECRET_KEY/);
  } finally {
    await h.close();
    await receiver.close();
  }
});
