import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';

/** P2: which of `names` the database has not applied (kysely_migration, readable since migration 0061). */
export async function migrationsNotApplied(db: Db, names: readonly string[]): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select n.name from unnest(${[...names]}::text[]) as n(name)
      where not exists (select 1 from kysely_migration k where k.name = n.name)`.execute(db);
  return rows.map((r) => r.name);
}

/** P2: the server's version, as shown and as a number (150004 for 15.4). */
export async function serverVersion(db: Db): Promise<{ text: string; num: number }> {
  const { rows } = await sql<{ v: string; n: string }>`select current_setting('server_version') as v,
    current_setting('server_version_num') as n`.execute(db);
  return { text: rows[0]!.v, num: Number(rows[0]!.n) };
}

/** P2: the database's clock now, in ms since the epoch (clock_timestamp, not the transaction's start). */
export async function databaseClockMs(db: Db): Promise<number> {
  const { rows } = await sql<{
    ms: string;
  }>`select extract(epoch from clock_timestamp()) * 1000 as ms`.execute(db);
  return Number(rows[0]!.ms);
}
