// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// J18: each worker holds a session-level advisory lock for its life (src/worker/life-lock.ts). Its
// row records the lock's key and when it was last taken; a free lock is a death only when it was
// taken since the database last started (a restart frees every lock) and has been seen free twice.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table workers add column lock_key integer,
                    add column lock_taken_at timestamptz,
                    add column lock_free_since timestamptz;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table workers drop column lock_key, drop column lock_taken_at, drop column lock_free_since;
`.execute(db);
}
