import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';
import { recordAudit } from '../jobs/audit-store.ts';
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
    // A worker declared dead by its silence (it may only have been paused) keeps its claims; if it
    // then dies for real without a heartbeat in between (SIGKILLed while stopped), its row stays
    // declared, and only its free lock can say so: such a worker is watched while it still holds
    // a claim, and its claims are released once its lock is seen free (else a stopped-then-killed
    // worker's backstop lease would leave a bot recording unrecovered for 15 minutes).
    const seen = await sql<{ id: string; free: boolean; confirmed: boolean; declared: boolean }>`
      select w.id,
             pg_try_advisory_xact_lock(${LIFE_LOCK_NAMESPACE}::int, w.lock_key) as free,
             coalesce(w.lock_free_since <= now() - ${confirmMs} * interval '1 millisecond', false) as confirmed,
             w.declared_dead_at is not null as declared
        from workers w
       where w.stopped_at is null and w.lock_key is not null
         and w.id <> ${self}
         and w.lock_taken_at > pg_postmaster_start_time()
         and (w.declared_dead_at is null
              or exists (select 1 from bot_backstops b where b.lease_owner = w.id)
              or exists (select 1 from object_cleanups o where o.lease_owner = w.id)
              or exists (select 1 from webhook_deliveries d where d.lease_owner = w.id and d.status = 'pending')
              or exists (select 1 from job_attempts a where a.owner = w.id and a.status = 'running'
                           and a.lease_expires_at > now()))
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
    const gone = free.filter((r) => r.confirmed && r.declared).map((r) => r.id);
    if (gone.length > 0) {
      await releaseClaims(trx, gone, leaseGraceMs);
      log.warn(
        { deadWorkers: gone },
        'claims of workers declared dead earlier released: their session lock is free',
      );
    }
    const dead = free.filter((r) => r.confirmed && !r.declared).map((r) => r.id);
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
  // Only for a death that is known (a free life lock: leaseGraceMs given), not for a worker that is
  // merely silent and may be paused mid-run: its claims keep their own leases.
  if (leaseGraceMs !== null)
    await releaseClaims(
      trx,
      dead.map((w) => w.id),
      leaseGraceMs,
    );
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

/**
 * The claims of workers known to be gone: their running attempts' leases end now (the next reclaim
 * takes them), and the object deletions, webhook deliveries and bot backstop runs they had claimed
 * go to the next pass at once, not after their own leases (a minute; twice the webhook timeout; 15
 * minutes): a deletion is fenced and idempotent, a delivery sent again carries the same webhook-id,
 * and a backstop run is a recovery that may be run again (else a killed worker's backstop lease
 * would leave lost bot webhooks unrecovered for 15 minutes).
 */
async function releaseClaims(trx: Tx, ids: string[], leaseGraceMs: number): Promise<void> {
  await trx
    .updateTable('job_attempts')
    .set({ lease_expires_at: sql<Date>`now() - ${leaseGraceMs + 1} * interval '1 millisecond'` })
    .where('owner', 'in', ids)
    .where('status', '=', 'running')
    .execute();
  await trx
    .updateTable('object_cleanups')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('lease_owner', 'in', ids)
    .execute();
  await trx
    .updateTable('webhook_deliveries')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('lease_owner', 'in', ids)
    .where('status', '=', 'pending')
    .execute();
  await trx
    .updateTable('bot_backstops')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('lease_owner', 'in', ids)
    .execute();
}
