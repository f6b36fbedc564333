import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';
import { recordAudit } from '../jobs/audit.ts';
import type { Logger } from '../log.ts';
import { LIFE_LOCK_NAMESPACE } from './life-lock.ts';

export interface DeadWorker {
  id: string;
  pid: number;
  hostname: string;
}

/**
 * J18: finds workers whose life lock is free while their row says they run: their process is gone
 * (Postgres released the lock when its socket closed). A free lock counts only when
 * - it was taken since the database last started (a restart frees every lock at once; until a
 *   worker takes its lock again, only its lease and heartbeat speak for it), and
 * - it was already seen free at least `confirmMs` ago (a terminated backend frees the lock of a
 *   live worker for the moment it takes to connect again).
 * A dead worker is declared so, its transport locks are released and its running attempts' leases
 * end now, all in one transaction; the caller then reclaims them at once.
 */
export async function declareWorkersWithFreeLocks(
  db: Db,
  self: string,
  confirmMs: number,
  leaseGraceMs: number,
  actor: string,
  log: Logger,
): Promise<DeadWorker[]> {
  return db.transaction().execute(async (trx) => {
    // skip locked: two watchers never hold up each other on the same row. The try-lock is taken
    // for this transaction only: on a free lock it succeeds and is released at commit.
    const seen = await sql<{ id: string; free: boolean; confirmed: boolean }>`
      select w.id,
             pg_try_advisory_xact_lock(${LIFE_LOCK_NAMESPACE}::int, w.lock_key) as free,
             coalesce(w.lock_free_since <= now() - ${confirmMs} * interval '1 millisecond', false) as confirmed
        from workers w
       where w.stopped_at is null and w.declared_dead_at is null and w.lock_key is not null
         and w.id <> ${self}
         and w.lock_taken_at > pg_postmaster_start_time()
       for update skip locked`.execute(trx);
    const held = seen.rows.filter((r) => !r.free).map((r) => r.id);
    const free = seen.rows.filter((r) => r.free);
    if (held.length > 0)
      await trx
        .updateTable('workers')
        .set({ lock_free_since: null })
        .where('id', 'in', held)
        .where('lock_free_since', 'is not', null)
        .execute();
    const firstSeen = free.filter((r) => !r.confirmed).map((r) => r.id);
    if (firstSeen.length > 0)
      await trx
        .updateTable('workers')
        .set({ lock_free_since: sql<Date>`now()` })
        .where('id', 'in', firstSeen)
        .where('lock_free_since', 'is', null)
        .execute();
    const dead = free.filter((r) => r.confirmed).map((r) => r.id);
    if (dead.length === 0) return [];
    return declareDead(
      trx,
      dead,
      leaseGraceMs,
      actor,
      log,
      'its session lock was released: the process is gone',
    );
  });
}

/**
 * Declares workers dead in `trx`: their graphile-worker locks are released and (when
 * `leaseGraceMs` is given) the leases of their running attempts end now, so the next reclaim
 * returns those jobs to the queue.
 */
export async function declareDead(
  trx: Tx,
  ids: string[],
  leaseGraceMs: number | null,
  actor: string,
  log: Logger,
  reason: string,
): Promise<DeadWorker[]> {
  const dead = await trx
    .updateTable('workers')
    .set({ declared_dead_at: sql<Date>`now()` })
    .where('id', 'in', ids)
    .where('declared_dead_at', 'is', null)
    .returning(['id', 'pool_ids', 'pid', 'hostname'])
    .execute();
  if (dead.length === 0) return [];
  const poolIds = dead.flatMap((w) => w.pool_ids);
  if (poolIds.length > 0)
    await sql`select graphile_worker.force_unlock_workers(${poolIds}::text[])`.execute(trx);
  if (leaseGraceMs !== null)
    await trx
      .updateTable('job_attempts')
      .set({ lease_expires_at: sql<Date>`now() - ${leaseGraceMs + 1} * interval '1 millisecond'` })
      .where(
        'owner',
        'in',
        dead.map((w) => w.id),
      )
      .where('status', '=', 'running')
      .execute();
  // Object deletions, webhook deliveries and bot backstop runs it had claimed go to the next pass
  // at once, not after their own leases (a minute; twice the webhook timeout; 15 minutes): a
  // deletion is fenced and idempotent, a delivery sent again carries the same webhook-id, and a
  // backstop run is a recovery that may be run again (found by the simulation: a killed worker's
  // backstop lease left lost bot webhooks unrecovered for 15 minutes).
  const deadIds = dead.map((w) => w.id);
  // Only for a death that is known (a free life lock: leaseGraceMs given), not for a worker that is
  // merely silent and may be paused mid-run: its claims keep their own leases.
  if (leaseGraceMs !== null) {
    await trx
      .updateTable('object_cleanups')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('lease_owner', 'in', deadIds)
      .execute();
    await trx
      .updateTable('webhook_deliveries')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('lease_owner', 'in', deadIds)
      .where('status', '=', 'pending')
      .execute();
    await trx
      .updateTable('bot_backstops')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('lease_owner', 'in', deadIds)
      .execute();
  }
  for (const w of dead) {
    await recordAudit(trx, {
      workspaceId: null,
      subjectType: 'worker',
      subjectId: w.id,
      from: 'alive',
      to: 'dead',
      actor,
      reason: `${reason}; transport locks, claimed deletions, deliveries and backstop runs released`,
      details: { pid: w.pid, hostname: w.hostname },
    });
    log.warn({ deadWorker: w.id, pid: w.pid }, `worker declared dead: ${reason}`);
  }
  return dead.map(({ id, pid, hostname }) => ({ id, pid, hostname }));
}
