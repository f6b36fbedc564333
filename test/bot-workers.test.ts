import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { schedulingInputsHash } from '../src/bots/scheduling.ts';
import { startFakeRecall, type FakeRecall } from './support/fake-recall.ts';
import { startHarness, waitFor, type Harness } from './support/harness.ts';

/**
 * Bots scheduled by real worker processes: the event path (schedule-bot jobs) and the per-workspace
 * backstop run at once, in two processes, against a fake Recall that enforces its limits. The
 * provider's one-minute rate window is compressed to two seconds here (the budget is given the same
 * window through VERBATIM_RECALL_RATE_WINDOW_SECONDS), so the budget can run dry and refill many
 * times within a test; the limits per window are Recall's own.
 */
const MINUTE = 60_000;
const RATE_WINDOW_MS = 2_000;

void describe('bots scheduled by worker processes', () => {
  let fake: FakeRecall;
  let h: Harness;

  before(async () => {
    fake = await startFakeRecall({ windowMs: RATE_WINDOW_MS });
    h = await startHarness({
      env: {
        VERBATIM_RECALL_URL: fake.url,
        VERBATIM_RECALL_API_KEY: fake.apiKey,
        VERBATIM_RECALL_RATE_WINDOW_SECONDS: String(RATE_WINDOW_MS / 1000),
        VERBATIM_BOT_BACKSTOP_SECONDS: '2',
      },
    });
    h.spawnWorker();
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await fake?.close();
  });

  const botsFor = (recordingId: string) =>
    fake.bots().filter((b) => b.metadata.verbatim_recording === recordingId);

  function assertWithinLimits(): void {
    for (const endpoint of ['create', 'list', 'retrieve', 'delete'] as const) {
      assert.equal(fake.rateLimited[endpoint], 0, `no 429 on ${endpoint}`);
      assert.ok(
        fake.peakPerMinute[endpoint] <= fake.limits[endpoint],
        `${endpoint} peak ${fake.peakPerMinute[endpoint]} ≤ ${fake.limits[endpoint]} per window`,
      );
    }
  }

  /** Waits until every workspace's backstop has run twice more, so a late twin would have been made. */
  async function twoMoreBackstopRounds(workspaces: string[]): Promise<void> {
    const since = new Date();
    for (let round = 0; round < 2; round++) {
      const mark = round === 0 ? since : new Date();
      await waitFor(
        'every workspace backstop to run again',
        async () => {
          const behind = await h.app.database.db
            .selectFrom('bot_backstops')
            .select('workspace_id')
            .where('workspace_id', 'in', workspaces)
            .where((eb) => eb.or([eb('last_run_at', 'is', null), eb('last_run_at', '<', mark)]))
            .execute();
          return behind.length === 0;
        },
        120_000,
      );
    }
  }

  void it('R3/R4/R6: twin bots — the event path and the backstop run at once in two worker processes, create answers are lost, and every recording ends with exactly one bot', async () => {
    // The first six creates are made at the provider, but their answers never reach us.
    fake.failNext('create', 'drop_after_commit', 6);
    const ids: string[] = [];
    for (let i = 0; i < 18; i++) {
      const start = Date.now() + (30 + i) * MINUTE;
      const res = await h.request('POST', '/v1/calendar-events', {
        title: `Standup ${i}`,
        start: new Date(start).toISOString(),
        end: new Date(start + 15 * MINUTE).toISOString(),
        meetingUrl: `https://acme.zoom.us/j/twin${i}${randomUUID().slice(0, 6)}`,
      });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.recording.id as string);
    }
    await waitFor(
      'every recording to have its bot',
      async () => {
        const rows = await h.app.database.db
          .selectFrom('bot_recordings')
          .select(['id', 'bot_id'])
          .where('id', 'in', ids)
          .execute();
        return rows.every((r) => r.bot_id !== null);
      },
      120_000,
    );
    // Both paths keep running over the same rows; nothing more may be made.
    await twoMoreBackstopRounds([h.workspaceId]);
    const rows = await h.app.database.db
      .selectFrom('bot_recordings')
      .select(['id', 'bot_id', 'status'])
      .where('id', 'in', ids)
      .execute();
    for (const row of rows) {
      const bots = botsFor(row.id);
      assert.equal(bots.length, 1, `recording ${row.id} has exactly one bot at the provider`);
      assert.equal(row.bot_id, bots[0]!.id, 'and it is the one the recording holds');
      assert.equal(row.status, 'scheduled');
    }
    assert.equal(fake.failuresLeft('create'), 0, 'the lost answers really happened');
    assertWithinLimits();
  });

  void it('R2/R6: 500 workspaces with stuck rows recover through the backstops of two worker processes, and the provider never sees a call over its limit', async () => {
    const db = h.app.database.db;
    const workspaces: string[] = [];
    const recordings: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 500; i++) {
      const ws = randomUUID();
      workspaces.push(ws);
      const row = {
        id: randomUUID(),
        workspace_id: ws,
        meeting_url: `https://meet.example.com/stuck-${i}`,
        join_at: new Date(Date.now() + 3 * 60 * MINUTE + i * 1000),
      };
      // Half never reached the provider; half were attempted two hours ago (outside the trust
      // window), so recovery must make its one list call before it may create.
      const old = i % 2 === 1;
      recordings.push({
        ...row,
        ends_at: new Date(row.join_at.getTime() + 30 * MINUTE),
        status: 'pending',
        schedule_attempted_at: old ? new Date(Date.now() - 2 * 60 * MINUTE) : null,
        idempotency_key: old ? schedulingInputsHash(row) : null,
        schedule_inputs_hash: old ? schedulingInputsHash(row) : null,
      });
    }
    await db
      .insertInto('workspaces')
      .values(workspaces.map((id, i) => ({ id, name: `stuck ${i}` })))
      .execute();
    await db
      .insertInto('bot_recordings')
      .values(recordings as never)
      .execute();
    // The rows were stuck: no event-path job exists for them, only each workspace's backstop.
    await db
      .insertInto('bot_backstops')
      .values(workspaces.map((workspace_id) => ({ workspace_id, next_run_at: new Date() })))
      .execute();
    const listsBefore = fake.calls.list;
    await waitFor(
      () => `every stuck row to be scheduled (bots at the provider: ${fake.bots().length})`,
      async () => {
        const left = await db
          .selectFrom('bot_recordings')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('workspace_id', 'in', workspaces)
          .where('bot_id', 'is', null)
          .executeTakeFirstOrThrow();
        return Number(left.n) === 0;
      },
      240_000,
    );
    const rows = await db
      .selectFrom('bot_recordings')
      .select(['id', 'bot_id'])
      .where('workspace_id', 'in', workspaces)
      .execute();
    assert.equal(rows.length, 500);
    for (const row of rows) {
      const bots = botsFor(row.id);
      assert.equal(bots.length, 1, `recording ${row.id} has exactly one bot`);
      assert.equal(bots[0]!.id, row.bot_id);
    }
    // One list per workspace that had an old attempt, never one per row or per run.
    assert.ok(
      fake.calls.list - listsBefore <= 250,
      `list calls ${fake.calls.list - listsBefore} for 250 old attempts`,
    );
    assertWithinLimits();
  });
});
