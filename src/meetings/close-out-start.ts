import type { MeetingRow, Tx } from '../db/schema.ts';
import { decideCloseOutStart, type CloseOutGateFacts } from '../domain/close-out-gate.ts';
import { JobKind, MeetingStatus } from '../domain/status.ts';
import { createJob } from '../jobs/catalog.ts';
import type { MeetingDeps } from './deps.ts';
import { countChunks } from './timeline-rows.ts';
import {
  closeOutGateFacts,
  processingMeetingsSettled,
  processingMeetingsWithHeldWindows,
} from './window-rows.ts';

/**
 * Every way a meeting's close-out starts, in one place:
 * - an upload's or a bot's meeting leaves `processing` when the gate lets it (decideCloseOutStart,
 *   src/domain/close-out-gate.ts): after its last window settles (the window hot path, a window's
 *   terminal failure, the split that cut no window left to do, an operator's resubmission) and from
 *   the sweep that looks past held windows;
 * - a live meeting leaves `recording` when it is ended (endMeeting), its close-out waiting out the
 *   grace for chunks still on their way, and starts early once every declared chunk is here;
 * - an operator's resubmission of a finalizing meeting gives it its close-out job again.
 * The status changes only by the meeting store's `transition`; the job comes from the catalog.
 */

export type CloseOutStart = 'not_started' | 'started';

/**
 * J5/J19/J20: a processing meeting whose windows are all settled or held moves to finalizing and
 * gets its close-out job, in the caller's transaction. `facts` are the gate's, read under the
 * meeting's lock in this transaction (the window hot path reads them in its commit statement);
 * they are read here when not given. Of two last windows committing at once, the second to take
 * the meeting's lock sees the first one settled, so the close-out is neither missed nor doubled.
 */
export async function startCloseOutIfSettled(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
  facts?: CloseOutGateFacts | null,
): Promise<CloseOutStart> {
  const read = facts === undefined ? await closeOutGateFacts(trx, meetingId) : facts;
  if (!read) return 'not_started';
  const verdict = decideCloseOutStart(read);
  if (!verdict.start) return 'not_started';
  // Already locked by the facts' read; this reads the row the transition needs.
  const meeting = await deps.meetings.lock(trx, meetingId);
  await beginCloseOut(deps, trx, meeting, actor, verdict.reason, 0);
  return 'started';
}

/**
 * The one place a meeting moves to finalizing: the status transition and its audit row, and the
 * close-out job, which runs after `delayMs`. Returns the meeting as it now is.
 */
export async function beginCloseOut(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  actor: string,
  reason: string,
  delayMs: number,
): Promise<MeetingRow> {
  const finalizing = await deps.meetings.transition(trx, meeting, 'startFinalizing', actor, reason);
  await createCloseOutJob(deps, trx, meeting, actor, delayMs);
  return finalizing;
}

/** A finalizing meeting's close-out job; nothing new when one with its dedupe key is active. */
export async function createCloseOutJob(
  deps: MeetingDeps,
  trx: Tx,
  meeting: Pick<MeetingRow, 'id' | 'workspace_id'>,
  actor: string,
  delayMs = 0,
): Promise<boolean> {
  const job = await createJob(
    deps,
    trx,
    JobKind.closeOutMeeting,
    { meetingId: meeting.id },
    { workspaceId: meeting.workspace_id, delayMs },
    actor,
  );
  return job !== null;
}

/**
 * J20: a recording whose only windows left are held (isolated, on their slow backoff) completes
 * meanwhile with the gap shown; their words are spliced in when they come (L19). The window's job
 * going on its backoff settles nothing, so this sweep step asks the close-out gate again.
 */
export async function startCloseOutsPastHeldWindows(deps: MeetingDeps, actor: string): Promise<number> {
  return startCloseOutsOf(deps, await processingMeetingsWithHeldWindows(deps.db), actor);
}

/**
 * J5: a window's commit returns its meeting's gate facts and the close-out starts in a transaction
 * of its own after it (startCloseOutAfterCommit); a process that dies between the two leaves the
 * meeting processing with every window settled. This sweep step asks the gate again for those.
 */
export async function startLostCloseOuts(deps: MeetingDeps, actor: string): Promise<number> {
  return startCloseOutsOf(deps, await processingMeetingsSettled(deps.db), actor);
}

async function startCloseOutsOf(deps: MeetingDeps, meetingIds: string[], actor: string): Promise<number> {
  let started = 0;
  for (const meetingId of meetingIds) {
    await deps.db.transaction().execute(async (trx) => {
      if ((await startCloseOutIfSettled(deps, trx, meetingId, actor)) === 'started') started++;
    });
  }
  return started;
}

/**
 * J5: after a window's commit statement (run alone, so the meeting's lock is held only for that
 * statement), the facts it read under that lock say whether this was the meeting's last window.
 * Only then is the gate asked again, under the lock, in a transaction that starts the close-out:
 * of two last windows committing at once, the second's statement waits for the first's, so at
 * least one sees every window settled, and the gate under the lock starts it exactly once. The
 * start lost to a crash between the two is the sweep's (startLostCloseOuts).
 */
export async function startCloseOutAfterCommit(
  deps: MeetingDeps,
  meetingId: string,
  actor: string,
  facts: CloseOutGateFacts | null,
): Promise<CloseOutStart> {
  if (!facts || !decideCloseOutStart(facts).start) return 'not_started';
  await deps.checkpoints.hit('transcribe-window.before-close-out-start', { meetingId });
  return deps.db.transaction().execute((trx) => startCloseOutIfSettled(deps, trx, meetingId, actor));
}

/**
 * L24: the grace after End is for declared chunks still on their way. Once the last of them is
 * stored, the close-out waiting out that grace starts at once. Run after the chunk's own
 * transaction, and taking only the job's row (job rows come before the meeting's in every lock
 * order here); a wake that fails leaves the close-out to its grace, and the chunk stays stored.
 */
export async function startCloseOutIfAllHere(
  deps: MeetingDeps,
  meetingId: string,
  actor: string,
): Promise<void> {
  try {
    await deps.db.transaction().execute(async (trx) => {
      const meeting = await deps.meetings.findById(meetingId, trx);
      if (meeting?.status !== MeetingStatus.finalizing || meeting.declared_chunks === null) return;
      if ((await countChunks(trx, meetingId)) !== meeting.declared_chunks) return;
      const waiting = await deps.jobs.lockDelayedJob(trx, meetingId, JobKind.closeOutMeeting);
      if (waiting) await deps.jobs.wakeJob(trx, waiting.id, actor, 'every declared chunk is here');
    });
  } catch (err) {
    deps.log.warn(
      { meetingId, err: err instanceof Error ? err.message : String(err) },
      'could not start the close-out early; it starts after its grace',
    );
  }
}
