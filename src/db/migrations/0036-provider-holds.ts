// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// V6: a speech or chat provider's Retry-After holds every process's requests to that endpoint, not
// only the one that heard it: a window retried on another worker (or in an isolated runner) used to
// be sent again before the wait it had been given ran out. One row per endpoint (origin and path,
// never credentials), its hold in the database's clock.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table provider_holds (
  endpoint text primary key,
  held_until timestamptz not null
);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table provider_holds;`.execute(db);
}
