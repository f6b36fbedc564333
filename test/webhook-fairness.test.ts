import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { sql } from 'kysely';
import { startBlackHole } from './support/black-hole.ts';
import { startChunkRecognizer } from './support/chunk-recognizer.ts';
import { startFakeRecall } from './support/fake-recall.ts';
import { vevent } from './support/ics.ts';
import { addCalendarFeed } from '../src/bots/calendar-feeds.ts';
import { METRICS_AUTH, SPEECH, spawnVerbatim, speechWav, startHarness, waitFor } from './support/harness.ts';

void it('F6: black-holed endpoints of one workspace delay neither another workspace’s delivery nor a lease reclaim', async () => {
  const hole = await startBlackHole();
  const got: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      got.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({
    env: {
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: recognizer.url,
      // The black hole holds each delivery for five minutes, far longer than this test waits.
      VERBATIM_WEBHOOK_TIMEOUT_SECONDS: '300',
      // Only the sweep's lease reclaim may recover the killed worker's window (J8, not J18).
      VERBATIM_DEATH_CHECK_SECONDS: '3600',
    },
  });
  const owner = h.db.owner();
  try {
    // The noisy workspace: three endpoints that never answer, sixty deliveries due now: more than
    // two workers' slots.
    for (const n of [1, 2, 3]) {
      const res = await h.request('POST', '/v1/webhooks', { url: hole.url(n) });
      assert.equal(res.status, 201, res.text);
    }
    for (let i = 0; i < 20; i++) {
      await sql`insert into webhook_deliveries (id, workspace_id, endpoint_id, event_id, event_type, body, status)
          select gen_random_uuid(), e.workspace_id, e.id, ${randomUUID()}::uuid, 'meeting.completed', '{}', 'pending'
            from webhook_endpoints e where e.workspace_id = ${h.workspaceId}::uuid`.execute(owner);
    }
    // The quiet workspace: one endpoint that answers, and a meeting.
    const quietWs = await h.app.workspaces.createWorkspace('quiet');
    const { apiKey } = await h.app.workspaces.createApiKey(quietWs, 'quiet');
    const auth = { authorization: `Bearer ${apiKey}` };
    const port = (receiver.address() as AddressInfo).port;
    const hook = await h.request(
      'POST',
      '/v1/webhooks',
      { url: `http://127.0.0.1:${port}/hooks`, events: ['meeting.completed'] },
      auth,
    );
    assert.equal(hook.status, 201, hook.text);

    recognizer.hold();
    const first = h.spawnWorker();
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'quiet' }, auth);
    const meeting = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${meeting}/recording`, speechWav(SPEECH), {
      ...auth,
      'content-type': 'audio/wav',
    });
    assert.equal(put.status, 202, put.text);
    await waitFor('the quiet meeting’s window at the recogniser, and the black hole holding deliveries', () =>
      Promise.resolve(recognizer.calls() >= 1 && hole.ever() >= 4),
    );
    first.proc.kill('SIGKILL');
    await first.exited;
    recognizer.release();
    h.spawnWorker();

    await waitFor(
      'the quiet workspace’s meeting.completed to reach its receiver',
      () => Promise.resolve(got.some((b) => b.includes(meeting))),
      // A reclaim, a second worker starting, the window, the close-out and the delivery: slow on a
      // loaded CI machine (100 s was not enough there), and still inside the black hole's five minutes.
      240_000,
    );
    const reclaimed = await sql<{ n: number }>`select count(*)::int as n from job_attempts a
        join jobs j on j.id = a.job_id
       where j.meeting_id = ${meeting}::uuid and a.status = 'lease_expired'`.execute(owner);
    assert.ok((reclaimed.rows[0]?.n ?? 0) >= 1, 'the killed worker’s window was reclaimed by the sweep');
    const noisyAttempts = await sql<{ n: number }>`select count(*)::int as n from webhook_attempts a
        join webhook_deliveries d on d.id = a.delivery_id where d.workspace_id = ${h.workspaceId}::uuid`.execute(
      owner,
    );
    assert.equal(
      noisyAttempts.rows[0]?.n,
      0,
      'all of that happened while every black-holed delivery was still waiting for its answer',
    );
    assert.ok(hole.most() <= 4, `one workspace never had more than 4 deliveries in flight (${hole.most()})`);
  } finally {
    await hole.close();
    await h.close();
    await recognizer.close();
    receiver.closeAllConnections();
    await new Promise<void>((r) => receiver.close(() => r()));
  }
});

void it('F6: an endpoint whose deliveries failed for the set time with no success is disabled, with an audit entry and a line in status', async () => {
  const h = await startHarness({
    env: {
      VERBATIM_WEBHOOK_RETRY_SECONDS: '0.2',
      VERBATIM_WEBHOOK_RETRY_CAP_SECONDS: '0.5',
      VERBATIM_WEBHOOK_MAX_ATTEMPTS: '1000',
      // 2.6 seconds.
      VERBATIM_WEBHOOK_DISABLE_AFTER_DAYS: '0.00003',
    },
  });
  const failing = http.createServer((_req, res) => res.writeHead(500).end());
  await new Promise<void>((r) => failing.listen(0, '127.0.0.1', r));
  const owner = h.db.owner();
  try {
    const port = (failing.address() as AddressInfo).port;
    const hook = await h.request('POST', '/v1/webhooks', { url: `http://127.0.0.1:${port}/x` });
    assert.equal(hook.status, 201, hook.text);
    await sql`insert into webhook_deliveries (id, workspace_id, endpoint_id, event_id, event_type, body, status)
        values (gen_random_uuid(), ${h.workspaceId}::uuid, ${hook.json.id}::uuid, ${randomUUID()}::uuid,
                'meeting.completed', '{}', 'pending')`.execute(owner);
    h.spawnWorker();
    await waitFor('the endpoint to be disabled', async () => {
      const hooks = (await h.request('GET', '/v1/webhooks')).json.webhooks as Array<{
        id: string;
        disabledAt: string | null;
      }>;
      return hooks.find((w) => w.id === hook.json.id)?.disabledAt ? true : null;
    });
    const audit = await h.request('GET', '/v1/audit?action=webhook.disabled');
    assert.equal(audit.status, 200, audit.text);
    assert.equal(audit.json.events?.[0]?.subject?.id, hook.json.id, audit.text);
    const log = (await h.request('GET', `/v1/webhooks/${hook.json.id}/deliveries`)).json.deliveries;
    assert.equal(log[0].status, 'failed');
    assert.match(String(log[0].lastError), /endpoint disabled/);
    const status = spawnVerbatim(['status'], h.env());
    assert.equal(await status.exited, 0, status.output());
    assert.match(status.output(), /endpoints disabled for failing 1\b/);
    const metrics = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
    assert.match(metrics.body, /^verbatim_webhook_endpoints_disabled 1$/m);
  } finally {
    await h.close();
    failing.closeAllConnections();
    await new Promise<void>((r) => failing.close(() => r()));
  }
});

