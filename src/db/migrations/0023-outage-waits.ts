// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 14: a job counts the outside outages it waited out apart from its other waits. The bound on
// outage waits (a job that kills its own connection must still end) was read from the count of
// every wait, so a close-out that had polled for its windows thirty times spent its retries on the
// next lost connection (L7: waiting and outages never spend them).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table jobs add column outage_waits integer not null default 0;`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table jobs drop column outage_waits;`.execute(db);
}
