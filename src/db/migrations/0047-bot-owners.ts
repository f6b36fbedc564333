// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U4): a bot's meeting has an owner, the person who asked for it: the member who posted
// the calendar event, or the admin who subscribed the calendar feed it came from. The recording
// keeps its owner until its meeting is made; the feed keeps the one who added it. Deleting the
// person leaves them without one (as a meeting's owner), which only admins then manage.
//
// A recording whose meeting the reader may not read (a private meeting of someone else) is not
// listed for them either: its title and times are the meeting's. A restrictive policy for the
// tenant role reads the meeting through the meetings policies (verbatim_meeting_visible).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table calendar_feeds add column owner_user_id uuid references users(id) on delete set null;
alter table bot_recordings add column owner_user_id uuid references users(id) on delete set null;
create policy meeting_access on bot_recordings as restrictive to verbatim_tenant
  using (meeting_id is null or exists (select 1 from meetings m where m.id = bot_recordings.meeting_id));
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop policy meeting_access on bot_recordings;
alter table bot_recordings drop column owner_user_id;
alter table calendar_feeds drop column owner_user_id;
`.execute(db);
}
