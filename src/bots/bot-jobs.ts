import type { Tx } from '../db/schema.ts';
import { JobKind } from '../domain/status.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { createJob } from '../jobs/catalog.ts';

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
  await createJob(
    deps,
    trx,
    JobKind.deleteBot,
    { recordingId: target.recordingId, botId: target.botId },
    { workspaceId: target.workspaceId },
    actor,
  );
}
