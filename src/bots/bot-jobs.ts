import type { Tx } from '../db/schema.ts';
import { JobKind } from '../domain/status.ts';
import type { MeetingDeps } from '../meetings/deps.ts';

/**
 * A retried job deletes the bot (or, with no bot id, every bot the provider holds for the
 * recording); a bot already in its call is taken out of it instead.
 */
export async function enqueueBotDelete(
  deps: MeetingDeps,
  trx: Tx,
  target: { workspaceId: string; recordingId: string; botId: string | null },
  actor: string,
): Promise<void> {
  await deps.jobs.createJob(
    trx,
    {
      workspaceId: target.workspaceId,
      kind: JobKind.deleteBot,
      subjectType: 'bot_recording',
      subjectId: target.recordingId,
      meetingId: null,
      payload: { recordingId: target.recordingId, botId: target.botId },
      maxErrors: 20,
      maxReclaims: deps.config.maxReclaims,
      dedupeKey: `delete-bot:${target.botId ?? `recording:${target.recordingId}`}`,
    },
    actor,
  );
}
