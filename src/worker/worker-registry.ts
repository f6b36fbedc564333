import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { recordAudit } from '../jobs/audit.ts';
import type { Logger } from '../log.ts';

/**
 * Worker heartbeats in our own table. graphile-worker only frees a dead worker's locked rows after
 * 4 hours, so the sweep recognises dead workers here and force-unlocks their transport rows at once.
 */
export class WorkerRegistry {
  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  async register(workerId: string): Promise<void> {
    await this.db
      .insertInto('workers')
      .values({ id: workerId, hostname: os.hostname(), pid: process.pid })
      .execute();
  }

  async addPool(workerId: string, poolId: string): Promise<void> {
    await this.db
      .updateTable('workers')
      .set({ pool_ids: sql<string[]>`array_append(pool_ids, ${poolId}::text)` })
      .where('id', '=', workerId)
      .execute();
  }

  async heartbeat(workerId: string): Promise<void> {
    await this.db
      .updateTable('workers')
      .set({ heartbeat_at: sql<Date>`now()` })
      .where('id', '=', workerId)
      .execute();
  }

  async stopped(workerId: string): Promise<void> {
    await this.db
      .updateTable('workers')
      .set({ stopped_at: sql<Date>`now()` })
      .where('id', '=', workerId)
      .execute();
  }

  /** Declares workers silent for longer than `silenceMs` dead and unlocks their graphile-worker rows. */
  async reapDeadWorkers(silenceMs: number, actor: string): Promise<string[]> {
    // Declaring and unlocking commit together: a worker is never marked dead with its locks kept.
    return this.db.transaction().execute(async (trx) => {
      const dead = await trx
        .updateTable('workers')
        .set({ declared_dead_at: sql<Date>`now()` })
        .where('stopped_at', 'is', null)
        .where('declared_dead_at', 'is', null)
        .where(sql<boolean>`heartbeat_at < now() - ${silenceMs} * interval '1 millisecond'`)
        .returning(['id', 'pool_ids', 'pid', 'hostname'])
        .execute();
      if (dead.length === 0) return [];
      const poolIds = dead.flatMap((w) => w.pool_ids);
      if (poolIds.length > 0) {
        await sql`select graphile_worker.force_unlock_workers(${poolIds}::text[])`.execute(trx);
      }
      for (const w of dead) {
        await recordAudit(trx, {
          workspaceId: null,
          subjectType: 'worker',
          subjectId: w.id,
          from: 'alive',
          to: 'dead',
          actor,
          reason: `no heartbeat for ${silenceMs} ms; transport locks released`,
          details: { pid: w.pid, hostname: w.hostname },
        });
        this.log.warn({ deadWorker: w.id, pid: w.pid }, 'worker stopped heartbeating; declared dead');
      }
      return dead.map((w) => w.id);
    });
  }
}
