/**
 * (g) Bot recovery cost: provider calls per endpoint for one recovery run over stuck
 * recordings spread across workspaces, against the fake Recall server, next to the naive design
 * (one list call per stuck row, then a create for each row the list did not find).
 *
 * The stuck rows are a third of each kind: never attempted (the create was never sent), attempted
 * inside the trust window with the answer lost (the bot exists at the provider), and attempted
 * before the trust window (half of them with a bot at the provider, half without).
 */
import { randomUUID } from 'node:crypto';
import { RecallBotProvider } from '../src/adapters/recall-bot-provider.ts';
import { RateBudget } from '../src/bots/rate-budget-store.ts';
import { recoverWorkspace, schedulingInputsHash } from '../src/bots/scheduling.ts';
import { openDatabase } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { startFakeRecall } from '../test/support/fake-recall.ts';

const MINUTE = 60_000;

interface Calls {
  create: number;
  list: number;
  delete: number;
}

export interface RecoveryCost {
  stuck: number;
  workspaces: number;
  ours: Calls;
  naive: Calls;
  botsPerRecording: { exactlyOne: number; other: number };
}

export async function botRecoveryCost(stuck: number, workspaces: number): Promise<RecoveryCost> {
  const tdb = await createTestDatabase();
  const log = createLogger('silent');
  const handle = openDatabase(tdb.url, log);
  const high = 1_000_000;
  const fake = await startFakeRecall({
    limits: { create: high, list: high, retrieve: high, delete: high },
    pageSize: 50,
  });
  try {
    const budget = new RateBudget(handle.db, { 'bot.create': high, 'bot.list': high, 'bot.delete': high });
    await budget.install();
    const provider = new RecallBotProvider({ baseUrl: fake.url, apiKey: fake.apiKey });
    const wsIds: string[] = [];
    for (let i = 0; i < workspaces; i++) {
      const id = randomUUID();
      wsIds.push(id);
      await handle.db
        .insertInto('workspaces')
        .values({ id, name: `bench-${i}` })
        .execute();
    }
    let withBotAtProvider = 0;
    for (let i = 0; i < stuck; i++) {
      const ws = wsIds[i % workspaces]!;
      const id = randomUUID();
      const joinAt = new Date(Date.now() + 120 * MINUTE);
      const row = {
        id,
        workspace_id: ws,
        meeting_url: `https://meet.example.com/${id.slice(0, 8)}`,
        join_at: joinAt,
      };
      const kind = i % 3;
      const hash = schedulingInputsHash(row);
      const attemptedAt = kind === 0 ? null : new Date(Date.now() - (kind === 1 ? 5 : 90) * MINUTE);
      await handle.db
        .insertInto('bot_recordings')
        .values({
          ...row,
          ends_at: new Date(joinAt.getTime() + 30 * MINUTE),
          status: 'pending',
          schedule_attempted_at: attemptedAt,
          idempotency_key: attemptedAt ? hash : null,
          schedule_inputs_hash: attemptedAt ? hash : null,
        })
        .execute();
      // The provider made the bot but the answer was lost: inside the window, and half outside.
      if (kind === 1 || (kind === 2 && i % 2 === 0)) {
        await provider.createBot({
          meetingUrl: row.meeting_url,
          joinAt,
          metadata: { verbatim_workspace: ws, verbatim_recording: id },
          idempotencyKey: kind === 1 ? hash : randomUUID(),
        });
        withBotAtProvider++;
      }
    }
    const before = { ...fake.calls };
    const deps = {
      db: handle.db,
      provider,
      budget,
      log,
      settings: {
        trustWindowMs: 55 * MINUTE,
        lookbackMs: 7 * 24 * 60 * MINUTE,
        maxListPages: 100,
        budgetWaitMs: 5_000,
      },
      // Production enqueues a retried delete-bot job; here a surplus bot is deleted at once.
      deleteLater: async (botId: string) => {
        await provider.deleteBot(botId);
      },
    };
    for (const ws of wsIds) await recoverWorkspace(deps, ws);
    const ours = {
      create: fake.calls.create - before.create,
      list: fake.calls.list - before.list,
      delete: fake.calls.delete - before.delete,
    };
    // Naive: a list per stuck row, and a create for each row whose bot the list did not find.
    const naive = { create: stuck - withBotAtProvider, list: stuck, delete: 0 };
    const per = new Map<string, number>();
    for (const b of fake.bots()) {
      const r = b.metadata.verbatim_recording;
      if (r) per.set(r, (per.get(r) ?? 0) + 1);
    }
    const counts = [...per.values()];
    return {
      stuck,
      workspaces,
      ours,
      naive,
      botsPerRecording: {
        exactlyOne: counts.filter((c) => c === 1).length,
        other: counts.filter((c) => c !== 1).length,
      },
    };
  } finally {
    await fake.close();
    await handle.close();
    await tdb.drop();
  }
}
