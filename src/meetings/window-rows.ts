import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { WindowStatus } from '../domain/status.ts';
import { referenceStaged, type StagedObject } from '../storage/objects.ts';

/**
 * Records one pending window of a meeting's timeline and, when it has audio, references the staged
 * object holding its WAV (already written). Returns the window's id. A window without audio settles as missing.
 */
export async function recordWindow(
  trx: Tx,
  w: {
    workspaceId: string;
    meetingId: string;
    index: number;
    startMs: number;
    endMs: number;
    audio: StagedObject | null;
  },
): Promise<string> {
  const blobId = w.audio
    ? await referenceStaged(trx, w.audio, { kind: 'window', contentType: 'audio/wav' })
    : null;
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
