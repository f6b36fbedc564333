import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ConfigError, loadConfig } from '../src/config.ts';
import {
  BACKSTOP_PERIOD_MS,
  backfillEndedBots,
  backstopOffsetMs,
  nextBackstopAt,
} from '../src/bots/resume.ts';
import { scheduleRecording, type BotSchedulingDeps } from '../src/bots/scheduling.ts';
import {
  newRecallWebhookSecret,
  signedWebhookRequest,
  startFakeRecall,
  type FakeRecall,
} from './support/fake-recall.ts';
import { METRICS_AUTH, SPEECH, speechWav, startHarness, waitFor, type Harness } from './support/harness.ts';

const MINUTE = 60_000;

void describe('provider webhooks and the bot recording lifecycle', () => {
  let fake: FakeRecall;
  let h: Harness;
  let deps: BotSchedulingDeps;
  const secret = newRecallWebhookSecret();
  const rotated = newRecallWebhookSecret();

  before(async () => {
    fake = await startFakeRecall();
    h = await startHarness({
      env: {
        VERBATIM_RECALL_URL: fake.url,
        VERBATIM_RECALL_API_KEY: fake.apiKey,
        VERBATIM_RECALL_WEBHOOK_SECRETS: `${rotated},${secret}`,
        // An import waits out the provider's outage this long (an hour by default), then its
        // retries count: long enough for six failed downloads, short enough to see one give up.
        VERBATIM_BOT_IMPORT_PATIENCE_SECONDS: '15',
      },
    });
    const bots = h.app.deps.bots!;
    deps = {
      db: h.app.database.db,
      provider: bots.provider,
      budget: bots.budget,
      log: h.app.log,
      settings: {
        trustWindowMs: 55 * MINUTE,
        lookbackMs: 7 * 24 * 60 * MINUTE,
        maxListPages: 5,
        budgetWaitMs: 5_000,
      },
      deleteLater: async (botId) => {
        await bots.provider.deleteBot(botId);
      },
    };
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await fake?.close();
  });

  /** A pending recording of a 30-minute meeting starting in `startsInMinutes`. */
  async function pendingRecording(
    startsInMinutes: number,
    ownerUserId: string | null = null,
  ): Promise<string> {
    const id = randomUUID();
    const joinAt = new Date(Date.now() + startsInMinutes * MINUTE);
    await h.app.database.db
      .insertInto('bot_recordings')
      .values({
        id,
        workspace_id: h.workspaceId,
        meeting_url: `https://meet.example.com/${id.slice(0, 8)}`,
        join_at: joinAt,
        ends_at: new Date(joinAt.getTime() + 30 * MINUTE),
        title: 'Weekly sync',
        status: 'pending',
        owner_user_id: ownerUserId,
      })
      .execute();
    return id;
  }

  async function scheduledRecording(
    ownerUserId: string | null = null,
  ): Promise<{ id: string; botId: string }> {
    const id = await pendingRecording(30, ownerUserId);
    const botId = await scheduleRecording(deps, id);
    assert.ok(botId);
    return { id, botId };
  }

  async function send(
    botId: string,
    code: string,
    opts: { id?: string; subCode?: string; timestamp?: number; secret?: string } = {},
  ) {
    const req = signedWebhookRequest({
      secrets: [opts.secret ?? secret],
      id: opts.id,
      timestamp: opts.timestamp,
      body: {
        event: 'bot.status_change',
        data: {
          bot: { id: botId, metadata: {} },
          status: { code, sub_code: opts.subCode ?? null, created_at: new Date().toISOString() },
        },
      },
    });
    const res = await h.api.inject({
      method: 'POST',
      url: '/providers/recall/webhooks',
      headers: req.headers,
      payload: req.body,
    });
    return { id: req.id, status: res.statusCode, outcome: res.json<{ outcome?: string }>().outcome };
  }

  const statusOf = async (id: string) =>
    h.app.database.db.selectFrom('bot_recordings').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  void it('R7/U4: joining → recording → done → processing → audio imported → transcript → complete, the meeting owned by who asked for the bot; late, unknown and replayed webhooks change nothing', async () => {
    // U4: the person who asked for the bot (here set on the row; test/people.test.ts asks through the API).
    const asker = randomUUID();
    await h.app.database.db
      .insertInto('users')
      .values({ id: asker, email: `${asker}@example.com`, name: 'Asker', password_hash: null })
      .execute();
    const { id, botId } = await scheduledRecording(asker);
    assert.equal((await send(botId, 'joining_call')).outcome, 'applied');
    assert.equal((await statusOf(id)).status, 'joining');
    const recording = await send(botId, 'in_call_recording');
    assert.equal(recording.outcome, 'applied');
    assert.equal((await statusOf(id)).status, 'recording');
    // Late: a joining webhook that arrives after recording began.
    assert.equal((await send(botId, 'joining_call')).outcome, 'stale');
    assert.equal((await statusOf(id)).status, 'recording');
    // A replay of an applied webhook is applied once.
    assert.equal((await send(botId, 'in_call_recording', { id: recording.id })).outcome, 'duplicate');
    assert.equal((await send(`unknown-${randomUUID()}`, 'in_call_recording')).outcome, 'unknown_bot');

    fake.setRecording(botId, speechWav(SPEECH));
    assert.equal((await send(botId, 'done')).outcome, 'applied');
    assert.equal((await statusOf(id)).status, 'processing');
    const done = await waitFor('the recording to complete through its meeting', async () => {
      const r = await statusOf(id);
      return r.status === 'complete' ? r : null;
    });
    assert.ok(done.meeting_id);
    const meeting = (await h.request('GET', `/v1/meetings/${done.meeting_id}`)).json;
    assert.equal(meeting.status, 'complete');
    assert.equal(meeting.source, 'bot');
    assert.equal(meeting.ownerUserId, asker);
    const text = (
      await h.request('GET', `/v1/meetings/${done.meeting_id}/transcript?format=txt`)
    ).text.toLowerCase();
    assert.ok(text.includes('budget'), text);
  });

  void it('R7/V1: an import waits out the provider’s outage (its download failing more often than an import may fail) and completes (found by the simulation)', async () => {
    const { id, botId } = await scheduledRecording();
    fake.setRecording(botId, speechWav(SPEECH));
    // Six 503s in a row: more than the five failures an import may spend.
    fake.failNext('download', { status: 503, body: 'storage unavailable' }, 6);
    await send(botId, 'in_call_recording');
    assert.equal((await send(botId, 'done')).outcome, 'applied');
    const settled = await waitFor('the recording to settle after the outage', async () => {
      const r = await statusOf(id);
      return r.status === 'complete' || r.status === 'failed' ? r : null;
    });
    assert.equal(settled.status, 'complete', `${settled.failure_code}: ${settled.failure_message}`);
    assert.equal(fake.failuresLeft('download'), 0, 'every failure was served');
    assert.ok(settled.meeting_id);
  });

  void it('B10: an import whose download is cut midway stores nothing of it, downloads again and completes', async () => {
    const { id, botId } = await scheduledRecording();
    fake.setRecording(botId, speechWav(SPEECH));
    fake.failNext('download', 'cut_midway', 2);
    await send(botId, 'in_call_recording');
    assert.equal((await send(botId, 'done')).outcome, 'applied');
    const settled = await waitFor('the recording to settle after two cut downloads', async () => {
      const r = await statusOf(id);
      return r.status === 'complete' || r.status === 'failed' ? r : null;
    });
    assert.equal(settled.status, 'complete', `${settled.failure_code}: ${settled.failure_message}`);
    assert.equal(fake.failuresLeft('download'), 0, 'both cuts were served');
    const db = h.app.database.db;
    // Two attempts failed on the cut, as a transient download failure, and a third completed.
    const attempts = await db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select(['job_attempts.status', 'job_attempts.error_code'])
      .where('jobs.kind', '=', 'import-bot-recording')
      .where(sql<boolean>`jobs.payload ->> 'recordingId' = ${id}`)
      .orderBy('job_attempts.attempt_no')
      .execute();
    assert.deepEqual(
      attempts.map((a) => [a.status, a.error_code]),
      [
        ['retryable_failed', 'bot.recording_unavailable'],
        ['retryable_failed', 'bot.recording_unavailable'],
        ['completed', null],
      ],
    );
    // Nothing of the cut downloads stays: once the meeting's audio is deleted, no file of it remains.
    await waitFor('the meeting’s objects to be deleted', async () => {
      const left = await db
        .selectFrom('object_cleanups')
        .select('id')
        .where('meeting_id', '=', settled.meeting_id!)
        .execute();
      return left.length === 0 ? true : null;
    });
    const files = fs
      .readdirSync(h.dataDir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.includes(settled.meeting_id!))
      .filter((f) => fs.statSync(path.join(h.dataDir, f)).isFile());
    assert.deepEqual(files, [], 'no partial download was left in the store');
    const text = (
      await h.request('GET', `/v1/meetings/${settled.meeting_id}/transcript?format=txt`)
    ).text.toLowerCase();
    assert.ok(text.includes('budget'), text);
  });

  void it('R7: an empty recording completes as empty; a fatal bot fails with its reason', async () => {
    const empty = await scheduledRecording();
    fake.setRecording(empty.botId, Buffer.alloc(0));
    await send(empty.botId, 'in_call_recording');
    await send(empty.botId, 'done');
    const settled = await waitFor('the empty recording to complete', async () => {
      const r = await statusOf(empty.id);
      return r.status === 'complete' ? r : null;
    });
    assert.equal(settled.failure_code, 'bot.empty_recording');
    assert.equal(settled.meeting_id, null, 'no empty meeting is left behind');

    const fatal = await scheduledRecording();
    await send(fatal.botId, 'joining_call');
    assert.equal((await send(fatal.botId, 'fatal', { subCode: 'meeting_not_found' })).outcome, 'applied');
    const failed = await statusOf(fatal.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.failure_code, 'bot.fatal:meeting_not_found');
    assert.equal(
      (await send(fatal.botId, 'in_call_recording')).outcome,
      'stale',
      'nothing moves a failed recording',
    );
  });

  void it('R8: a webhook with a bad or stale signature gets 401 and changes nothing; any configured secret is accepted', async () => {
    const { id, botId } = await scheduledRecording();
    const forged = await send(botId, 'joining_call', { secret: newRecallWebhookSecret() });
    assert.equal(forged.status, 401);
    const stale = await send(botId, 'joining_call', { timestamp: Math.floor(Date.now() / 1000) - 600 });
    assert.equal(stale.status, 401);
    assert.equal((await statusOf(id)).status, 'scheduled', 'nothing changed');
    const seen = await h.app.database.db
      .selectFrom('provider_webhook_events')
      .select('id')
      .where('id', 'in', [forged.id, stale.id])
      .execute();
    assert.equal(seen.length, 0, 'a refused webhook is not recorded');
    assert.equal(
      (await send(botId, 'joining_call', { secret: rotated })).outcome,
      'applied',
      'the other secret works too',
    );
  });

  void it('R1/R6: a calendar event becomes one recording, scheduled through the event path within seconds and without a list call; a duplicate copy adds nothing', async () => {
    const lists = fake.calls.list;
    const event = {
      title: 'Design review',
      start: new Date(Date.now() + 45 * MINUTE).toISOString(),
      end: new Date(Date.now() + 75 * MINUTE).toISOString(),
      meetingUrl: `https://meet.google.com/${randomUUID().slice(0, 8)}`,
    };
    const created = await h.request('POST', '/v1/calendar-events', event);
    assert.equal(created.status, 201, created.text);
    const id = created.json.recording.id as string;
    const scheduled = await waitFor('the event path to schedule the bot', async () => {
      const r = await h.request('GET', `/v1/bot-recordings/${id}`);
      return r.json.status === 'scheduled' ? r.json : null;
    });
    assert.equal(fake.calls.list, lists, 'no list call');
    assert.equal(fake.bots().filter((b) => b.metadata.verbatim_recording === id).length, 1);
    const again = await h.request('POST', '/v1/calendar-events', event);
    assert.equal(again.status, 200);
    assert.equal(again.json.duplicate, true);
    assert.equal(again.json.recording.id, id);
    const bad = await h.request('POST', '/v1/calendar-events', { ...event, meetingUrl: 'not a url' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'event.meeting_url');

    // R7: cancel with the provider down: the bot id is kept and the delete retried until it succeeds.
    fake.failNext('delete', { status: 503 }, 2);
    const canceled = await h.request('POST', `/v1/bot-recordings/${id}/cancel`);
    assert.equal(canceled.status, 202);
    assert.equal(canceled.json.status, 'canceled');
    assert.equal(canceled.json.botId, scheduled.botId, 'the bot id is kept');
    await waitFor(
      'the bot to be deleted at the provider',
      async () => fake.bot(scheduled.botId as string) === undefined,
    );
    assert.ok(fake.calls.delete >= 3, `delete called ${fake.calls.delete} times`);
  });

  void it('R6: the backstop runs each workspace at its own stable offset in the quarter hour', () => {
    const ids = Array.from({ length: 100 }, () => randomUUID());
    const minutes = new Set(ids.map((w) => Math.floor(backstopOffsetMs(w) / MINUTE)));
    assert.ok(minutes.size >= 12, `100 workspaces spread over ${minutes.size} of 15 minutes`);
    const now = new Date();
    for (const w of ids.slice(0, 10)) {
      const next = nextBackstopAt(w, now);
      // Stable: a later slot of the same workspace keeps the same offset.
      assert.equal(nextBackstopAt(w, next).getTime() - next.getTime(), BACKSTOP_PERIOD_MS);
      assert.ok(next > now && next.getTime() - now.getTime() <= BACKSTOP_PERIOD_MS);
      assert.equal(next.getTime() % BACKSTOP_PERIOD_MS, backstopOffsetMs(w));
    }
  });

  void it('R7: a lost done webhook is back-filled from the provider, once', async () => {
    const { id, botId } = await scheduledRecording();
    await send(botId, 'in_call_recording');
    // The meeting has since ended (a bot is never scheduled for a meeting already over).
    await h.app.database.db
      .updateTable('bot_recordings')
      .set({ join_at: new Date(Date.now() - 60 * MINUTE), ends_at: new Date(Date.now() - 30 * MINUTE) })
      .where('id', '=', id)
      .execute();
    fake.setRecording(botId, speechWav(SPEECH));
    fake.pushStatus(botId, 'call_ended');
    fake.pushStatus(botId, 'done');
    // The done webhook never arrives; the backstop asks the provider.
    const bots = h.app.deps.bots!;
    assert.equal(await backfillEndedBots(h.app.deps, bots, h.workspaceId), 1);
    assert.equal(await backfillEndedBots(h.app.deps, bots, h.workspaceId), 0, 'applied once');
    await waitFor('the back-filled recording to complete', async () => {
      const r = await statusOf(id);
      return r.status === 'complete' ? r : null;
    });
  });

  void it('R7: an import that keeps failing ends the recording failed with its reason, not processing for ever', async () => {
    const { id, botId } = await scheduledRecording();
    fake.setRecording(botId, speechWav(SPEECH));
    fake.failNext('download', { status: 500 }, 50);
    await send(botId, 'in_call_recording');
    await send(botId, 'done');
    const failed = await waitFor('the import to give up', async () => {
      const r = await statusOf(id);
      return r.status === 'failed' ? r : null;
    });
    assert.match(failed.failure_code ?? '', /^bot\.import_failed:/);
    fake.clearFailures('download');
  });

  void it('R7: a bot that ended without recording is not_recorded with its reason; a recording whose media never gets a link fails with that reason; neither leaves a meeting', async () => {
    const meetingsBefore = await h.app.database.db
      .selectFrom('meetings')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    const unrecorded = await scheduledRecording();
    await send(unrecorded.botId, 'in_waiting_room');
    fake.pushStatus(unrecorded.botId, 'call_ended', 'timeout_exceeded_waiting_room');
    await send(unrecorded.botId, 'done');
    const notRecorded = await waitFor('the recording to be not_recorded', async () => {
      const r = await statusOf(unrecorded.id);
      return r.status === 'not_recorded' ? r : null;
    });
    assert.equal(notRecorded.failure_code, 'bot.not_recorded:timeout_exceeded_waiting_room');
    assert.equal(notRecorded.meeting_id, null);

    const linkless = await scheduledRecording();
    fake.setRecording(linkless.botId, null);
    await send(linkless.botId, 'in_call_recording');
    await send(linkless.botId, 'done');
    const failed = await waitFor('the linkless import to give up', async () => {
      const r = await statusOf(linkless.id);
      return r.status === 'failed' ? r : null;
    });
    assert.equal(failed.failure_code, 'bot.import_failed:bot.recording_unavailable');
    assert.equal(failed.meeting_id, null);
    const meetingsAfter = await h.app.database.db
      .selectFrom('meetings')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(meetingsAfter.n, meetingsBefore.n, 'no meeting was made for either');
  });

  void it('R7: stopping a recording whose bot is in the call takes the bot out of the call and keeps what it recorded; a cancel that races the bot joining takes it out instead of failing', async () => {
    const live = await scheduledRecording();
    fake.pushStatus(live.botId, 'in_call_recording');
    await send(live.botId, 'in_call_recording');
    const stopped = await h.request('POST', `/v1/bot-recordings/${live.id}/stop`);
    assert.equal(stopped.status, 202, stopped.text);
    assert.equal(stopped.json.leaving, true);
    assert.equal(stopped.json.status, 'recording', 'it keeps recording until the bot is out');
    await waitFor('the bot to leave the call', async () => {
      return fake.bot(live.botId)?.statusChanges.at(-1)?.code === 'call_ended';
    });
    fake.setRecording(live.botId, speechWav(SPEECH));
    await send(live.botId, 'done');
    const imported = await waitFor('what was recorded to be imported', async () => {
      const r = await statusOf(live.id);
      return r.meeting_id ? r : null;
    });
    assert.notEqual(imported.status, 'canceled');

    // Our row still says scheduled, but the provider has already sent the bot in: the delete is
    // refused (405) and the bot is taken out of the call instead.
    const racing = await scheduledRecording();
    fake.pushStatus(racing.botId, 'joining_call');
    const leavesBefore = fake.calls.leave_call;
    const canceled = await h.request('POST', `/v1/bot-recordings/${racing.id}/cancel`);
    assert.equal(canceled.status, 202, canceled.text);
    await waitFor('the racing bot to be taken out of the call', async () => {
      return fake.bot(racing.botId)?.statusChanges.at(-1)?.code === 'call_ended';
    });
    assert.ok(fake.calls.leave_call > leavesBefore);
    // What the bot recorded before it was taken out is not dropped: the recording is reopened and
    // its `done` imports it.
    await waitFor('the canceled recording to be reopened', async () => {
      return (await statusOf(racing.id)).status === 'joining';
    });
    fake.setRecording(racing.botId, speechWav(SPEECH));
    assert.equal((await send(racing.botId, 'done')).outcome, 'applied');
    await waitFor("the racing bot's recording to be imported", async () => {
      return (await statusOf(racing.id)).meeting_id !== null;
    });

    const over = await h.request('POST', `/v1/bot-recordings/${racing.id}/stop`);
    assert.equal(over.status, 409);
    assert.equal(over.json.error.code, 'recording.not_running');
  });

  void it('R3/X1: a create the provider refuses outright fails the recording with its reason; out of credit keeps it pending, retried, with the reason shown and counted', async () => {
    const refused = await pendingRecording(50);
    fake.failNext('create', { status: 400, body: { meeting_url: ['Invalid meeting URL.'] } });
    assert.equal(await scheduleRecording(deps, refused), null);
    const failed = await statusOf(refused);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.failure_code, 'bot.create_refused');
    assert.match(failed.failure_message ?? '', /HTTP 400/);

    const broke = await pendingRecording(55);
    fake.failNext('create', { status: 402, body: { detail: 'Insufficient credits.' } });
    await assert.rejects(scheduleRecording(deps, broke), { code: 'bot.quota_exhausted' });
    const waiting = await h.request('GET', `/v1/bot-recordings/${broke}`);
    assert.equal(waiting.json.status, 'pending');
    assert.match(waiting.json.lastError, /^bot\.quota_exhausted: .*HTTP 402/);
    const metrics = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
    assert.match(metrics.body, /^verbatim_bot_recordings_erroring [1-9]/m);
    // Credit is back: the next attempt schedules it and clears the reason.
    assert.ok(await scheduleRecording(deps, broke));
    const scheduled = await h.request('GET', `/v1/bot-recordings/${broke}`);
    assert.equal(scheduled.json.status, 'scheduled');
    assert.equal(scheduled.json.lastError, null);
  });

  void it('R7/X1: a recording whose meeting is deleted ends canceled with that reason; a bot the provider no longer knows fails the recording once its meeting is over', async () => {
    const { id, botId } = await scheduledRecording();
    fake.setRecording(botId, speechWav(SPEECH));
    await send(botId, 'in_call_recording');
    await send(botId, 'done');
    const imported = await waitFor('the import', async () => {
      const r = await statusOf(id);
      return r.meeting_id ? r : null;
    });
    const deleted = await h.request('DELETE', `/v1/meetings/${imported.meeting_id}`);
    assert.ok(deleted.status < 300, deleted.text);
    const after = await statusOf(id);
    assert.equal(after.status, 'canceled');
    assert.equal(after.failure_code, 'meeting.deleted');
    assert.equal(after.meeting_id, null);

    // A scheduled bot deleted at the provider behind our back, its meeting long over.
    const gone = await scheduledRecording();
    await h.app.database.db
      .updateTable('bot_recordings')
      .set({ ends_at: new Date(Date.now() - 60 * MINUTE), join_at: new Date(Date.now() - 90 * MINUTE) })
      .where('id', '=', gone.id)
      .execute();
    fake.removeBot(gone.botId);
    await backfillEndedBots(h.app.deps, h.app.deps.bots!, h.workspaceId);
    const vanished = await statusOf(gone.id);
    assert.equal(vanished.status, 'failed');
    assert.equal(vanished.failure_code, 'bot.vanished');
  });

  void it('R8: a webhook secret too short to sign anything is refused at start-up', () => {
    assert.throws(() => loadConfig({ VERBATIM_RECALL_WEBHOOK_SECRETS: 'whsec_' }), ConfigError);
    assert.throws(() => loadConfig({ VERBATIM_RECALL_WEBHOOK_SECRETS: `${secret},whsec_AAAA` }), ConfigError);
    assert.equal(loadConfig({ VERBATIM_RECALL_WEBHOOK_SECRETS: secret }).recall.webhookSecrets.length, 1);
  });

  void it('R2/R4/R5: budgets, trust window and lookback are settings; a trust window the provider would outlive is refused', () => {
    const defaults = loadConfig({});
    assert.deepEqual(defaults.recall.limits, {
      'bot.create': 60,
      'bot.list': 60,
      'bot.retrieve': 300,
      'bot.delete': 300,
      'bot.leave_call': 300,
    });
    assert.equal(defaults.recall.rateWindowMs, MINUTE);
    assert.equal(defaults.bots.trustWindowMs, 55 * MINUTE);
    assert.equal(defaults.bots.lookbackMs, 7 * 24 * 60 * MINUTE);
    assert.equal(defaults.bots.backstopMs, BACKSTOP_PERIOD_MS);
    const set = loadConfig({
      VERBATIM_RECALL_LIMITS: 'bot.create=10,bot.list=5,bot.retrieve=100,bot.delete=100,bot.leave_call=9',
      VERBATIM_BOT_TRUST_WINDOW_SECONDS: '600',
      VERBATIM_BOT_LOOKBACK_HOURS: '24',
    });
    assert.equal(set.recall.limits['bot.list'], 5);
    assert.equal(set.bots.trustWindowMs, 10 * MINUTE);
    assert.equal(set.bots.lookbackMs, 24 * 60 * MINUTE);
    assert.throws(() => loadConfig({ VERBATIM_BOT_TRUST_WINDOW_SECONDS: '3600' }), /below 3600/);
    assert.throws(() => loadConfig({ VERBATIM_RECALL_LIMITS: 'bot.create=60' }), /lacks bot.list/);
    assert.throws(
      () =>
        loadConfig({
          VERBATIM_RECALL_LIMITS: 'bot.create=0,bot.list=1,bot.retrieve=1,bot.delete=1,bot.leave_call=1',
        }),
      /endpoint=calls/,
    );
  });

  void it('R7: canceling a recording whose create answer was lost finds the bot the provider made and deletes it', async () => {
    const id = await pendingRecording(40);
    fake.failNext('create', 'drop_after_commit');
    await assert.rejects(scheduleRecording(deps, id));
    const made = fake.bots().filter((b) => b.metadata.verbatim_recording === id);
    assert.equal(made.length, 1, 'the provider made a bot we never heard of');
    const canceled = await h.request('POST', `/v1/bot-recordings/${id}/cancel`);
    assert.equal(canceled.status, 202);
    assert.equal(canceled.json.botId, null);
    await waitFor('the unknown bot to be found and deleted', async () => fake.bot(made[0]!.id) === undefined);
  });
});