void it('F6: calendar feeds of one workspace that never answer delay neither another workspace’s feed nor more than two of its own slots', async () => {
  const hole = await startBlackHole();
  const fake = await startFakeRecall();
  const calendarServer = http.createServer((_req, res) => {
    const start = new Date(Date.now() + 3 * 3_600_000);
    res
      .writeHead(200, { 'content-type': 'text/calendar' })
      .end(
        [
          'BEGIN:VCALENDAR',
          'VERSION:2.0',
          'PRODID:-//verbatim-test//EN',
          vevent('quiet-standup', start, ['LOCATION:https://acme.zoom.us/j/4242']),
          'END:VCALENDAR',
        ].join('\r\n'),
      );
  });
  await new Promise<void>((r) => calendarServer.listen(0, '127.0.0.1', r));
  const h = await startHarness({
    env: {
      VERBATIM_RECALL_URL: fake.url,
      VERBATIM_RECALL_API_KEY: fake.apiKey,
      VERBATIM_FEED_PLAIN_HTTP_HOSTS: '127.0.0.1',
      VERBATIM_FEED_CONCURRENCY: '8',
      VERBATIM_FEED_WORKSPACE_CONCURRENCY: '2',
    },
  });
  const owner = h.db.owner();
  try {
    // The noisy workspace subscribes to twelve feeds whose server accepts and never answers: each
    // read holds its slot until the fetch times out (15 s).
    for (let n = 0; n < 12; n++) await addCalendarFeed(h.app.deps, h.workspaceId, { url: hole.url(n) });
    const quietWs = await h.app.workspaces.createWorkspace('quiet');
    const port = (calendarServer.address() as AddressInfo).port;
    const quiet = await addCalendarFeed(h.app.deps, quietWs, { url: `http://127.0.0.1:${port}/quiet.ics` });
    h.spawnWorker();
    let heldWhenRead = -1;
    await waitFor('the quiet workspace’s feed to be read', async () => {
      const row = await sql<{ last_polled_at: Date | null }>`
        select last_polled_at from calendar_feeds where id = ${quiet.id}::uuid`.execute(owner);
      if (!row.rows[0]?.last_polled_at) return null;
      heldWhenRead = hole.ever();
      return true;
    });
    assert.ok(
      heldWhenRead <= 2,
      `the quiet feed was read while at most two of the noisy workspace's feeds had been tried (${heldWhenRead})`,
    );
    const made = await sql<{ n: number }>`select count(*)::int as n from bot_recordings
        where workspace_id = ${quietWs}::uuid`.execute(owner);
    assert.equal(made.rows[0]?.n, 1, 'the quiet feed’s meeting has its recording');
    await waitFor(
      'the noisy feeds to go on being tried, two at a time',
      () => Promise.resolve(hole.ever() >= 4),
      60_000,
    );
    assert.ok(hole.most() <= 2, `one workspace never had more than 2 feeds read at once (${hole.most()})`);
  } finally {
    await hole.close();
    await h.close();
    await fake.close();
    await new Promise<void>((r) => calendarServer.close(() => r()));
  }
});
