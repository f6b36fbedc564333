import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';

/**
 * R2: the bot provider's rate limits are per installation, not per process, so the budget lives in
 * Postgres. Each endpoint has a sliding window of calls (a minute, as the provider counts): a caller
 * takes a slot only if fewer than `per_minute` calls were made in the last window by anyone, under a transaction-scoped
 * advisory lock on the endpoint (so two processes never both take the last slot). A 429 from the
 * provider closes the endpoint for everyone until its Retry-After has passed.
 */
export class RateBudget {
  constructor(
    private readonly db: Db,
    private readonly limits: Record<string, number>,
    /** The period the limits count over; the provider's is a minute. */
    private readonly windowMs = 60_000,
  ) {}

  /** Makes sure every endpoint has its row with the configured limit. */
  async install(): Promise<void> {
    for (const [endpoint, perMinute] of Object.entries(this.limits)) {
      await sql`insert into provider_budgets (endpoint, per_minute) values (${endpoint}, ${perMinute})
        on conflict (endpoint) do update set per_minute = excluded.per_minute`.execute(this.db);
    }
  }

  /**
   * Takes a slot now and returns 0, or returns how many milliseconds to wait before asking again.
   * Never blocks: the caller decides whether to wait or to requeue its job.
   */
  async tryTake(endpoint: string): Promise<number> {
    return (await this.tryTakeAt(endpoint)).wait;
  }

  /**
   * As `tryTake`, with when (performance.now()) the slot's row was about to be written: the slot
   * counts from then, not from the wait for the endpoint's lock before it.
   */
  protected async tryTakeAt(endpoint: string): Promise<{ wait: number; at: number }> {
    // The provider counts a call when it arrives, a moment after we take its slot; a slot is
    // therefore held a little longer than the provider's window (a tenth, at most 2 s) so calls
    // that travel at different speeds can never crowd into one of its windows.
    const heldMs = this.windowMs + this.marginMs;
    const window = sql`(${heldMs} * interval '1 millisecond')`;
    return this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext('verbatim-provider-budget'), hashtext(${endpoint}))`.execute(
        trx,
      );
      const row = await sql<{
        per_minute: number;
        blocked_ms: number;
        used: number;
        oldest_ms: number | null;
      }>`
        select b.per_minute,
               greatest(0, extract(epoch from b.blocked_until - clock_timestamp()) * 1000)::float8 as blocked_ms,
               (select count(*) from provider_calls c
                 where c.endpoint = b.endpoint and c.at > clock_timestamp() - ${window})::int as used,
               (select extract(epoch from min(c.at) + ${window} - clock_timestamp()) * 1000
                  from provider_calls c
                 where c.endpoint = b.endpoint and c.at > clock_timestamp() - ${window})::float8 as oldest_ms
          from provider_budgets b where b.endpoint = ${endpoint}`.execute(trx);
      const budget = row.rows[0];
      if (!budget) throw new Error(`no rate budget for provider endpoint ${endpoint}`);
      if (budget.blocked_ms > 0) return { wait: Math.ceil(budget.blocked_ms), at: 0 };
      if (budget.used >= budget.per_minute)
        return { wait: Math.max(1, Math.ceil(budget.oldest_ms ?? 1)), at: 0 };
      const at = performance.now();
      await sql`insert into provider_calls (endpoint) values (${endpoint})`.execute(trx);
      // Calls older than the window are of no further use.
      await sql`delete from provider_calls where endpoint = ${endpoint}
        and at < clock_timestamp() - 2 * ${window}`.execute(trx);
      return { wait: 0, at };
    });
  }

  /** How much longer than the provider's window a slot is held (a tenth of it, at most 2 s). */
  private get marginMs(): number {
    return Math.min(2_000, this.windowMs / 10);
  }

  /** Waits (in small steps, bounded by `maxWaitMs`) for a slot; false if none came in time. */
  async take(endpoint: string, maxWaitMs: number): Promise<boolean> {
    return (await this.takeAt(endpoint, maxWaitMs)) !== null;
  }

  /**
   * As `take`, returning when (performance.now()) the slot was written, or null. Waiting for the
   * endpoint's lock (other processes taking slots) comes before and does not count: counted, it
   * would make a loaded machine throw away slot after slot in `guard`.
   */
  private async takeAt(endpoint: string, maxWaitMs: number): Promise<number | null> {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const { wait, at } = await this.tryTakeAt(endpoint);
      if (wait === 0) return at;
      if (Date.now() + wait > deadline) return null;
      await new Promise((r) => setTimeout(r, Math.min(wait, 1000)));
    }
  }

  /**
   * Runs one provider call under the budget: a slot first (false: none within `maxWaitMs`, nothing
   * called), and a 429 answer closes the endpoint for every process for its Retry-After.
   */
  async guard<T>(
    endpoint: string,
    maxWaitMs: number,
    fn: () => Promise<T>,
  ): Promise<{ ok: true; value: T } | { ok: false }> {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      const taken = await this.takeAt(endpoint, Math.max(0, deadline - Date.now()));
      if (taken === null) return { ok: false };
      // A slot is good for the margin it is held beyond the provider's window. A process paused
      // while it took one (SIGSTOP, a long GC, a starved machine) would send its call so late that
      // it lands in the provider's window with the calls of later slots: such a slot is left
      // unused and another taken. Found by the 30-minute simulation (V6: 7 creates in 2 s, limit 6).
      if (performance.now() - taken <= this.marginMs) break;
    }
    try {
      return { ok: true, value: await fn() };
    } catch (err) {
      const e = err as { code?: string; retryAfterSeconds?: number };
      if (e.code === 'bot.rate_limited') await this.block(endpoint, e.retryAfterSeconds ?? 60);
      throw err;
    }
  }

  /** A 429 with Retry-After: the endpoint is closed for every process until then. */
  async block(endpoint: string, retryAfterSeconds: number): Promise<void> {
    await sql`update provider_budgets
         set blocked_until = greatest(blocked_until, clock_timestamp() + ${retryAfterSeconds} * interval '1 second')
       where endpoint = ${endpoint}`.execute(this.db);
  }
}
