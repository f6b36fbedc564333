// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R7: provider webhooks are applied once: the webhook id is recorded in the transaction that applies it.
create table provider_webhook_events (
  id text primary key,
  event text not null,
  bot_id text,
  outcome text not null,
  received_at timestamptz not null default now()
);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table provider_webhook_events;`.execute(db);
}
