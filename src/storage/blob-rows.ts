import type { Selectable } from 'kysely';
import type { BlobsTable, Executor } from '../db/schema.ts';

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
