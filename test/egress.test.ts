import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { after, before, describe, it } from 'node:test';
import { addCalendarFeed, pollFeed } from '../src/bots/calendar-feeds.ts';
import { EgressError, EgressGuard } from '../src/net/egress.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

/** Internal addresses, in the notations an attacker would try; every one must be refused. */
const INTERNAL_URLS = [
  'http://127.0.0.1/',
  'http://127.1/',
  'http://2130706433/',
  'http://0x7f.1/',
  'http://0x7f000001/',
  'http://0177.0.0.1/',
  'http://017700000001/',
  'http://localhost/',
  'http://LOCALHOST./',
  'http://api.localhost/',
  'http://0.0.0.0/',
  'http://0/',
  'http://10.0.0.1/',
  'http://172.16.5.4/',
  'http://192.168.1.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://100.64.0.1/',
  'http://224.0.0.1/',
  'http://255.255.255.255/',
  'http://[::1]/',
  'http://[::]/',
  'http://[0:0:0:0:0:0:0:1]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[::ffff:a9fe:a9fe]/',
  'http://[::127.0.0.1]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[2002:7f00:1::]/',
  'http://[fc00::1]/',
  'http://[fd12:3456::1]/',
  'http://[fe80::1]/',
  'http://[ff02::1]/',
];

