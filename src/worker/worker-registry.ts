import os from 'node:os';
import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import type { Logger } from '../log.ts';
import { declareDead } from './death-watch.ts';

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
