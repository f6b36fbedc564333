// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F7). An optional cap on the audio hours a workspace has transcribed each month (UTC),
// set by an operator (`verbatim workspaces hours-cap`); past it, new meetings and uploads are refused
// until the month turns, and what is already being recorded or processed goes on.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workspaces add column monthly_hours_cap double precision
              check (monthly_hours_cap is null or monthly_hours_cap >= 0)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table workspaces drop column monthly_hours_cap`.execute(db);
}
