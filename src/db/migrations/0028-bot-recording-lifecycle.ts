// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 17: a bot recording's statuses become a lifecycle of their own, moved only by one store
// (src/bots/bot-recording-store.ts) that audits each move. `state_times` holds when the recording
// entered each status it went through ({"scheduled": "...", "joining": "...", ...}); rows made
// before this release get the time of their last change for their present status.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table bot_recordings add column state_times jsonb not null default '{}'::jsonb;
update bot_recordings set state_times = jsonb_build_object(status, updated_at);
`.execute(db);
}
