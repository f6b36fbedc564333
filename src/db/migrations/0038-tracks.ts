// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 35 (L25): a live meeting's second track (a browser tab's or the screen's audio beside the
// microphone) is a live meeting of its own under its parent: its own timeline, windows, drafts,
// late-audio repair and close-out, under every rule a live meeting has. The parent's own timeline
// is the first track ("mic"); `track` names the others and `track_offset_ms` says where the
// track's sample 0 falls on the parent's timeline. A track goes with its parent.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings
  add column parent_id uuid references meetings(id) on delete cascade,
  add column track text,
  add column track_offset_ms integer,
  add constraint meetings_track_shape check (
    (parent_id is null and track is null and track_offset_ms is null)
    or (parent_id is not null and track is not null and track_offset_ms is not null and track_offset_ms >= 0)
  );
create unique index meetings_parent_track on meetings (parent_id, track) where parent_id is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index meetings_parent_track;
alter table meetings drop constraint meetings_track_shape,
  drop column track_offset_ms, drop column track, drop column parent_id;
`.execute(db);
}
