import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, it } from 'node:test';
import { RateBudget } from '../src/bots/rate-budget-store.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';

void describe('provider rate budgets', () => {
  let tdb: TestDatabase;
  // Three pools stand for three processes (api and workers) sharing one installation's budget.
  const processes: DatabaseHandle[] = [];
  const log = createLogger('silent');
  const limits = { 'bot.create': 20, 'bot.list': 5 };

  before(async () => {
    tdb = await createTestDatabase();
    for (let i = 0; i < 3; i++) processes.push(openDatabase(tdb.url, log, 8));
    await new RateBudget(processes[0]!.db, limits).install();
  });
  after(async () => {
    for (const p of processes) await p.close();
    await tdb?.drop();
  });

  void it('R2: one budget per endpoint, shared by every process: concurrent callers never exceed the per-minute limit', async () => {
    const budgets = processes.map((p) => new RateBudget(p.db, limits));
    const waits = await Promise.all(
      Array.from({ length: 60 }, (_, i) => budgets[i % budgets.length]!.tryTake('bot.create')),
    );
    assert.equal(waits.filter((w) => w === 0).length, 20, 'exactly the limit got a slot');
    const refused = waits.filter((w) => w > 0);
    assert.equal(refused.length, 40);
    assert.ok(
      refused.every((w) => w > 55_000 && w <= 62_000),
      'each refusal says when the oldest slot frees: the minute plus the arrival margin',
    );
    // Another endpoint has its own budget.
    assert.equal(await budgets[1]!.tryTake('bot.list'), 0);
    const calls = await processes[0]!.db
      .selectFrom('provider_calls')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('endpoint', '=', 'bot.create')
      .executeTakeFirstOrThrow();
    assert.equal(Number(calls.n), 20);
  });

  void it('R2/V6: a slot whose taking was held up past its margin (a paused process) is left unused and another taken, so the late call cannot crowd a later window (found by the simulation)', async () => {
    // A 2 s window, as in the simulation: slots are held 200 ms beyond it.
    const short = { 'bot.retrieve': 10 };
    await new RateBudget(processes[0]!.db, short, 2_000).install();
    let stalls = 1;
    class Paused extends RateBudget {
      protected override async tryTakeAt(endpoint: string): Promise<{ wait: number; at: number }> {
        const taken = await super.tryTakeAt(endpoint);
        // The process is paused just after it took the slot, longer than the margin.
        if (stalls-- > 0) await new Promise((r) => setTimeout(r, 400));
        return taken;
      }
    }
    const budget = new Paused(processes[1]!.db, short, 2_000);
    let calls = 0;
    const got = await budget.guard('bot.retrieve', 5_000, async () => ++calls);
    assert.deepEqual(got, { ok: true, value: 1 });
    assert.equal(calls, 1, 'the call was made once');
    const slots = await processes[0]!.db
      .selectFrom('provider_calls')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('endpoint', '=', 'bot.retrieve')
      .executeTakeFirstOrThrow();
    assert.equal(Number(slots.n), 2, 'the stale slot stays counted, and the call went out on a fresh one');
    // Without a pause the first slot is used.
    assert.deepEqual(await budget.guard('bot.retrieve', 5_000, async () => ++calls), { ok: true, value: 2 });
    const after = await processes[0]!.db
      .selectFrom('provider_calls')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('endpoint', '=', 'bot.retrieve')
      .executeTakeFirstOrThrow();
    assert.equal(Number(after.n), 3);
  });

  void it('R2/V6: waiting for the endpoint while other processes take slots does not count against a slot: the first slot is used (a loaded machine threw slot after slot away)', async () => {
    const short = { 'bot.delete': 10 };
    await new RateBudget(processes[0]!.db, short, 2_000).install();
    const budget = new RateBudget(processes[1]!.db, short, 2_000);
    const count = async () =>
      Number(
        (
          await processes[0]!.db
            .selectFrom('provider_calls')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('endpoint', '=', 'bot.delete')
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    // Another process holds the endpoint's lock for longer than the 200 ms margin.
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const held = processes[0]!.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext('verbatim-provider-budget'), hashtext('bot.delete'))`.execute(
        trx,
      );
      locked();
      await new Promise((r) => setTimeout(r, 600));
    });
    await isLocked;
    let calls = 0;
    const began = Date.now();
    const got = await budget.guard('bot.delete', 5_000, async () => ++calls);
    await held;
    assert.ok(Date.now() - began >= 400, 'the slot was taken after the lock was released');
    assert.deepEqual(got, { ok: true, value: 1 });
    assert.equal((await count()) - before, 1, 'one slot taken, and used');
  });

  void it('R2: a 429 Retry-After closes the endpoint for every process until it has passed', async () => {
    const [a, b] = processes.map((p) => new RateBudget(p.db, limits));
    await a!.block('bot.list', 3);
    const wait = await b!.tryTake('bot.list');
    assert.ok(wait > 2_000 && wait <= 3_000, `wait ${wait} ms`);
    assert.equal(await b!.take('bot.list', 100), false, 'no slot within a short wait');
    assert.equal((await b!.tryTake('bot.create')) > 0, true, 'bot.create is still full from the last test');
  });
});
