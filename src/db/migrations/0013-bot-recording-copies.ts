// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R1: one live recording per meeting. A canceled one no longer holds its slot, so an event moved
-- back to a slot it left gets a new recording (with a new id, hence a new idempotency key and new
-- bot metadata) instead of the canceled row.
alter table bot_recordings drop constraint bot_recordings_workspace_id_meeting_url_join_at_key;
create unique index bot_recordings_meeting on bot_recordings (workspace_id, meeting_url, join_at)
  where status <> 'canceled';
-- A copy asked for through the API is a reference a calendar feed's removal must not drop.
alter table bot_recordings add column requested_by_api boolean not null default false;
-- R1: recording through meeting bots can be switched off for a workspace.
alter table workspaces add column bot_recording_enabled boolean not null default true;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table workspaces drop column bot_recording_enabled;
alter table bot_recordings drop column requested_by_api;
drop index bot_recordings_meeting;
alter table bot_recordings add unique (workspace_id, meeting_url, join_at);
`.execute(db);
}
