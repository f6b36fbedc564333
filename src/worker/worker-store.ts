import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { Logger } from '../log.ts';
import { declareDead } from './death-watch-store.ts';

/**
 * Worker heartbeats in our own table. graphile-worker only frees a dead worker's locked rows after
 * 4 hours, so the sweep recognises dead workers here and force-unlocks their transport rows at once.
 */
export class WorkerRegistry {
  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  /** The row goes in before the life lock is taken; a row with no lock key is not watched. */
  async register(workerId: string): Promise<void> {
    await this.db
      .insertInto('workers')
      .values({ id: workerId, hostname: os.hostname(), pid: process.pid })
      .execute();
  }

  /**
   * Records a transport pool of this worker: without it, the pool's locks would outlive the worker's
   * death by graphile-worker's 4 hours. Tried again (for up to a minute) when the database is away.
   */
  async addPool(workerId: string, poolId: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      try {
        await this.db
          .updateTable('workers')
          .set({ pool_ids: sql<string[]>`array_append(pool_ids, ${poolId}::text)` })
          .where('id', '=', workerId)
          .where(sql<boolean>`not (${poolId}::text = any(pool_ids))`)
          .execute();
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  /**
   * Renews the worker's heartbeat. A worker declared dead while it was only paused (its heartbeat
   * went silent past a lease: SIGSTOP, a frozen VM) is alive again: its row is cleared so that its
   * real death, later, is noticed too (otherwise the transport rows it locks since would stay locked).
   */
  async heartbeat(workerId: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ was_dead: boolean }>`
        with before as (select id, declared_dead_at from workers where id = ${workerId} for update)
        update workers w set heartbeat_at = now(), declared_dead_at = null
          from before where w.id = before.id
        returning before.declared_dead_at is not null as was_dead`.execute(trx);
      if (!rows[0]?.was_dead) return;
      await recordAudit(trx, {
        workspaceId: null,
        subjectType: 'worker',
        subjectId: workerId,
        from: 'dead',
        to: 'alive',
        actor: `worker:${workerId}`,
        reason:
          'declared dead while paused; heartbeating again (its earlier work was reclaimed and stays fenced)',
      });
      this.log.warn({ workerId }, 'this worker was declared dead while paused; it is alive again');
    });
  }

  async stopped(workerId: string): Promise<void> {
    await this.db
      .updateTable('workers')
      .set({ stopped_at: sql<Date>`now()` })
      .where('id', '=', workerId)
      .execute();
  }

  /**
   * Declares workers silent for longer than `silenceMs` dead and unlocks their graphile-worker rows:
   * the backstop for a worker whose death its life lock cannot show (J18: a database restart freed
   * every lock, or a connection pooler in between). Their leases run out on their own.
   */
  async reapDeadWorkers(silenceMs: number, actor: string): Promise<string[]> {
    // Declaring and unlocking commit together: a worker is never marked dead with its locks kept.
    return this.db.transaction().execute(async (trx) => {
      const silent = await trx
        .selectFrom('workers')
        .select('id')
        .where('stopped_at', 'is', null)
        .where('declared_dead_at', 'is', null)
        .where(sql<boolean>`heartbeat_at < now() - ${silenceMs} * interval '1 millisecond'`)
        .forUpdate()
        .skipLocked()
        .execute();
      if (silent.length === 0) return [];
      const dead = await declareDead(
        trx,
        silent.map((w) => w.id),
        null,
        actor,
        this.log,
        `no heartbeat for ${silenceMs} ms`,
      );
      return dead.map((w) => w.id);
    });
  }
}
