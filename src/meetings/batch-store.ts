import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Executor, Tx } from '../db/schema.ts';
import { isUuid } from '../domain/ids.ts';

/** J14: upload batches, which group meetings so they can be canceled together. */

export async function insertBatch(db: Db, workspaceId: string, title: string, ownerUserId: string | null) {
  return db
    .insertInto('batches')
    .values({ id: randomUUID(), workspace_id: workspaceId, title, owner_user_id: ownerUserId })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** U4: who made a batch (null: a service account's); undefined: no such batch here. */
export async function batchOwnerOf(db: Executor, workspaceId: string, batchId: string) {
  if (!isUuid(batchId)) return undefined;
  const row = await findBatch(db, workspaceId, batchId);
  return row ? row.owner_user_id : undefined;
}

export async function findBatch(db: Executor, workspaceId: string, batchId: string) {
  return db
    .selectFrom('batches')
    .selectAll()
    .where('id', '=', batchId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

/** The batch's meetings as its page lists them, oldest first. */
export async function meetingsOfBatch(db: Executor, batchId: string) {
  return db
    .selectFrom('meetings')
    .select(['id', 'title', 'status', 'failure_code'])
    .where('batch_id', '=', batchId)
    .orderBy('created_at')
    .execute();
}

/** The batch row locked: a meeting being created in it waits, then sees it canceled. */
export async function lockBatch(trx: Tx, batchId: string): Promise<void> {
  await trx.selectFrom('batches').select('id').where('id', '=', batchId).forUpdate().execute();
}

/** The ids of the batch's meetings, in id order (the order their locks are taken in). */
export async function meetingIdsOfBatch(trx: Tx, batchId: string): Promise<string[]> {
  const rows = await trx
    .selectFrom('meetings')
    .select('id')
    .where('batch_id', '=', batchId)
    .orderBy('id')
    .execute();
  return rows.map((m) => m.id);
}

export async function markBatchCanceled(trx: Tx, batchId: string): Promise<void> {
  await trx
    .updateTable('batches')
    .set({ canceled_at: sql<Date>`coalesce(canceled_at, now())` })
    .where('id', '=', batchId)
    .execute();
}
