// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// J5/J19: a window's commit no longer holds its meeting's lock while the close-out gate is decided
// (the gate's facts come back from the commit statement, and the close-out starts in a transaction
// of its own when they let it). A process that dies between the two leaves a processing meeting
// with every window settled; the sweep that starts those close-outs finds processing meetings by
// this index, so it reads only them, however many meetings the install holds.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index meetings_processing on meetings (id) where status = 'processing';`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index meetings_processing;`.execute(db);
}
