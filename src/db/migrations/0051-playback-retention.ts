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
-- Which chunk or window an object is: the audio sweep asks it of every object an ended meeting
-- still holds (held stretches, late chunks, playback), and without these scanned the meeting's chunks.
create index chunks_blob on chunks (blob_id);
create index chunks_pcm_blob on chunks (pcm_blob_id) where pcm_blob_id is not null;
create index windows_blob on windows (blob_id) where blob_id is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index windows_blob;
drop index chunks_pcm_blob;
drop index chunks_blob;
drop index meetings_playback_until;
alter table meetings drop column playback_until;
alter table workspaces drop column playback_days;
`.execute(db);
}
