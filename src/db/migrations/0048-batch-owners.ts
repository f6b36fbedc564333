// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U4): an upload batch has an owner, the person who made it; they (or an admin) may
// cancel it, as they manage their own meetings. None for a service account's batch.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table batches add column owner_user_id uuid references users(id) on delete set null`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table batches drop column owner_user_id`.execute(db);
}
