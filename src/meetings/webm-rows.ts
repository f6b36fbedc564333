import type { Executor, Tx } from '../db/schema.ts';

/**
 * The rows behind a live meeting's WebM pieces (src/meetings/live-webm.ts has the reading): what a
 * piece is read after, what reading it gave, and where the pieces' original bytes are stored.
 */

/** The chunk row before `seq`, as far as reading the next piece needs it; undefined if it has not arrived. */
export async function pieceBefore(db: Executor, meetingId: string, seq: number) {
  return db
    .selectFrom('chunks')
    .select(['samples', 'stream_state', 'undecodable'])
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq - 1)
    .executeTakeFirst();
}

/** What reading a piece gave, on its chunk row; the stream header too when the piece carried it. */
export async function recordPieceReading(
  trx: Tx,
  meetingId: string,
  seq: number,
  reading: {
    samples: number;
    pcmBlobId: string | null;
    state: string | null;
    energy: Buffer;
    afterGap: boolean;
    undecodable: boolean;
    header: Buffer | null;
  },
): Promise<void> {
  await trx
    .updateTable('chunks')
    .set({
      samples: reading.samples,
      pcm_blob_id: reading.pcmBlobId,
      stream_state: reading.state,
      energy: reading.energy,
      decoded_after_gap: reading.afterGap,
      undecodable: reading.undecodable,
    })
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .execute();
  if (reading.header) {
    await trx
      .updateTable('meetings')
      .set({ stream_header: reading.header })
      .where('id', '=', meetingId)
      .execute();
  }
}

/** The stored objects holding the original bytes of these pieces, in order, and whether each was deleted. */
export async function pieceObjects(db: Executor, meetingId: string, seqs: number[]) {
  return db
    .selectFrom('chunks')
    .innerJoin('blobs', 'blobs.id', 'chunks.blob_id')
    .select(['chunks.seq', 'blobs.object_key', 'blobs.deleted_at'])
    .where('chunks.meeting_id', '=', meetingId)
    .where('chunks.seq', 'in', seqs)
    .orderBy('chunks.seq')
    .execute();
}