/** A listener that records who called; what it answers must never reach a tenant. */
async function listener(host: string, answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const heard: string[] = [];
  const server = http.createServer((req, res) => {
    heard.push(`${req.method} ${req.url}`);
    answer(req, res);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as AddressInfo;
  return { port, heard, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const BANNER = 'SSH-2.0-OpenSSH_9.2 internal-build-7f3a';

void describe('S5: one egress guard for every URL a tenant supplies', () => {
  void it('S5: every loopback, private, link-local, CGNAT, unique-local, multicast and IPv4-mapped form is refused, in every notation; public addresses pass', () => {
    const guard = new EgressGuard();
    for (const text of INTERNAL_URLS) {
      assert.notEqual(guard.literalRefusal(new URL(text)), null, `${text} is refused`);
    }
    for (const text of [
      'http://93.184.216.34/',
      'http://[2606:4700::1111]/',
      'https://calendar.example.com/',
    ]) {
      assert.equal(guard.literalRefusal(new URL(text)), null, `${text} passes`);
    }
    // An operator's allowance opens exactly its range.
    const allowing = new EgressGuard('10.20.0.0/16, ::1');
    assert.equal(allowing.literalRefusal(new URL('http://10.20.3.4/')), null);
    assert.notEqual(allowing.literalRefusal(new URL('http://10.21.3.4/')), null);
    assert.equal(allowing.literalRefusal(new URL('http://[::1]/')), null);
    assert.throws(() => new EgressGuard('not-a-cidr'), /VERBATIM_EGRESS_ALLOW/);
  });

  void it('S5: a name that resolves to loopback and a redirect to loopback are refused without a request; an allowlisted CIDR works', async () => {
    // The machine's own name resolves to a loopback address (Debian's /etc/hosts).
    const name = os.hostname();
    const resolved = await dns.lookup(name, { all: true });
    assert.ok(
      resolved.some((a) => a.address.startsWith('127.') || a.address === '::1'),
      `this test needs ${name} to resolve to loopback: ${JSON.stringify(resolved)}`,
    );
    const target = await listener('127.0.0.1', (_req, res) => res.writeHead(200).end(BANNER));
    // A server the operator allowed (127.0.0.2) that redirects to one it did not (127.0.0.1).
    const bouncer = await listener('127.0.0.2', (_req, res) =>
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/secret` }).end(),
    );
    try {
      const guard = new EgressGuard('127.0.0.2/32');
      const byName = await guard
        .request(`http://${name}:${target.port}/`, { timeoutMs: 5_000, maxBytes: 1024 })
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.ok(byName instanceof EgressError, String(byName));
      assert.equal(byName.category, 'egress_refused');
      const redirected = await guard
        .request(`http://127.0.0.2:${bouncer.port}/feed.ics`, {
          timeoutMs: 5_000,
          maxBytes: 1024,
          maxRedirects: 3,
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.ok(redirected instanceof EgressError, String(redirected));
      assert.equal(redirected.category, 'egress_refused');
      assert.equal(bouncer.heard.length, 1, 'the allowed server was asked');
      assert.deepEqual(target.heard, [], 'the loopback target never was');

      const allowed = await new EgressGuard('127.0.0.1/32').request(`http://127.0.0.1:${target.port}/ok`, {
        timeoutMs: 5_000,
        maxBytes: 1024,
      });
      assert.equal(allowed.status, 200);
      assert.equal(allowed.body.toString(), BANNER);
    } finally {
      await target.close();
      await bouncer.close();
    }
  });

  void describe('through the API and the workers, with no internal range allowed', () => {
    let h: Harness;
    let target: Awaited<ReturnType<typeof listener>>;
    let bouncer: Awaited<ReturnType<typeof listener>>;

    before(async () => {
      target = await listener('127.0.0.1', (_req, res) => res.writeHead(200).end(BANNER));
      bouncer = await listener('127.0.0.2', (req, res) => {
        if (req.url === '/down.ics') res.writeHead(500).end(BANNER);
        else if (req.url === '/banner.ics') res.writeHead(200).end(BANNER);
        else res.writeHead(302, { location: `http://127.0.0.1:${target.port}/secret` }).end();
      });
      h = await startHarness({
        env: {
          // Only the test's "public" calendar host is reachable; loopback proper is not.
          VERBATIM_EGRESS_ALLOW: '127.0.0.2/32',
          VERBATIM_FEED_PLAIN_HTTP_HOSTS: `127.0.0.2,127.0.0.1,${os.hostname().toLowerCase()}`,
          VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2',
          VERBATIM_WEBHOOK_MAX_ATTEMPTS: '1',
        },
      });
    });
    after(async () => {
      await h?.close();
      await target?.close();
      await bouncer?.close();
    });

    void it('S5: feeds — literal internal addresses are refused with 400 at creation; a name resolving to loopback and a redirect to it are refused at fetch time as egress_refused; no remote body reaches an API response', async () => {
      for (const text of [
        'https://127.0.0.1/cal.ics',
        'https://[::1]/cal.ics',
        'webcal://2130706433/cal.ics',
        'https://169.254.169.254/x',
      ]) {
        const res = await h.request('POST', '/v1/calendar-feeds', { url: text });
        assert.equal(res.status, 400, `${text}: ${res.text}`);
        assert.equal(res.json.error.code, 'feed.url');
        assert.match(res.json.error.message, /internal address|this server/);
      }
      const byName = await addCalendarFeed(h.app.deps, h.workspaceId, {
        url: `http://${os.hostname()}:${target.port}/cal.ics`,
      });
      const redirected = await addCalendarFeed(h.app.deps, h.workspaceId, {
        url: `http://127.0.0.2:${bouncer.port}/moved.ics`,
      });
      const down = await addCalendarFeed(h.app.deps, h.workspaceId, {
        url: `http://127.0.0.2:${bouncer.port}/down.ics`,
      });
      const banner = await addCalendarFeed(h.app.deps, h.workspaceId, {
        url: `http://127.0.0.2:${bouncer.port}/banner.ics`,
      });
      for (const feed of [byName, redirected, down, banner]) await pollFeed(h.app.deps, feed.id);
      const listed = await h.request('GET', '/v1/calendar-feeds');
      type View = { id: string; lastError: string | null };
      const errorOf = (id: string) => (listed.json.feeds as View[]).find((f) => f.id === id)?.lastError ?? '';
      assert.match(errorOf(byName.id), /^egress_refused/);
      assert.match(errorOf(redirected.id), /^egress_refused/);
      assert.match(errorOf(down.id), /^http_5xx/);
      assert.match(errorOf(banner.id), /invalid_calendar/);
      assert.ok(!listed.text.includes('OpenSSH'), 'no remote body in the response');
      assert.deepEqual(target.heard, [], 'the loopback service was never asked');
    });

    void it('S5: webhooks — literal internal addresses are refused with 400; a receiver name resolving to loopback is never called and its delivery log says egress_refused', async () => {
      for (const text of [
        'http://127.0.0.1:9/hook',
        'http://0x7f.1/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://localhost:8080/',
      ]) {
        const res = await h.request('POST', '/v1/webhooks', { url: text });
        assert.equal(res.status, 400, `${text}: ${res.text}`);
        assert.equal(res.json.error.code, 'webhook.url');
      }
      const created = await h.request('POST', '/v1/webhooks', {
        url: `http://${os.hostname()}:${target.port}/hook`,
        events: ['meeting.completed'],
      });
      assert.equal(created.status, 201, created.text);
      h.spawnWorker();
      const id = await uploadMeeting(h, speechWav(SPEECH));
      await waitForMeeting(h, id);
      const log = await waitFor('the delivery to be given up', async () => {
        const res = await h.request('GET', `/v1/webhooks/${created.json.id}/deliveries`);
        const d = res.json.deliveries[0];
        return d?.status === 'failed' ? res : null;
      });
      assert.match(log.text, /egress_refused/);
      assert.ok(!log.text.includes('OpenSSH'));
      assert.deepEqual(target.heard, [], 'the loopback service was never asked');
    });
  });
});
