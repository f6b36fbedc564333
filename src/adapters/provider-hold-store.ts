import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { ProviderHolds, type RetryAfterHolds } from './provider-http.ts';

/**
 * V6: a speech or chat provider's Retry-After, shared by every api, worker and isolated runner of
 * the installation (its rate limit is the account's, not a process's). A 429 holds the endpoint in
 * the database, in the database's clock, so that a window retried on another worker is not sent
 * before the wait the first one was given ran out. This process also keeps what it heard itself:
 * with the database out of reach, its own holds still apply and a request is never refused for
 * the want of a hold it cannot read.
 */
export class SharedProviderHolds implements RetryAfterHolds {
  private readonly heardHere = new ProviderHolds();

  constructor(private readonly db: Db) {}

  async heldForMs(endpoint: string): Promise<number> {
    const here = await this.heardHere.heldForMs(endpoint);
    if (here > 0) return here;
    try {
      const { rows } = await sql<{ left_ms: number }>`
        select greatest(0, extract(epoch from held_until - clock_timestamp()) * 1000)::float8 as left_ms
          from provider_holds where endpoint = ${endpoint}`.execute(this.db);
      return Math.ceil(rows[0]?.left_ms ?? 0);
    } catch {
      return 0;
    }
  }

  async askedToWait(endpoint: string, seconds: number): Promise<void> {
    await this.heardHere.askedToWait(endpoint, seconds);
    if (seconds <= 0) return;
    const until = sql`clock_timestamp() + ${seconds * 1000} * interval '1 millisecond'`;
    try {
      await sql`insert into provider_holds (endpoint, held_until) values (${endpoint}, ${until})
        on conflict (endpoint) do update
          set held_until = greatest(provider_holds.held_until, excluded.held_until)`.execute(this.db);
    } catch {
      // The database is out of reach: this process keeps the hold it heard; the others learn of it
      // from the provider's own 429.
    }
  }
}
