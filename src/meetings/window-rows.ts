import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { WindowStatus } from '../domain/status.ts';

export interface StoredWindowAudio {
  key: string;
  sha256: string;
  size: number;
}

/**
 * Records one pending window of a meeting's timeline and, when it has audio, the blob holding its
 * WAV (already written). Returns the window's id. A window without audio settles as missing.
 */
export async function recordWindow(
  trx: Tx,
  w: {
    workspaceId: string;
    meetingId: string;
    index: number;
    startMs: number;
    endMs: number;
    audio: StoredWindowAudio | null;
  },
): Promise<string> {
  let blobId: string | null = null;
  if (w.audio) {
    blobId = randomUUID();
    await trx
      .insertInto('blobs')
      .values({
        id: blobId,
        workspace_id: w.workspaceId,
        meeting_id: w.meetingId,
        kind: 'window',
        object_key: w.audio.key,
        sha256: w.audio.sha256,
        size_bytes: w.audio.size,
        content_type: 'audio/wav',
      })
      .execute();
  }
  const windowId = randomUUID();
  await trx
    .insertInto('windows')
    .values({
      id: windowId,
      workspace_id: w.workspaceId,
      meeting_id: w.meetingId,
      index: w.index,
      start_ms: w.startMs,
      end_ms: w.endMs,
      blob_id: blobId,
      status: WindowStatus.pending,
    })
    .execute();
  return windowId;
}
