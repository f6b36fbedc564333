// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 37 (E4). A workspace may keep its meetings' audio for playback for a number of days after a
// meeting is transcribed (0, the default: the audio is deleted at completion, as before). A
// meeting kept so says until when; the audio sweep hands its audio to cleanup once that has
// passed (src/meetings/audio-lifecycle.ts), audited.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table workspaces add column playback_days integer not null default 0
  check (playback_days between 0 and 365);
alter table meetings add column playback_until timestamptz;
create index meetings_playback_until on meetings (playback_until) where playback_until is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index meetings_playback_until;
alter table meetings drop column playback_until;
alter table workspaces drop column playback_days;
`.execute(db);
}
