// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 15 (L23): a meeting's stream rows are compacted (src/meetings/stream.ts, compactStreams):
// of the rows naming one window, one draft, or the meeting itself, only the last one matters to any
// client, because an event is read from the tables when it is sent. This index finds a row's later
// twin without walking the meeting's whole stream.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create index meeting_stream_subject on meeting_stream (meeting_id, kind, ref, seq) where seq is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index meeting_stream_subject;`.execute(db);
}
