import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';

/** P2: which of `names` the database has not applied (kysely_migration, readable since migration 0061). */
export async function migrationsNotApplied(db: Db, names: readonly string[]): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select n.name from unnest(${[...names]}::text[]) as n(name)
      where not exists (select 1 from kysely_migration k where k.name = n.name)`.execute(db);
  return rows.map((r) => r.name);
}
