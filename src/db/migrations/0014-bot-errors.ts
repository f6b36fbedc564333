// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- X1: a recording whose bot the provider keeps refusing (out of credit, a bad key) stays pending
-- and retried; the last refusal is kept on the row so an operator sees why.
alter table bot_recordings add column last_error text;
alter table bot_recordings add column last_error_at timestamptz;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table bot_recordings drop column last_error, drop column last_error_at;`.execute(db);
}
