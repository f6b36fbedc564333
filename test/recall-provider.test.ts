import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { inspect } from 'node:util';
import type { RecordingDownload } from '../src/ports.ts';
import { EgressGuard } from '../src/net/egress.ts';
import { RecallBotProvider } from '../src/adapters/recall-bot-provider.ts';
import { AppError, ErrorKind, toErrorRecord } from '../src/domain/errors.ts';
import { verifyWebhook } from '../src/events/webhooks.ts';
import {
  newRecallWebhookSecret,
  recallWebhookSignature,
  sendSignedWebhook,
  signedWebhookRequest,
  startFakeRecall,
  type FakeRecall,
} from './support/fake-recall.ts';

const HOUR = 3_600_000;
const MEETING = 'https://meet.google.com/abc-defg-hij';

let fake: FakeRecall;
let provider: RecallBotProvider;

beforeEach(async () => {
  // A key that the generic redaction patterns would not catch: only exact scrubbing hides it.
  fake = await startFakeRecall({ apiKey: 'RecallKey0123456789abcdefXYZ' });
  // The fake serves recording links on loopback, which the egress guard allows only when told to.
  provider = new RecallBotProvider({
    baseUrl: fake.url,
    apiKey: fake.apiKey,
    timeoutMs: 5_000,
    egress: new EgressGuard('127.0.0.0/8'),
  });
});
afterEach(async () => {
  await fake.close();
});

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof AppError, `expected AppError, got ${String(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

async function bufferOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A download read whole, or null when there was nothing to download. */
async function downloaded(download: Promise<RecordingDownload | null>): Promise<Buffer | null> {
  const got = await download;
  return got === null ? null : bufferOf(got.stream);
}

function scheduled(key: string, metadata: Record<string, string> = { recordingId: key }, inMs = HOUR) {
  return {
    meetingUrl: MEETING,
    joinAt: new Date(fake.now() + inMs),
    metadata,
    idempotencyKey: key,
  };
}

void describe('RecallBotProvider against the fake Recall API', () => {
  void it('R1/R3: creates a scheduled bot with join_at, metadata, a bot name and the Idempotency-Key header', async () => {
    const joinAt = new Date(Date.UTC(2031, 0, 15, 9, 30));
    const bot = await provider.createBot({
      meetingUrl: MEETING,
      joinAt,
      botName: 'Verbatim notetaker',
      metadata: { workspaceId: 'ws-1', recordingId: 'rec-1' },
      idempotencyKey: 'key-create-1',
    });

    assert.match(bot.id, /^[0-9a-f-]{36}$/);
    assert.equal(bot.joinAt?.toISOString(), joinAt.toISOString());
    assert.deepEqual(bot.metadata, { workspaceId: 'ws-1', recordingId: 'rec-1' });
    assert.equal(bot.status, 'ready');
    assert.equal(bot.meetingUrl, MEETING, 'the create answer keeps the URL that was sent');
    assert.equal(bot.recordingUrl, null);

    const stored = fake.bot(bot.id)!;
    assert.equal(stored.joinAt, joinAt.toISOString());
    assert.equal(stored.botName, 'Verbatim notetaker');
    assert.deepEqual(stored.recordingConfig, { audio_mixed_mp3: {} });
    const request = fake.requests.find((r) => r.endpoint === 'create')!;
    assert.equal(request.idempotencyKey, 'key-create-1');
    assert.equal(request.authorization, `Token ${fake.apiKey}`);
    assert.equal(request.path, '/api/v1/bot/');

    const retrieved = await provider.retrieveBot(bot.id);
    assert.equal(retrieved.id, bot.id);
    assert.equal(retrieved.meetingUrl, null, 'Recall answers meeting_url as {platform, meeting_id}');
    assert.deepEqual(retrieved.metadata, bot.metadata);
  });

  void it('R3: the same Idempotency-Key replays the original bot instead of creating a second one', async () => {
    const first = await provider.createBot(scheduled('key-replay'));
    const second = await provider.createBot(scheduled('key-replay'));
    assert.equal(second.id, first.id);
    assert.equal(fake.calls.create, 2);
    assert.equal(fake.bots().length, 1);

    const other = await provider.createBot(scheduled('key-other'));
    assert.notEqual(other.id, first.id);
    assert.equal(fake.bots().length, 2);
  });

  void it('R3/R4: a create whose response is lost is re-sent with the stored key and returns the same bot', async () => {
    fake.failNext('create', 'drop_after_commit');
    const lost = await rejection(provider.createBot(scheduled('key-lost')));
    assert.equal(lost.kind, ErrorKind.transient);
    assert.equal(lost.code, 'bot.unreachable');
    assert.equal(fake.bots().length, 1, 'the provider committed the bot before the answer was lost');

    const resent = await provider.createBot(scheduled('key-lost'));
    assert.equal(resent.id, fake.bots()[0]!.id);
    assert.equal(fake.bots().length, 1);
    assert.equal(fake.calls.list, 0, 'no list call was needed');
  });

  void it('R4: past the provider key retention (one hour) the same key creates a twin — the trust window must stay below it', async () => {
    const first = await provider.createBot(scheduled('key-aged', { recordingId: 'r' }, 3 * HOUR));
    fake.advanceTime(55 * 60_000 - 1);
    assert.equal(
      (await provider.createBot(scheduled('key-aged', { recordingId: 'r' }, 2 * HOUR))).id,
      first.id,
    );
    fake.advanceTime(5 * 60_000 + 1);
    const twin = await provider.createBot(scheduled('key-aged', { recordingId: 'r' }, 2 * HOUR));
    assert.notEqual(twin.id, first.id);
    assert.equal(fake.bots().length, 2);
  });

  void it('R3: a duplicate create while the first is still in flight gets 409, classified transient', async () => {
    const hold = fake.holdNextCreate();
    const firstCall = provider.createBot(scheduled('key-inflight'));
    await hold.arrived;

    const duplicate = await rejection(provider.createBot(scheduled('key-inflight')));
    assert.equal(duplicate.kind, ErrorKind.transient);
    assert.equal(duplicate.code, 'bot.idempotency_in_flight');
    assert.match(duplicate.message, /HTTP 409/);

    hold.release();
    const first = await firstCall;
    const retried = await provider.createBot(scheduled('key-inflight'));
    assert.equal(retried.id, first.id);
    assert.equal(fake.bots().length, 1);
  });

  void it('R2: 429 carries Retry-After in seconds; the fake counts per endpoint and never admits past its limit', async () => {
    fake.limits.list = 2;
    await provider.listBots();
    fake.advanceTime(20_000);
    await provider.listBots();

    const limited = await rejection(provider.listBots());
    assert.equal(limited.kind, ErrorKind.transient);
    assert.equal(limited.code, 'bot.rate_limited');
    assert.equal(limited.retryAfterSeconds, 40, 'the oldest admitted call leaves the window in 40 s');
    assert.equal(fake.calls.list, 3);
    assert.equal(fake.rateLimited.list, 1);
    // Three were sent within the minute (the peak counts what the client sent), one refused.
    assert.equal(fake.peakPerMinute.list, 3);

    // Other endpoints have their own budgets.
    await provider.createBot(scheduled('key-budget'));
    assert.equal(fake.rateLimited.create, 0);

    fake.advanceTime(40_000);
    await provider.listBots();
    assert.equal(fake.rateLimited.list, 1, 'admitted once the oldest left the window');
    assert.equal(fake.peakPerMinute.list, 3);
  });

  void it('R2: a Retry-After given as an HTTP date is turned into seconds', async () => {
    const at = new Date(Date.now() + 120_000).toUTCString();
    fake.failNext('retrieve', { status: 429, headers: { 'retry-after': at } });
    const limited = await rejection(provider.retrieveBot('any'));
    assert.equal(limited.code, 'bot.rate_limited');
    assert.ok(
      limited.retryAfterSeconds! >= 118 && limited.retryAfterSeconds! <= 120,
      `got ${limited.retryAfterSeconds}`,
    );
  });

  void it('R2: 507 (ad-hoc pool empty) is transient with a 30 s retry, is not remembered under the key, and spares scheduled bots', async () => {
    fake.adhocPoolEmpty = true;
    const adhoc = { ...scheduled('key-adhoc', { recordingId: 'adhoc' }, 60_000) };
    const noCapacity = await rejection(provider.createBot(adhoc));
    assert.equal(noCapacity.kind, ErrorKind.transient);
    assert.equal(noCapacity.code, 'bot.no_capacity');
    assert.equal(noCapacity.retryAfterSeconds, 30);
    assert.equal(fake.bots().length, 0);

    // A scheduled bot (join_at more than 10 minutes ahead) never meets an empty ad-hoc pool.
    await provider.createBot(scheduled('key-scheduled'));
    assert.equal(fake.bots().length, 1);

    // The provider's own Retry-After wins when it sends one.
    fake.noCapacityRetryAfter = 12;
    assert.equal((await rejection(provider.createBot(adhoc))).retryAfterSeconds, 12);

    // 30 s later the pool is back; the same key creates the bot (the 507 was not cached).
    fake.advanceTime(30_000);
    fake.adhocPoolEmpty = false;
    const bot = await provider.createBot(adhoc);
    assert.deepEqual(bot.metadata, { recordingId: 'adhoc' });
    assert.equal(fake.bots().length, 2);
  });

  void it('R4: list filters by metadata and status and follows `next` across pages', async () => {
    const inWs1: string[] = [];
    for (let i = 0; i < 12; i++) {
      const bot = await provider.createBot(
        scheduled(`ws1-${i}`, { workspaceId: 'ws-1', recordingId: `r${i}` }),
      );
      inWs1.push(bot.id);
    }
    for (let i = 0; i < 5; i++) {
      await provider.createBot(scheduled(`ws2-${i}`, { workspaceId: 'ws-2', recordingId: `q${i}` }));
    }
    // Two of ws-1's bots have joined their calls and are no longer scheduled.
    fake.pushStatus(inWs1[3]!, 'joining_call');
    fake.pushStatus(inWs1[7]!, 'joining_call');
    fake.pushStatus(inWs1[7]!, 'in_call_recording');

    const seen: string[] = [];
    let page = await provider.listBots({ metadata: { workspaceId: 'ws-1' }, pageSize: 5 });
    let pages = 1;
    seen.push(...page.bots.map((b) => b.id));
    while (page.next !== null) {
      page = await provider.listBots({ cursor: page.next });
      pages++;
      seen.push(...page.bots.map((b) => b.id));
    }
    assert.equal(pages, 3);
    assert.equal(fake.calls.list, 3);
    assert.deepEqual(seen.sort(), [...inWs1].sort());

    const firstPath = fake.requests.find((r) => r.endpoint === 'list')!.path;
    assert.match(firstPath, /metadata__workspaceId=ws-1/);

    const active = await provider.listBots({
      metadata: { workspaceId: 'ws-1' },
      statuses: ['joining_call', 'in_call_recording'],
      pageSize: 50,
    });
    assert.deepEqual(active.bots.map((b) => b.id).sort(), [inWs1[3]!, inWs1[7]!].sort());
    assert.equal(active.bots.find((b) => b.id === inWs1[7])!.status, 'in_call_recording');
    assert.equal(active.next, null);

    const later = await provider.listBots({
      metadata: { workspaceId: 'ws-2' },
      joinAtAfter: new Date(fake.now() + 2 * HOUR),
    });
    assert.deepEqual(later.bots, []);
  });

  void it('R4: a `next` link to another host is followed on the configured API only', async () => {
    for (let i = 0; i < 3; i++) await provider.createBot(scheduled(`x-${i}`, { workspaceId: 'ws-x' }));
    const first = await provider.listBots({ metadata: { workspaceId: 'ws-x' }, pageSize: 2 });
    const foreign = first.next!.replace(fake.url, 'https://elsewhere.example');
    const second = await provider.listBots({ cursor: foreign });
    assert.equal(second.bots.length, 1);
    assert.equal(second.next, null);
  });

  void it('R7: delete removes a scheduled bot, is idempotent, and refuses a dispatched bot, which leave_call takes out of its call', async () => {
    const bot = await provider.createBot(scheduled('key-delete'));
    await provider.deleteBot(bot.id);
    assert.equal(fake.bot(bot.id), undefined);
    assert.equal(fake.requests.find((r) => r.endpoint === 'delete')!.path, `/api/v1/bot/${bot.id}/`);

    // A retry after a lost answer finds the bot gone: that is success.
    await provider.deleteBot(bot.id);
    assert.equal(fake.calls.delete, 2);

    const gone = await rejection(provider.retrieveBot(bot.id));
    assert.equal(gone.kind, ErrorKind.permanent);
    assert.equal(gone.code, 'bot.not_found');

    const joined = await provider.createBot(scheduled('key-joined'));
    fake.pushStatus(joined.id, 'joining_call');
    const dispatched = await rejection(provider.deleteBot(joined.id));
    assert.equal(dispatched.kind, ErrorKind.permanent);
    assert.equal(dispatched.code, 'bot.already_dispatched');
    assert.ok(fake.bot(joined.id));

    // A dispatched bot is taken out of its call instead; once out, leaving again is a success.
    await provider.leaveCall(joined.id);
    assert.equal(fake.bot(joined.id)!.statusChanges.at(-1)!.code, 'call_ended');
    assert.equal(
      fake.requests.find((r) => r.endpoint === 'leave_call')!.path,
      `/api/v1/bot/${joined.id}/leave_call/`,
    );
    await provider.leaveCall(joined.id);
    await provider.leaveCall('no-such-bot');
    assert.equal(fake.calls.leave_call, 3);
  });

  void it('R7: status changes come oldest first with sub codes; the latest is the status', async () => {
    const bot = await provider.createBot(scheduled('key-status'));
    fake.pushStatus(bot.id, 'joining_call');
    fake.advanceTime(1_000);
    fake.pushStatus(bot.id, 'fatal', 'bot_errored', 'The bot errored.');

    const retrieved = await provider.retrieveBot(bot.id);
    assert.equal(retrieved.status, 'fatal');
    assert.deepEqual(
      retrieved.statusChanges.map((c) => [c.code, c.subCode]),
      [
        ['ready', null],
        ['joining_call', null],
        ['fatal', 'bot_errored'],
      ],
    );
    assert.equal(retrieved.statusChanges[2]!.message, 'The bot errored.');
    assert.ok(retrieved.statusChanges[2]!.at.getTime() > retrieved.statusChanges[1]!.at.getTime());
    assert.equal(retrieved.joinAt, null, 'join_at is only readable before the bot joins');
  });

  void it('R7: downloads the recording bytes without the API key; an empty or missing recording is null', async () => {
    const audio = Buffer.from('ID3 fake mp3 bytes');
    const bot = await provider.createBot(scheduled('key-recording'));
    assert.equal(await provider.downloadRecording(bot), null, 'no recording yet: no request either');
    assert.equal(fake.calls.download, 0);

    fake.pushStatus(bot.id, 'done');
    fake.setRecording(bot.id, audio);
    const done = await provider.retrieveBot(bot.id);
    assert.match(done.recordingUrl ?? '', /\/media\/[0-9a-f]+\.mp3$/);
    assert.deepEqual(await downloaded(provider.downloadRecording(done)), audio);
    const download = fake.requests.find((r) => r.endpoint === 'download')!;
    assert.equal(download.authorization, undefined, 'a pre-signed link never gets the key');

    fake.setRecording(bot.id, Buffer.alloc(0));
    assert.equal(await provider.downloadRecording(await provider.retrieveBot(bot.id)), null);

    fake.setRecording(bot.id, null);
    const silent = await provider.retrieveBot(bot.id);
    assert.equal(silent.recordingUrl, null);
    assert.equal(await provider.downloadRecording(silent), null);

    // An expired link is worth a fresh retrieve, not a failure.
    const expired = await rejection(provider.downloadRecording(done));
    assert.equal(expired.kind, ErrorKind.transient);
    assert.equal(expired.code, 'bot.recording_link_expired');

    // S5: a link to an internal address is the provider's word, not ours to follow: without the
    // operator's allowance, loopback is refused and nothing is requested.
    fake.setRecording(bot.id, audio);
    const fresh = await provider.retrieveBot(bot.id);
    const downloads = fake.calls.download;
    const guarded = new RecallBotProvider({ baseUrl: fake.url, apiKey: fake.apiKey });
    const refused = await rejection(guarded.downloadRecording(fresh));
    assert.deepEqual([refused.kind, refused.code], [ErrorKind.permanent, 'egress.refused']);
    assert.equal(fake.calls.download, downloads, 'the link was never fetched');
    const small = new RecallBotProvider({
      baseUrl: fake.url,
      apiKey: fake.apiKey,
      egress: new EgressGuard('127.0.0.0/8'),
      maxDownloadBytes: 4,
    });
    const big = await rejection(small.downloadRecording(fresh));
    assert.equal(big.code, 'bot.recording_too_large');
    assert.match(big.message, /over the limit of 4/, 'refused on its announced length, before any byte');
  });

  void it('B10: a recording streams as it downloads; a connection cut midway fails the stream as transient', async () => {
    const audio = Buffer.alloc(3 * 1024 * 1024, 7);
    const bot = await provider.createBot(scheduled('key-streamed'));
    fake.pushStatus(bot.id, 'done');
    fake.setRecording(bot.id, audio);
    const done = await provider.retrieveBot(bot.id);
    const whole = await provider.downloadRecording(done);
    assert.ok(whole);
    assert.equal(whole.declaredBytes, audio.length);
    assert.ok((await bufferOf(whole.stream)).equals(audio));

    fake.failNext('download', 'cut_midway');
    const cut = await provider.downloadRecording(done);
    assert.ok(cut, 'the headers and the first bytes arrived');
    const broken = await rejection(bufferOf(cut.stream));
    assert.deepEqual([broken.kind, broken.code], [ErrorKind.transient, 'bot.recording_unavailable']);
  });

  void it('classifies server errors, lost connections and timeouts as transient; 400/401/403/402 as their own', async () => {
    const cases: [number, ErrorKind, string][] = [
      [500, ErrorKind.transient, 'bot.server_error'],
      [502, ErrorKind.transient, 'bot.server_error'],
      [503, ErrorKind.transient, 'bot.server_error'],
      [400, ErrorKind.permanent, 'bot.bad_request'],
      [401, ErrorKind.permanent, 'bot.auth'],
      [403, ErrorKind.permanent, 'bot.auth'],
      [402, ErrorKind.quotaExhausted, 'bot.quota_exhausted'],
    ];
    for (const [status, kind, code] of cases) {
      fake.failNext('retrieve', { status });
      const err = await rejection(provider.retrieveBot('some-bot'));
      assert.deepEqual([err.kind, err.code], [kind, code], `HTTP ${status}`);
    }

    fake.failNext('list', 'reset');
    const reset = await rejection(provider.listBots());
    assert.deepEqual([reset.kind, reset.code], [ErrorKind.transient, 'bot.unreachable']);

    const quick = new RecallBotProvider({ baseUrl: fake.url, apiKey: fake.apiKey, timeoutMs: 200 });
    fake.failNext('retrieve', 'hang');
    const timeout = await rejection(quick.retrieveBot('slow-bot'));
    assert.deepEqual([timeout.kind, timeout.code], [ErrorKind.transient, 'bot.timeout']);

    const wrongKey = new RecallBotProvider({ baseUrl: fake.url, apiKey: 'not-the-key' });
    const auth = await rejection(wrongKey.listBots());
    assert.deepEqual([auth.kind, auth.code], [ErrorKind.permanent, 'bot.auth']);

    await fake.close();
    const down = await rejection(provider.retrieveBot('x'));
    assert.deepEqual([down.kind, down.code], [ErrorKind.transient, 'bot.unreachable']);
    fake = await startFakeRecall();
  });

  void it('S3: the API key never appears in errors, their records, or the adapter itself', async () => {
    const key = fake.apiKey;
    const errors: AppError[] = [];
    // A proxy that echoes the request headers back in its error body.
    fake.failNext('create', { status: 400, body: { detail: `bad request; Authorization: Token ${key}` } });
    errors.push(await rejection(provider.createBot(scheduled('key-secret'))));
    fake.failNext('list', { status: 502, body: `upstream said Token ${key}` });
    errors.push(await rejection(provider.listBots()));
    fake.failNext('retrieve', 'reset');
    errors.push(await rejection(provider.retrieveBot('x')));
    const quick = new RecallBotProvider({ baseUrl: fake.url, apiKey: key, timeoutMs: 100 });
    fake.failNext('delete', 'hang');
    errors.push(await rejection(quick.deleteBot('x')));
    const badHost = new RecallBotProvider({ baseUrl: 'http://127.0.0.1:1', apiKey: key });
    errors.push(await rejection(badHost.retrieveBot('x')));

    assert.match(errors[0]!.message, /\[redacted\]/);
    for (const err of errors) {
      for (const text of [
        err.message,
        JSON.stringify(toErrorRecord(err)),
        inspect(err, { depth: 8 }),
        err.stack,
      ]) {
        assert.ok(!String(text).includes(key), `key leaked via ${err.code}: ${text}`);
      }
    }
    assert.ok(!JSON.stringify(provider).includes(key));
    assert.ok(!inspect(provider, { depth: 8, showHidden: true }).includes(key));
  });

  void it('refuses to create a bot without an idempotency key', async () => {
    const err = await rejection(provider.createBot({ ...scheduled('x'), idempotencyKey: '' }));
    assert.equal(err.code, 'bot.bad_request');
    assert.equal(fake.calls.create, 0);
  });
});

void describe('signed Recall webhooks (test helper)', () => {
  void it('R8: signs in the Standard Webhooks scheme the project verifier accepts, for each secret', async () => {
    const [oldSecret, newSecret] = [newRecallWebhookSecret(), newRecallWebhookSecret()];
    const body = { event: 'bot.done', data: { bot: { id: 'b-1', metadata: {} }, data: { code: 'done' } } };
    const request = signedWebhookRequest({ secrets: [oldSecret, newSecret], body, prefix: 'webhook' });
    const headers = {
      'webhook-id': request.headers['webhook-id']!,
      'webhook-timestamp': request.headers['webhook-timestamp']!,
      'webhook-signature': request.headers['webhook-signature']!,
    };
    assert.equal(verifyWebhook(oldSecret, headers, request.body), true);
    assert.equal(verifyWebhook(newSecret, headers, request.body), true);
    assert.equal(verifyWebhook(newRecallWebhookSecret(), headers, request.body), false);
    assert.equal(verifyWebhook(oldSecret, headers, `${request.body} `), false);
    assert.equal(
      recallWebhookSignature(oldSecret, request.id, headers['webhook-timestamp'], request.body),
      headers['webhook-signature'].split(' ')[0],
    );

    const received: { headers: Record<string, unknown>; body: string }[] = [];
    const server = createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString('utf8')));
      req.on('end', () => {
        received.push({ headers: req.headers, body: text });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const stale = Math.floor(Date.now() / 1000) - 600;
      const sent = await sendSignedWebhook(`http://127.0.0.1:${port}/hook`, {
        secrets: [oldSecret],
        body,
        id: 'msg_replayed',
        timestamp: stale,
      });
      assert.equal(sent.status, 204);
      const got = received[0]!;
      assert.equal(got.headers['svix-id'], 'msg_replayed');
      assert.equal(got.headers['svix-timestamp'], String(stale));
      assert.equal(got.body, JSON.stringify(body));
      assert.equal(
        got.headers['svix-signature'],
        recallWebhookSignature(oldSecret, 'msg_replayed', stale, got.body),
      );
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
