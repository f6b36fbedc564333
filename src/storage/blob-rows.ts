import { randomUUID } from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import type { BlobsTable, Executor, Tx } from '../db/schema.ts';

/**
 * Reads of the blobs table, the stored objects' references (src/storage/objects.ts writes them,
 * with the staging and deletion rules around them).
 */

/** The meeting's stored object of this kind that is not deleted (an upload's recording). */
export async function liveBlobOf(
  db: Executor,
  meetingId: string,
  kind: string,
): Promise<Selectable<BlobsTable> | undefined> {
  return db
    .selectFrom('blobs')
    .selectAll()
    .where('meeting_id', '=', meetingId)
    .where('kind', '=', kind)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
}

/**
 * B5: a stored object no longer referenced (a decoded copy replaced by a new decode) is marked
 * deleted and handed to the cleanup outbox, like any deleted audio, in the caller's transaction.
 */
export async function retireBlob(trx: Tx, blobId: string, reason: string): Promise<void> {
  const blob = await trx
    .updateTable('blobs')
    .set({ deleted_at: sql<Date>`now()` })
    .where('id', '=', blobId)
    .where('deleted_at', 'is', null)
    .returning(['workspace_id', 'meeting_id', 'object_key', 'size_bytes'])
    .executeTakeFirst();
  if (!blob) return;
  await trx
    .insertInto('object_cleanups')
    .values({
      id: randomUUID(),
      workspace_id: blob.workspace_id,
      meeting_id: blob.meeting_id,
      object_key: blob.object_key,
      bytes: blob.size_bytes,
      state: 'pending',
      reason,
    })
    .onConflict((oc) => oc.column('object_key').doNothing())
    .execute();
}
