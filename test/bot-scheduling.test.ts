import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { RecallBotProvider } from '../src/adapters/recall-bot-provider.ts';
import { RateBudget } from '../src/bots/rate-budget-store.ts';
import { nextBackstopAt, runBotBackstops } from '../src/bots/resume.ts';
import { recoverWorkspace, scheduleRecording, type BotSchedulingDeps } from '../src/bots/scheduling.ts';
import { loadConfig } from '../src/config.ts';
import type { MeetingDeps } from '../src/meetings/deps.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import { AppError, ErrorKind } from '../src/domain/errors.ts';
import { createLogger } from '../src/log.ts';
import type { BotProvider, ListBotsQuery } from '../src/ports.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';
import { startFakeRecall, type FakeRecall } from './support/fake-recall.ts';

const MINUTE = 60_000;

void describe('bot scheduling and recovery', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  let fake: FakeRecall;
  let deps: BotSchedulingDeps;
  const log = createLogger('silent');

  before(async () => {
    tdb = await createTestDatabase();
    handle = openDatabase(tdb.url, log);
    // Budgets are not what this file is about (test/rate-budget.test.ts is): room for every scenario.
    fake = await startFakeRecall({ limits: { create: 1000, list: 1000, retrieve: 1000, delete: 1000 } });
    const budget = new RateBudget(handle.db, { 'bot.create': 1000, 'bot.list': 1000, 'bot.delete': 1000 });
    await budget.install();
    deps = {
      db: handle.db,
      provider: new RecallBotProvider({ baseUrl: fake.url, apiKey: fake.apiKey, timeoutMs: 5_000 }),
      budget,
      log,
      settings: {
        trustWindowMs: 55 * MINUTE,
        lookbackMs: 7 * 24 * 60 * MINUTE,
        maxListPages: 5,
        budgetWaitMs: 5_000,
      },
      // Production enqueues a retried delete-bot job; this layer's tests delete at the fake directly.
      deleteLater: async (botId) => {
        await deps.provider.deleteBot(botId);
      },
    };
  });
  after(async () => {
    await fake?.close();
    await handle?.close();
    await tdb?.drop();
  });

  async function workspace(): Promise<string> {
    const id = randomUUID();
    await handle.db
      .insertInto('workspaces')
      .values({ id, name: `w-${id}` })
      .execute();
    return id;
  }

  async function recording(workspaceId: string, inMinutes = 60): Promise<string> {
    const id = randomUUID();
    const joinAt = new Date(Date.now() + inMinutes * MINUTE);
    await handle.db
      .insertInto('bot_recordings')
      .values({
        id,
        workspace_id: workspaceId,
        meeting_url: `https://meet.example.com/${id.slice(0, 8)}`,
        join_at: joinAt,
        ends_at: new Date(joinAt.getTime() + 30 * MINUTE),
        status: 'pending',
      })
      .execute();
    return id;
  }

  const row = (id: string) =>
    handle.db.selectFrom('bot_recordings').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const botsFor = (recordingId: string) =>
    fake.bots().filter((b) => b.metadata.verbatim_recording === recordingId);

  void it('R3/R4: a row with no bot gets one with zero list calls', async () => {
    const ws = await workspace();
    const id = await recording(ws);
    const lists = fake.calls.list;
    const report = await recoverWorkspace(deps, ws);
    assert.equal(report.scheduled, 1);
    assert.equal(fake.calls.list, lists, 'no list call for a row that never reached the provider');
    const r = await row(id);
    assert.equal(r.status, 'scheduled');
    assert.equal(botsFor(id).length, 1);
    assert.equal(r.bot_id, botsFor(id)[0]!.id);
    assert.ok(r.schedule_attempted_at && r.idempotency_key, 'the attempt marker and key were stored');
  });

  void it('R3/R4: the bot-id write-back lost after a successful create: the re-send returns the same bot, zero list calls', async () => {
    const ws = await workspace();
    const id = await recording(ws);
    fake.failNext('create', 'drop_after_commit');
    await assert.rejects(scheduleRecording(deps, id));
    assert.equal(botsFor(id).length, 1, 'the provider created the bot');
    assert.equal((await row(id)).bot_id, null, 'but we never heard of it');
    const lists = fake.calls.list;
    const report = await recoverWorkspace(deps, ws);
    assert.equal(report.resent, 1);
    assert.equal(fake.calls.list, lists);
    assert.equal(botsFor(id).length, 1, 'the stored key replayed the same bot');
    assert.equal((await row(id)).bot_id, botsFor(id)[0]!.id);
  });

  void it('R4/R9: an attempt outside the trust window: one list call, in every status and bounded to the meeting times, finds and attaches the existing bot', async () => {
    const ws = await workspace();
    const id = await recording(ws);
    fake.failNext('create', 'drop_after_commit');
    await assert.rejects(scheduleRecording(deps, id));
    // The answer was lost two hours ago: the provider no longer replays the key, so it must be asked.
    await handle.db
      .updateTable('bot_recordings')
      .set({ schedule_attempted_at: new Date(Date.now() - 120 * MINUTE) })
      .where('id', '=', id)
      .execute();
    const lists = fake.calls.list;
    const report = await recoverWorkspace(deps, ws);
    assert.equal(report.listCalls, 1);
    assert.equal(fake.calls.list - lists, 1);
    assert.equal(report.attached, 1);
    assert.equal(botsFor(id).length, 1, 'no second bot');
    assert.equal((await row(id)).bot_id, botsFor(id)[0]!.id);
    const listed = fake.requests.filter((r) => r.endpoint === 'list').at(-1)!;
    assert.doesNotMatch(listed.path, /[?&]status=/, 'a bot that already finished is found too');
    assert.match(listed.path, /join_at_after=/, 'bounded to the meetings in question');
    assert.match(listed.path, /join_at_before=/);
  });

  void it('R4: a truncated list never authorizes a creation; extra bots found for one recording are deleted', async () => {
    const ws = await workspace();
    // Far enough ahead that its bot cannot have been dispatched: a list bounded by join times is used.
    const id = await recording(ws, 90);
    fake.failNext('create', { status: 500 });
    await assert.rejects(scheduleRecording(deps, id));
    assert.equal(botsFor(id).length, 0);
    // Many of the workspace's bots at the provider: more pages than one run may read.
    for (let i = 0; i < 30; i++) {
      await deps.provider.createBot({
        meetingUrl: 'https://meet.example.com/other',
        joinAt: new Date(Date.now() + 90 * MINUTE),
        metadata: { verbatim_workspace: ws, verbatim_recording: randomUUID() },
        idempotencyKey: randomUUID(),
      });
    }
    const later = { ...deps, now: () => new Date(Date.now() + 56 * MINUTE) };
    // A row the truncated list left unsettled is then asked about by its own metadata; here that
    // answer is not to be had either (the provider fails it), so nothing may be created.
    const ownListDown: BotProvider = Object.assign(Object.create(deps.provider) as BotProvider, {
      listBots: (q?: ListBotsQuery) =>
        q?.metadata?.verbatim_recording
          ? Promise.reject(new AppError(ErrorKind.transient, 'bot.provider_unavailable', 'HTTP 503'))
          : deps.provider.listBots(q),
    });
    const listsBefore = fake.calls.list;
    const truncated = await recoverWorkspace(
      { ...later, provider: ownListDown, settings: { ...deps.settings, maxListPages: 2 } },
      ws,
    );
    assert.equal(truncated.truncated, true);
    assert.equal(fake.calls.list - listsBefore, 2, 'the two pages one run may read');
    assert.equal(truncated.failed, 1, 'the own lookup failed and says so');
    assert.equal(truncated.scheduled, 0);
    assert.equal(botsFor(id).length, 0, 'no creation on an incomplete list');

    // With the whole list readable, two bots found for one recording: one kept, the other deleted.
    const twin = await recording(ws);
    for (let i = 0; i < 2; i++) {
      await deps.provider.createBot({
        meetingUrl: 'https://meet.example.com/twin',
        joinAt: new Date(Date.now() + 60 * MINUTE),
        metadata: { verbatim_workspace: ws, verbatim_recording: twin },
        idempotencyKey: randomUUID(),
      });
    }
    await handle.db
      .updateTable('bot_recordings')
      .set({ schedule_attempted_at: new Date(), idempotency_key: 'lost', schedule_inputs_hash: 'stale' })
      .where('id', '=', twin)
      .execute();
    const whole = await recoverWorkspace({ ...later, settings: { ...deps.settings, maxListPages: 50 } }, ws);
    assert.equal(whole.truncated, false);
    assert.equal(whole.extrasDeleted, 1);
    assert.equal(botsFor(twin).length, 1, 'the extra bot was deleted at the provider');
    assert.equal((await row(twin)).bot_id, botsFor(twin)[0]!.id, 'and the one left is attached');
    assert.equal(whole.scheduled, 1, 'the row the provider never saw is scheduled once the list is whole');
    assert.equal(botsFor(id).length, 1);
  });

  void it('R5: an ended meeting with no attempt is bot.never_scheduled; an unresolved attempt past the lookback is bot.schedule_outcome_unknown', async () => {
    const ws = await workspace();
    const ended = await recording(ws, -120);
    const unknown = await recording(ws);
    fake.failNext('create', { status: 500 });
    await assert.rejects(scheduleRecording(deps, unknown));
    const report = await recoverWorkspace(
      { ...deps, now: () => new Date(Date.now() + 8 * 24 * 60 * MINUTE) },
      ws,
    );
    assert.equal(report.gaveUp, 2);
    assert.equal((await row(ended)).failure_code, 'bot.never_scheduled');
    assert.equal((await row(unknown)).failure_code, 'bot.schedule_outcome_unknown');
    assert.equal((await row(unknown)).status, 'failed');
  });

  void it('R3/R4: twin bots — concurrent event and cron runs with lost create responses leave exactly one bot per recording', async () => {
    const ws = await workspace();
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push(await recording(ws));
    fake.failNext('create', 'drop_after_commit', 3);
    const runs = [
      ...ids.map((id) => scheduleRecording(deps, id)),
      recoverWorkspace(deps, ws),
      recoverWorkspace(deps, ws),
    ];
    await Promise.allSettled(runs);
    for (let round = 0; round < 5; round++) {
      const pending = await handle.db
        .selectFrom('bot_recordings')
        .select('id')
        .where('workspace_id', '=', ws)
        .where('bot_id', 'is', null)
        .execute();
      if (pending.length === 0) break;
      await recoverWorkspace(deps, ws).catch(() => undefined);
    }
    for (const id of ids) {
      assert.equal(botsFor(id).length, 1, `recording ${id} has exactly one bot`);
      assert.equal((await row(id)).bot_id, botsFor(id)[0]!.id);
    }
  });

  void it('R5/V3: a backstop lease its live owner lost track of (hand-back or claim answer lost in an outage) is taken back on its next sweep, not held 15 minutes (found by the simulation)', async () => {
    const ws = await workspace();
    await recording(ws, 30);
    // The state a worker is left in when its hand-back could not be written: the workspace is due,
    // and leased to it for the whole lease, while it lives on and sweeps again.
    await handle.db
      .insertInto('bot_backstops')
      .values({
        workspace_id: ws,
        next_run_at: new Date(Date.now() - 1_000),
        lease_owner: 'survivor',
        lease_expires_at: new Date(Date.now() + 15 * 60_000),
      })
      .execute();
    const config = loadConfig({ DATABASE_URL: tdb.url, VERBATIM_RECALL_API_KEY: 'k' });
    const meetingDeps = { db: handle.db, log, config } as unknown as MeetingDeps;
    const bots = { provider: deps.provider, budget: deps.budget };
    // Another worker must not take a lease that may still be running.
    assert.equal(
      await runBotBackstops(meetingDeps, bots, 'other'),
      0,
      'a live lease of another owner is kept',
    );
    // Its own owner, on its next sweep, knows no run of its own holds it: the workspace runs now.
    assert.equal(await runBotBackstops(meetingDeps, bots, 'survivor'), 1, 'the orphaned lease is run again');
    const after = await handle.db
      .selectFrom('bot_backstops')
      .selectAll()
      .where('workspace_id', '=', ws)
      .executeTakeFirstOrThrow();
    assert.equal(after.lease_owner, null, 'and handed back');
    assert.ok(after.next_run_at.getTime() > Date.now(), 'its next run is in the future');
  });

  void it('R5/V3: a backstop lease held by a worker that is gone (declared dead by the death watch) is taken by another worker at once, not held 15 minutes (found by the simulation, seed 1401)', async () => {
    const ws = await workspace();
    await recording(ws, 30);
    for (const [id, dead] of [
      ['killed-worker', true],
      ['live-worker', false],
    ] as const)
      await handle.db
        .insertInto('workers')
        .values({
          id,
          hostname: 'test',
          pid: 1,
          ...(dead ? { declared_dead_at: new Date() } : {}),
        })
        .execute();
    await handle.db
      .insertInto('bot_backstops')
      .values({
        workspace_id: ws,
        next_run_at: new Date(Date.now() - 1_000),
        lease_owner: 'live-worker',
        lease_expires_at: new Date(Date.now() + 15 * 60_000),
      })
      .execute();
    const config = loadConfig({ DATABASE_URL: tdb.url, VERBATIM_RECALL_API_KEY: 'k' });
    const meetingDeps = { db: handle.db, log, config } as unknown as MeetingDeps;
    const bots = { provider: deps.provider, budget: deps.budget };
    assert.equal(await runBotBackstops(meetingDeps, bots, 'other'), 0, 'a live worker’s lease is kept');
    await handle.db
      .updateTable('bot_backstops')
      .set({ lease_owner: 'killed-worker' })
      .where('workspace_id', '=', ws)
      .execute();
    assert.equal(await runBotBackstops(meetingDeps, bots, 'other'), 1, 'a dead worker’s lease is taken');
    const after = await handle.db
      .selectFrom('bot_backstops')
      .selectAll()
      .where('workspace_id', '=', ws)
      .executeTakeFirstOrThrow();
    assert.equal(after.lease_owner, null, 'and handed back after the run');
  });

  void it('R5/V3: a backstop run cut short comes back within 30 s, not a whole period later, and hands its lease back (found by the simulation)', async () => {
    const ws = await workspace();
    await recording(ws, 30);
    await handle.db
      .insertInto('bot_backstops')
      .values({ workspace_id: ws, next_run_at: new Date(Date.now() - 1_000) })
      .execute();
    const config = loadConfig({ DATABASE_URL: tdb.url, VERBATIM_RECALL_API_KEY: 'k' });
    // The run is cut short by a lost connection: its first read fails; the rest of the database works.
    const cut = new Proxy(handle.db, {
      get(target, prop) {
        if (prop === 'selectFrom')
          return () => {
            throw new Error('Connection terminated unexpectedly');
          };
        const value: unknown = Reflect.get(target, prop);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const meetingDeps = { db: handle.db, log, config } as unknown as MeetingDeps;
    const dry = { provider: deps.provider, budget: deps.budget };
    const before = Date.now();
    assert.equal(await runBotBackstops({ ...meetingDeps, db: cut }, dry, 'cut-short'), 1);
    const after = await handle.db
      .selectFrom('bot_backstops')
      .selectAll()
      .where('workspace_id', '=', ws)
      .executeTakeFirstOrThrow();
    assert.equal(after.lease_owner, null, 'its lease is handed back');
    const wait = after.next_run_at.getTime() - before;
    assert.ok(wait > 0 && wait <= 31_000, `next run in ${wait} ms, not a period (15 min) later`);
    // A run that succeeds is next due a whole period later, at the workspace's offset.
    await handle.db
      .updateTable('bot_backstops')
      .set({ next_run_at: new Date(Date.now() - 1_000) })
      .where('workspace_id', '=', ws)
      .execute();
    const started = new Date();
    assert.equal(
      await runBotBackstops(meetingDeps, { provider: deps.provider, budget: deps.budget }, 'whole'),
      1,
    );
    const ended = new Date();
    const next = await handle.db
      .selectFrom('bot_backstops')
      .select('next_run_at')
      .where('workspace_id', '=', ws)
      .executeTakeFirstOrThrow();
    // The workspace's own slot in the period (which may be any time in the next 15 minutes, so
    // "more than a minute away" was a 1-in-15 flake), not the 30 s of a run cut short.
    const slots = [
      nextBackstopAt(ws, started, config.bots.backstopMs),
      nextBackstopAt(ws, ended, config.bots.backstopMs),
    ];
    assert.ok(
      slots.some((slot) => slot.getTime() === next.next_run_at.getTime()),
      `next run ${next.next_run_at.toISOString()} is the workspace's slot (${slots.map((d) => d.toISOString()).join(' or ')})`,
    );
  });
});
