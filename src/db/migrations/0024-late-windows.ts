// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 14: a window still pending when its meeting's transcript is published is marked, so that
// when it settles later the transcript gets a new revision, `meeting.transcript_revised` and new
// minutes, as a late chunk's repair does (L19). The mark is set under the meeting lock by an
// update that takes each pending window's row lock, so a window's commit either lands before it
// (and is in the published transcript) or after it (and keeps the mark, read once it committed).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table windows add column pending_at_publication boolean not null default false;
create index windows_pending_at_publication on windows (meeting_id) where pending_at_publication;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index windows_pending_at_publication;
alter table windows drop column pending_at_publication;
`.execute(db);
}
