import type { Tx } from '../db/schema.ts';
import { JobKind } from '../domain/status.ts';
import type { MeetingDeps } from './deps.ts';
import { createJob } from '../jobs/catalog.ts';

/** Creates the transcription job of one window, in the caller's transaction (J1). */
export async function createTranscribeJob(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  windowId: string,
  windowIndex: number,
  actor: string,
): Promise<void> {
  await createJob(
    deps,
    trx,
    JobKind.transcribeWindow,
    { meetingId, windowId, windowIndex },
    { workspaceId },
    actor,
  );
}
