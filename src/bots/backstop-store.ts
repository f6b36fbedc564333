import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';

/**
 * R6/R7: the bot backstop's rows: one per workspace with bots, when its recovery runs next, and
 * the lease of the worker running it (src/bots/resume.ts runs them).
 */

/** The workspace gets a backstop row if it has none (its first recording). */
export async function ensureBackstop(trx: Tx, workspaceId: string, nextRunAt: Date): Promise<void> {
  await sql`insert into bot_backstops (workspace_id, next_run_at)
    values (${workspaceId}::uuid, ${nextRunAt})
    on conflict (workspace_id) do nothing`.execute(trx);
}

/** Every backstop lease this owner holds, released (due again at once). */
export async function releaseOwnedBackstops(db: Db, owner: string): Promise<void> {
  await db
    .updateTable('bot_backstops')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('lease_owner', '=', owner)
    .execute();
}

/**
 * Up to `limit` due workspaces, oldest first, leased to `owner` for `leaseMs`; none two owners
 * share. A lease held by a worker that is gone (declared dead by the J18 death watch, or stopped)
 * is taken at once.
 */
export async function claimDueBackstops(
  db: Db,
  owner: string,
  leaseMs: number,
  limit: number,
): Promise<string[]> {
  const due = await sql<{ workspace_id: string }>`
    update bot_backstops b
       set lease_owner = ${owner}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
     where b.workspace_id in (
       select workspace_id from bot_backstops
        where next_run_at <= now()
          and (lease_expires_at is null or lease_expires_at < now()
               -- A lease whose worker is gone (the death watch found it dead, or it stopped) holds
               -- nothing: without this a killed worker held its workspaces' recovery for the whole
               -- 15-minute lease (the simulation, seed 1401 in CI).
               or exists (select 1 from workers w
                           where w.id = bot_backstops.lease_owner
                             and (w.declared_dead_at is not null or w.stopped_at is not null)))
        order by next_run_at limit ${limit} for update skip locked)
    returning b.workspace_id`.execute(db);
  return due.rows.map((r) => r.workspace_id);
}

/** The owner's leases of these workspaces released; with `next`, their next run set and this one stamped. */
export async function handBackBackstopRows(
  db: Db,
  owner: string,
  workspaceIds: string[],
  next: Date | null,
): Promise<void> {
  await db
    .updateTable('bot_backstops')
    .set({
      ...(next ? { next_run_at: next, last_run_at: new Date() } : {}),
      lease_owner: null,
      lease_expires_at: null,
    })
    .where('workspace_id', 'in', workspaceIds)
    .where('lease_owner', '=', owner)
    .execute();
}
