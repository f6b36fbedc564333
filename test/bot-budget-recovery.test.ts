import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, it } from 'node:test';
import { RecallBotProvider } from '../src/adapters/recall-bot-provider.ts';
import { loadConfig } from '../src/config.ts';
import { RateBudget } from '../src/bots/rate-budget-store.ts';
import { recoverWorkspace, schedulingInputsHash } from '../src/bots/scheduling.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';
import { startFakeRecall, type FakeRecall } from './support/fake-recall.ts';

const MINUTE = 60_000;
/** The shipped default of VERBATIM_RECALL_LIMITS: Recall's documented per-minute limits. */
const RECALL_LIMITS = loadConfig({}).recall.limits;
let tdb: TestDatabase;
let handle: DatabaseHandle;
let fake: FakeRecall;

before(async () => {
  tdb = await createTestDatabase();
  handle = openDatabase(tdb.url, createLogger('silent'));
  // The fake enforces Recall's documented limits; our budget is set to the same numbers.
  fake = await startFakeRecall();
});
after(async () => {
  await fake?.close();
  await handle?.close();
  await tdb?.drop();
});

void it('R2: recovering 500 workspaces with stuck rows (one recovery run each, called directly) stays within the shared budgets: the provider never sees a call over its limit, the rest waits for the next run', async () => {
  const budget = new RateBudget(handle.db, RECALL_LIMITS);
  await budget.install();
  const provider = new RecallBotProvider({ baseUrl: fake.url, apiKey: fake.apiKey });
  const workspaces: string[] = [];
  for (let i = 0; i < 500; i++) {
    const ws = randomUUID();
    workspaces.push(ws);
    await handle.db
      .insertInto('workspaces')
      .values({ id: ws, name: `w${i}` })
      .execute();
    const id = randomUUID();
    const row = {
      id,
      workspace_id: ws,
      meeting_url: `https://meet.example.com/${i}`,
      join_at: new Date(Date.now() + 3 * 60 * MINUTE),
    };
    // Half were never sent; half were attempted long ago, so recovery must list before creating.
    const old = i % 2 === 1;
    await handle.db
      .insertInto('bot_recordings')
      .values({
        ...row,
        ends_at: new Date(row.join_at.getTime() + 30 * MINUTE),
        status: 'pending',
        schedule_attempted_at: old ? new Date(Date.now() - 2 * 60 * MINUTE) : null,
        idempotency_key: old ? schedulingInputsHash(row) : null,
        schedule_inputs_hash: old ? schedulingInputsHash(row) : null,
      })
      .execute();
  }
  const deps = {
    db: handle.db,
    provider,
    budget,
    log: createLogger('silent'),
    // No waiting: a run that finds the budget spent stops and leaves the rest to the next run.
    settings: {
      trustWindowMs: 55 * MINUTE,
      lookbackMs: 7 * 24 * 60 * MINUTE,
      maxListPages: 5,
      budgetWaitMs: 0,
    },
    deleteLater: async (botId: string) => {
      await provider.deleteBot(botId);
    },
  };
  let deferred = 0;
  for (const ws of workspaces) deferred += (await recoverWorkspace(deps, ws)).deferred;
  assert.ok(deferred > 0, 'the budget ran out within this minute and the rest was deferred');
  assert.equal(fake.rateLimited.create, 0, 'no 429 from the provider');
  assert.equal(fake.rateLimited.list, 0);
  assert.ok(
    fake.peakPerMinute.create <= RECALL_LIMITS['bot.create']!,
    `create peak ${fake.peakPerMinute.create}`,
  );
  assert.ok(fake.peakPerMinute.list <= RECALL_LIMITS['bot.list']!, `list peak ${fake.peakPerMinute.list}`);
  assert.ok(fake.calls.create > 0 && fake.calls.create <= RECALL_LIMITS['bot.create']!);
  const scheduled = await handle.db
    .selectFrom('bot_recordings')
    .select('id')
    .where('status', '=', 'scheduled')
    .execute();
  assert.equal(scheduled.length, fake.bots().length, 'every bot made is attached to its recording');
});
