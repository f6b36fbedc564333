import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import {
  newRecallWebhookSecret,
  sendStatusWebhook,
  startFakeRecall,
  type FakeRecall,
} from './support/fake-recall.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const MINUTE = 60_000;
const idsOf = (page: { recordings: { id: string }[] }) => page.recordings.map((r) => r.id);

/*
 * R9/R10 end to end: the API and a real worker process against the fake Recall. A bot the provider
 * made is found whatever became of our answer, its webhooks are never dropped, creates retry on the
 * job's own backoff, a moved event keeps one bot, and a slow provider never holds an upload.
 */
void describe('bot recovery: a bot that recorded is never lost', () => {
  let fake: FakeRecall;
  let h: Harness;
  const secret = newRecallWebhookSecret();

  before(async () => {
    fake = await startFakeRecall();
    h = await startHarness({
      env: {
        VERBATIM_RECALL_URL: fake.url,
        VERBATIM_RECALL_API_KEY: fake.apiKey,
        VERBATIM_RECALL_WEBHOOK_SECRETS: secret,
        // Neither the back-fill of a lost `done` nor the backstop may be what saves a recording here.
        VERBATIM_BOT_BACKFILL_AFTER_SECONDS: '3600',
        VERBATIM_BOT_BACKSTOP_SECONDS: '86400',
      },
    });
    h.spawnWorker();
  });
  // A scenario that fails leaves no scripted failure behind for the next one.
  afterEach(() => fake.clearFailures('create'));
  after(async () => {
    await h?.close();
    await fake?.close();
  });

  const link = () => `https://meet.google.com/${randomUUID().slice(0, 3)}-${randomUUID().slice(0, 4)}`;

  async function postEvent(e: {
    startMs: number;
    endMs: number;
    meetingUrl?: string;
    eventId?: string;
    title?: string;
  }) {
    return h.request('POST', '/v1/calendar-events', {
      title: e.title ?? 'Weekly sync',
      start: new Date(e.startMs).toISOString(),
      end: new Date(e.endMs).toISOString(),
      meetingUrl: e.meetingUrl ?? link(),
      ...(e.eventId ? { eventId: e.eventId } : {}),
    });
  }

  const rowOf = (id: string) =>
    h.app.database.db.selectFrom('bot_recordings').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const botsFor = (recordingId: string) =>
    fake.bots().filter((b) => b.metadata.verbatim_recording === recordingId);
  const scheduleJobOf = (recordingId: string) =>
    h.app.database.db
      .selectFrom('jobs')
      .selectAll()
      .where('subject_id', '=', recordingId)
      .where('kind', '=', 'schedule-bot')
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();

  async function waitForStatus(id: string, status: string) {
    return waitFor(`recording ${id} to be ${status}`, async () => {
      const r = await rowOf(id);
      return r.status === status ? r : null;
    });
  }

  /** A webhook as Recall signs it: the bot's metadata names our recording and workspace. */
  async function send(
    botId: string,
    code: string,
    metadata: Record<string, string>,
  ): Promise<{ status: number; outcome: string | undefined }> {
    return sendStatusWebhook(h.api, secret, { id: botId, metadata }, code);
  }

  /** A bot made at the provider behind our back (a create committed after its answer was lost). */
  async function makeBotAtProvider(meetingUrl: string, metadata: Record<string, string>): Promise<string> {
    const res = await fetch(`${fake.url}/api/v1/bot/`, {
      method: 'POST',
      headers: { authorization: `Token ${fake.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ meeting_url: meetingUrl, join_at: new Date().toISOString(), metadata }),
    });
    assert.equal(res.status, 201);
    return ((await res.json()) as { id: string }).id;
  }

  async function expectTranscribed(meetingId: string) {
    const meeting = await waitForMeeting(h, meetingId);
    assert.equal(meeting.status, 'complete');
    const text = (await h.request('GET', `/v1/meetings/${meetingId}/transcript?format=txt`)).text;
    assert.ok(text.toLowerCase().includes('budget'), text);
  }

  void it('R9: create answer lost, provider 503 until after the meeting ended, bot done → found in a full list, attached, imported, complete; with no bot at the provider → bot.schedule_outcome_unknown', async () => {
    // A short meeting that starts in seconds: it is over while the provider still answers 503.
    const start = Date.now() + 2_000;
    fake.failNext('create', 'drop_after_commit');
    fake.failNext('create', { status: 503 }, 1_000);
    const created = await postEvent({ startMs: start, endMs: start + 12_000 });
    assert.equal(created.status, 201, created.text);
    const id = created.json.recording.id as string;
    // The lost create and one 503 are enough: once the meeting is over the job stops creating and
    // asks the provider instead, so a count it could only reach on an idle machine would never come.
    await waitFor(
      () => `the create to be lost and retried into a 503 (${fake.calls.create} creates so far)`,
      async () => fake.calls.create >= 2,
    );
    const [bot] = botsFor(id);
    assert.ok(bot, 'the provider made the bot whose answer was lost');
    assert.equal((await rowOf(id)).bot_id, null);
    // The bot records the meeting and finishes; its webhooks are lost too.
    fake.pushStatus(bot.id, 'joining_call');
    fake.pushStatus(bot.id, 'in_call_recording');
    fake.pushStatus(bot.id, 'call_ended');
    fake.setRecording(bot.id, speechWav(SPEECH));
    fake.pushStatus(bot.id, 'done');
    await waitFor('the meeting to be over', async () => Date.now() > start + 12_500);
    // Still pending on its backoff, or already found by the job's lookup after the end (scheduled
    // until the back-fill reads its lost `done`, or further on): never given up.
    const pending = await rowOf(id);
    assert.ok(['pending', 'scheduled', 'processing', 'complete'].includes(pending.status), pending.status);
    assert.equal(pending.failure_code, null, 'nothing gave up while the provider was down');
    fake.clearFailures('create');

    const found = await waitForStatus(id, 'complete');
    assert.equal(found.bot_id, bot.id, 'the finished bot was found and attached');
    assert.ok(found.meeting_id);
    await expectTranscribed(found.meeting_id);
    assert.equal(botsFor(id).length, 1, 'one bot, never a second');
    const lists = fake.requests.filter((r) => r.endpoint === 'list' && r.path.includes(id));
    assert.ok(lists.length >= 1, 'found by its metadata');
    assert.ok(
      lists.every((r) => !/[?&]status=/.test(r.path)),
      `the list asked for every status: ${lists.map((r) => r.path).join(' ')}`,
    );

    // The same, but the connection was cut before the provider made anything.
    const start2 = Date.now() + 2_000;
    fake.failNext('create', 'reset');
    fake.failNext('create', { status: 503 }, 1_000);
    const none = await postEvent({ startMs: start2, endMs: start2 + 6_000 });
    const noneId = none.json.recording.id as string;
    await waitFor(
      () =>
        `the create to be cut and retried into a 503 (${1001 - fake.failuresLeft('create')} creates so far)`,
      async () => fake.failuresLeft('create') <= 999,
    );
    await waitFor('the meeting to be over', async () => Date.now() > start2 + 6_500);
    // Asked after the end, the provider's complete list holds no bot for it: given up, not created.
    fake.clearFailures('create');
    const failed = await waitForStatus(noneId, 'failed');
    assert.equal(failed.failure_code, 'bot.schedule_outcome_unknown');
    assert.equal(botsFor(noneId).length, 0);
    const listed = await h.request('GET', '/v1/bot-recordings?failureCode=bot_schedule_outcome_unknown');
    assert.ok(idsOf(listed.json).includes(noneId), 'the old spelling of the code still filters');
  });

  void it('R9: every webhook of a bot delivered before its id is attached → none dropped; complete without a back-fill', async () => {
    fake.failNext('create', 'drop_after_commit');
    fake.failNext('create', { status: 503 }, 1_000);
    const created = await postEvent({ startMs: Date.now() + 20 * MINUTE, endMs: Date.now() + 50 * MINUTE });
    const id = created.json.recording.id as string;
    const bot = await waitFor('the provider to make the bot', async () => botsFor(id)[0] ?? null);
    assert.equal((await rowOf(id)).bot_id, null);
    const metadata = bot.metadata;

    // A webhook naming a recording of another workspace, or none of ours, is not applied to ours.
    assert.equal(
      (await send(randomUUID(), 'joining_call', { ...metadata, verbatim_workspace: randomUUID() })).outcome,
      'unknown_bot',
    );
    const outcomes: (string | undefined)[] = [];
    for (const code of ['joining_call', 'in_call_recording', 'call_ended']) {
      fake.pushStatus(bot.id, code);
      outcomes.push((await send(bot.id, code, metadata)).outcome);
    }
    fake.setRecording(bot.id, speechWav(SPEECH));
    fake.pushStatus(bot.id, 'done');
    outcomes.push((await send(bot.id, 'done', metadata)).outcome);
    // `call_ended` moves nothing of ours (the bot's `done` follows it); it is recorded as such.
    assert.deepEqual(outcomes, ['applied', 'applied', 'ignored', 'applied'], 'the first attached the bot');
    assert.equal((await rowOf(id)).bot_id, bot.id);

    const done = await waitForStatus(id, 'complete');
    assert.ok(done.meeting_id);
    await expectTranscribed(done.meeting_id);
    const dropped = await h.app.database.db
      .selectFrom('provider_webhook_events')
      .select(['outcome'])
      .where('bot_id', '=', bot.id)
      .execute();
    assert.equal(dropped.length, 4, 'every webhook was recorded');
    assert.ok(dropped.every((w) => w.outcome !== 'unknown_bot' && w.outcome !== 'held'));
    // The scheduling job, still retrying its 503s, sees the bot attached and ends.
    fake.clearFailures('create');
    await waitFor('the scheduling job to finish', async () => {
      const job = await scheduleJobOf(id);
      return job.status === 'completed' ? job : null;
    });
    assert.equal(botsFor(id).length, 1);

    // A second bot naming a recording that already has one (a twin): its webhook is stored (held,
    // never dropped) and the twin itself is taken out of the call — a call holds one bot.
    const twin = await makeBotAtProvider(bot.meetingUrl, metadata);
    fake.pushStatus(twin, 'in_call_recording');
    assert.equal((await send(twin, 'in_call_recording', metadata)).outcome, 'held');
    const kept = await h.app.database.db
      .selectFrom('provider_webhook_events')
      .select(['outcome', 'recording_id'])
      .where('bot_id', '=', twin)
      .executeTakeFirstOrThrow();
    assert.deepEqual(kept, { outcome: 'held', recording_id: id });
    await waitFor('the twin to be taken out of the call', async () => {
      const last = fake.bot(twin)?.statusChanges.at(-1);
      return last?.code === 'call_ended' && last.sub_code === 'bot_received_leave_call';
    });
    assert.equal((await rowOf(id)).bot_id, bot.id, 'the recording keeps its own bot');
  });

  void it("R9: a 503 or 429 on create retries within the job's backoff (seconds, honouring Retry-After), with the same key, not at the backstop", async () => {
    const creates = fake.calls.create;
    const lists = fake.calls.list;
    fake.failNext('create', { status: 503 }, 2);
    fake.failNext('create', { status: 429, headers: { 'retry-after': '2' } });
    const created = await postEvent({ startMs: Date.now() + 30 * MINUTE, endMs: Date.now() + 60 * MINUTE });
    const id = created.json.recording.id as string;
    const scheduled = await waitForStatus(id, 'scheduled');
    assert.equal(fake.calls.create - creates, 4, 'three failures, then the create');
    assert.equal(fake.calls.list, lists, 'no list call');
    assert.equal(botsFor(id).length, 1);
    assert.equal(scheduled.bot_id, botsFor(id)[0]!.id);
    const keys = new Set(
      fake.requests
        .filter((r) => r.endpoint === 'create' && r.body.includes(id))
        .map((r) => r.idempotencyKey),
    );
    assert.equal(keys.size, 1, 'every try carried the same key');

    // The row is attached inside the job's last attempt, which completes right after.
    const job = await waitFor('the scheduling job to complete', async () => {
      const j = await scheduleJobOf(id);
      return j.status === 'completed' ? j : null;
    });
    assert.equal(job.error_count, 3, "the failures were the job's own attempts");
    const retries = await h.app.database.db
      .selectFrom('audit_events')
      .select('reason')
      .where('subject_id', '=', job.id)
      .where('reason', 'like', '%retry in%')
      .orderBy('at')
      .execute();
    const delays = retries.map((r) => Number(/retry in (\d+) ms/.exec(r.reason ?? '')?.[1]));
    assert.equal(delays.length, 3, retries.map((r) => r.reason).join('; '));
    assert.ok(
      delays.every((d) => d > 0 && d < 60_000),
      `retried in seconds: ${delays.join(', ')} ms`,
    );
    assert.ok(delays[2]! >= 2_000, `the 429's Retry-After was honoured: ${delays[2]} ms`);
  });

  void it('R10: an API event moved by its id → exactly one bot at the provider, at the new time; an overlapping event without an id replaces it, a later one that day is a second meeting', async () => {
    const meetingUrl = link();
    const eventId = `cal-${randomUUID()}`;
    const first = Date.now() + 60 * MINUTE;
    const a = await postEvent({ startMs: first, endMs: first + 30 * MINUTE, meetingUrl, eventId });
    assert.equal(a.status, 201, a.text);
    const aId = a.json.recording.id as string;
    await waitForStatus(aId, 'scheduled');

    const moved = first + 120 * MINUTE;
    const b = await postEvent({ startMs: moved, endMs: moved + 30 * MINUTE, meetingUrl, eventId });
    assert.equal(b.status, 201, b.text);
    assert.equal(b.json.replaced, aId);
    const bId = b.json.recording.id as string;
    assert.equal((await rowOf(aId)).status, 'canceled');
    await waitForStatus(bId, 'scheduled');
    const onLink = () => fake.bots().filter((x) => x.meetingUrl === meetingUrl);
    await waitFor('the old bot to be deleted', async () => onLink().length === 1);
    assert.equal(onLink()[0]!.joinAt, new Date(moved).toISOString(), 'the bot joins at the new time');
    assert.equal(onLink()[0]!.metadata.verbatim_recording, bId);

    // The same id and time again: the recording it has.
    const again = await postEvent({ startMs: moved, endMs: moved + 30 * MINUTE, meetingUrl, eventId });
    assert.equal(again.status, 200);
    assert.equal(again.json.recording.id, bId);
    assert.equal(again.json.duplicate, true);

    // Without an id: a time that overlaps the scheduled one is the same call, moved.
    const shifted = moved + 10 * MINUTE;
    const c = await postEvent({ startMs: shifted, endMs: shifted + 30 * MINUTE, meetingUrl });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.json.replaced, bId);
    const cId = c.json.recording.id as string;
    await waitForStatus(cId, 'scheduled');
    await waitFor('one bot on the link, at the newest time', async () => {
      const bots = onLink();
      return bots.length === 1 && bots[0]!.joinAt === new Date(shifted).toISOString();
    });

    // Without an id, later the same day and not overlapping: another meeting on the same link.
    const later = shifted + 180 * MINUTE;
    const d = await postEvent({ startMs: later, endMs: later + 30 * MINUTE, meetingUrl });
    assert.equal(d.status, 201);
    assert.equal(d.json.replaced, null);
    await waitForStatus(d.json.recording.id as string, 'scheduled');
    assert.equal((await rowOf(cId)).status, 'scheduled', 'the earlier meeting keeps its bot');
    assert.equal(onLink().length, 2);
  });

  void it('R10: a provider call that hangs does not delay an upload: the split runs while the create is held', async () => {
    const hold = fake.holdNextCreate();
    const created = await postEvent({ startMs: Date.now() + 30 * MINUTE, endMs: Date.now() + 60 * MINUTE });
    const id = created.json.recording.id as string;
    await hold.arrived;
    try {
      const meetingId = await uploadMeeting(h, speechWav(SPEECH));
      await waitFor('the upload to be split', async () => {
        const split = await h.app.database.db
          .selectFrom('jobs')
          .select('status')
          .where('meeting_id', '=', meetingId)
          .where('kind', '=', 'split-recording')
          .executeTakeFirst();
        return split?.status === 'completed';
      });
      // The provider client gives up after 30 s; the split did not wait for that.
      assert.equal(hold.clientGaveUp(), false, 'the create is still in flight at the provider');
      assert.equal((await rowOf(id)).status, 'pending');
      await expectTranscribed(meetingId);
    } finally {
      hold.release();
    }
    await waitForStatus(id, 'scheduled');
    assert.equal(botsFor(id).length, 1);
  });

  void it('R1/R10: bot recordings are listed by status, meeting and time with a cursor; links a bot cannot join, events already over and plain-http feeds are refused with 400; the 401 hint keeps its Bearer', async () => {
    const base = Date.now() + 24 * 60 * MINUTE;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await postEvent({
        startMs: base + i * 60 * MINUTE,
        endMs: base + i * 60 * MINUTE + 30 * MINUTE,
      });
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.recording.id as string);
    }
    for (const id of ids) await waitForStatus(id, 'scheduled');
    const window = `from=${new Date(base).toISOString()}&to=${new Date(base + 3 * 60 * MINUTE).toISOString()}`;
    const page1 = await h.request('GET', `/v1/bot-recordings?status=scheduled&${window}&limit=2`);
    assert.equal(page1.status, 200, page1.text);
    assert.deepEqual(idsOf(page1.json), [ids[2], ids[1]], 'newest first');
    assert.ok(page1.json.nextCursor);
    const page2 = await h.request(
      'GET',
      `/v1/bot-recordings?status=scheduled&${window}&limit=2&cursor=${page1.json.nextCursor}`,
    );
    assert.deepEqual(idsOf(page2.json), [ids[0]]);
    assert.equal(page2.json.nextCursor, null);
    const byMeeting = await h.request('GET', `/v1/bot-recordings?meetingId=${randomUUID()}`);
    assert.deepEqual(byMeeting.json.recordings, []);
    const both = await h.request('GET', `/v1/bot-recordings?status=scheduled&status=canceled&${window}`);
    assert.equal(both.status, 200, both.text);
    assert.deepEqual(idsOf(both.json), [ids[2], ids[1], ids[0]], 'a repeated status is either of them');
    for (const [query, code] of [
      ['from=2026-01-01T00:00:00Z&from=2026-02-01T00:00:00Z', 'list.from'],
      ['meetingId=nope', 'list.meetingId'],
      ['status=bogus', 'list.status'],
      ['from=yesterday', 'list.from'],
      ['cursor=xyz', 'list.cursor'],
      ['limit=0', 'list.limit'],
    ]) {
      const bad = await h.request('GET', `/v1/bot-recordings?${query}`);
      assert.equal(bad.status, 400, query);
      assert.equal(bad.json.error.code, code);
    }

    const recordingsBefore = await h.app.database.db
      .selectFrom('bot_recordings')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    const notMeeting = await postEvent({
      startMs: base,
      endMs: base + 30 * MINUTE,
      meetingUrl: 'https://example.com/team-sync',
    });
    assert.equal(notMeeting.status, 400);
    assert.equal(notMeeting.json.error.code, 'event.meeting_url');
    assert.match(notMeeting.json.error.message, /Zoom/);
    for (const ok of [
      'https://acme.zoom.us/j/123456789',
      'https://teams.microsoft.com/l/meetup-join/19%3ameeting_x%40thread.v2/0',
      'https://acme.webex.com/meet/jane',
      'https://app.goto.com/meeting/123456789',
    ]) {
      const r = await postEvent({
        startMs: base + 5 * 60 * MINUTE,
        endMs: base + 6 * 60 * MINUTE,
        meetingUrl: ok,
      });
      assert.ok(r.status === 201, `${ok}: ${r.text}`);
    }
    const over = await postEvent({ startMs: Date.now() - 2 * 60 * MINUTE, endMs: Date.now() - 60 * MINUTE });
    assert.equal(over.status, 400);
    assert.equal(over.json.error.code, 'event.ended');
    const feed = await h.request('POST', '/v1/calendar-feeds', { url: 'http://calendar.example.com/a.ics' });
    assert.equal(feed.status, 400, feed.text);
    assert.match(feed.json.error.message, /https|webcal/);
    const recordingsAfter = await h.app.database.db
      .selectFrom('bot_recordings')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(
      Number(recordingsAfter.n),
      Number(recordingsBefore.n) + 4,
      'only the meeting links were stored',
    );

    const unauthorized = await h.api.inject({ method: 'GET', url: '/v1/bot-recordings' });
    assert.equal(unauthorized.statusCode, 401);
    assert.match(unauthorized.json<{ error: { message: string } }>().error.message, /Authorization: Bearer/);
  });

  void it('R10: an event moved by its id after its bot joined: the call under way keeps its bot, the new time gets a recording and a bot of its own; a time inside that call is that recording', async () => {
    const meetingUrl = link();
    const eventId = `cal-${randomUUID()}`;
    const start = Date.now() + 60 * MINUTE;
    const a = await postEvent({ startMs: start, endMs: start + 30 * MINUTE, meetingUrl, eventId });
    const aId = a.json.recording.id as string;
    await waitForStatus(aId, 'scheduled');
    const bot = botsFor(aId)[0]!;
    fake.pushStatus(bot.id, 'joining_call');
    fake.pushStatus(bot.id, 'in_call_recording');
    assert.equal((await send(bot.id, 'in_call_recording', bot.metadata)).outcome, 'applied');
    assert.equal((await rowOf(aId)).status, 'recording');

    // The organiser nudges the time while the call goes on: the same call, the same recording.
    const nudged = await postEvent({
      startMs: start + 5 * MINUTE,
      endMs: start + 35 * MINUTE,
      meetingUrl,
      eventId,
    });
    assert.equal(nudged.status, 200, nudged.text);
    assert.equal(nudged.json.recording.id, aId);

    // Moved to tomorrow: a meeting still to record. The one under way is not cut off.
    const tomorrow = start + 24 * 60 * MINUTE;
    const b = await postEvent({ startMs: tomorrow, endMs: tomorrow + 30 * MINUTE, meetingUrl, eventId });
    assert.equal(b.status, 201, b.text);
    assert.equal(b.json.replaced, null, 'nothing was canceled');
    const bId = b.json.recording.id as string;
    assert.notEqual(bId, aId);
    await waitForStatus(bId, 'scheduled');
    assert.equal((await rowOf(aId)).status, 'recording', 'the call under way goes on');
    assert.ok(fake.bot(bot.id), 'its bot was neither deleted nor taken out');
    assert.equal(
      fake.requests.filter((r) => r.path.includes(bot.id) && r.endpoint !== 'retrieve').length,
      0,
      'no delete or leave_call for the bot in the call',
    );
    assert.deepEqual(
      botsFor(bId).map((x) => x.joinAt),
      [new Date(tomorrow).toISOString()],
    );
    const again = await postEvent({ startMs: tomorrow, endMs: tomorrow + 30 * MINUTE, meetingUrl, eventId });
    assert.equal(again.json.recording.id, bId, 'the id now names the new recording');
  });

  void it('R10: overlapping events for one link posted at once — without an id, or with one id at different times — leave one recording and one bot', async () => {
    const activeOn = async (meetingUrl: string) =>
      h.app.database.db
        .selectFrom('bot_recordings')
        .selectAll()
        .where('workspace_id', '=', h.workspaceId)
        .where('meeting_url', '=', meetingUrl)
        .where('status', '<>', 'canceled')
        .execute();
    const onLink = (meetingUrl: string) => fake.bots().filter((x) => x.meetingUrl === meetingUrl);

    for (const withId of [false, true]) {
      const meetingUrl = link();
      const eventId = `cal-${randomUUID()}`;
      const base = Date.now() + (withId ? 300 : 90) * MINUTE;
      // Without an id the times overlap (one call); with an id they do not (the event moving).
      const step = withId ? 60 * MINUTE : 5 * MINUTE;
      const answers = await Promise.all(
        [0, 1, 2, 3, 4].map((i) =>
          postEvent({
            startMs: base + i * step,
            endMs: base + i * step + 30 * MINUTE,
            meetingUrl,
            ...(withId ? { eventId } : {}),
          }),
        ),
      );
      for (const r of answers) assert.ok(r.status === 200 || r.status === 201, r.text);
      const active = await activeOn(meetingUrl);
      assert.equal(active.length, 1, `one recording (${withId ? 'one id' : 'no id'}): ${active.length}`);
      const kept = await waitForStatus(active[0]!.id, 'scheduled');
      await waitFor(
        'the replaced recordings to lose their bots',
        async () => onLink(meetingUrl).length === 1,
      );
      assert.equal(onLink(meetingUrl)[0]!.id, kept.bot_id);
      assert.equal(onLink(meetingUrl)[0]!.joinAt, kept.join_at.toISOString());
    }
  });

  void it('R9/R10: a bot made for a recording that was canceled while its create was in flight is taken out of the call when its first webhook names that recording, and what it recorded is imported', async () => {
    const start = Date.now() + 120 * MINUTE;
    const meetingUrl = link();
    // The create's connection is cut, then the provider is down: the row has no bot.
    fake.failNext('create', 'reset');
    fake.failNext('create', { status: 503 }, 1_000);
    const created = await postEvent({ startMs: start, endMs: start + 30 * MINUTE, meetingUrl });
    const id = created.json.recording.id as string;
    await waitFor('the create to be tried', async () => fake.failuresLeft('create') < 1_000);
    const canceled = await h.request('POST', `/v1/bot-recordings/${id}/cancel`);
    assert.equal(canceled.status, 202, canceled.text);
    assert.equal((await rowOf(id)).bot_id, null);
    fake.clearFailures('create');

    // The cut create was committed at the provider after all, late: the bot exists, names the
    // canceled recording in its metadata, and joins the call.
    const stray = await makeBotAtProvider(meetingUrl, {
      verbatim_workspace: h.workspaceId,
      verbatim_recording: id,
    });
    fake.pushStatus(stray, 'joining_call');
    const heard = await send(stray, 'joining_call', {
      verbatim_workspace: h.workspaceId,
      verbatim_recording: id,
    });
    assert.equal(heard.outcome, 'held', 'kept, not applied to the canceled recording');
    await waitFor('the stray bot to be taken out of the call', async () => {
      const last = fake.bot(stray)?.statusChanges.at(-1);
      return last?.code === 'call_ended' && last.sub_code === 'bot_received_leave_call';
    });
    // What it recorded before it left is not dropped: the recording is reopened with that bot,
    // and its import follows when the bot's `done` comes.
    const reopened = await waitForStatus(id, 'joining');
    assert.equal(reopened.bot_id, stray);
    fake.setRecording(stray, speechWav(SPEECH));
    fake.pushStatus(stray, 'done');
    assert.equal(
      (await send(stray, 'done', { verbatim_workspace: h.workspaceId, verbatim_recording: id })).outcome,
      'applied',
    );
    const done = await waitForStatus(id, 'complete');
    assert.ok(done.meeting_id);
    await expectTranscribed(done.meeting_id);
  });
});
