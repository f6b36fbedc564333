// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R2: one budget per provider endpoint for the whole installation, shared by every api and worker
-- process. A call takes a slot in the sliding minute; a 429's Retry-After closes the endpoint for all.
create table provider_budgets (
  endpoint text primary key,
  per_minute integer not null check (per_minute > 0),
  blocked_until timestamptz not null default 'epoch'
);
create table provider_calls (
  id bigserial primary key,
  endpoint text not null references provider_budgets(endpoint),
  at timestamptz not null default clock_timestamp()
);
create index provider_calls_window on provider_calls (endpoint, at);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table provider_calls, provider_budgets;`.execute(db);
}
