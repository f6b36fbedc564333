import type { Tx } from '../db/schema.ts';
import { JobKind } from '../domain/status.ts';
import type { MeetingDeps } from './deps.ts';

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
  await deps.jobs.createJob(
    trx,
    {
      workspaceId,
      kind: JobKind.transcribeWindow,
      subjectType: 'window',
      subjectId: windowId,
      meetingId,
      payload: { meetingId, windowId, windowIndex },
      maxErrors: deps.config.transcribeMaxErrors,
      maxReclaims: deps.config.maxReclaims,
    },
    actor,
  );
}
