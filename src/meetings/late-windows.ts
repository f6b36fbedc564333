import type { Tx } from '../db/schema.ts';
import { EventType, WindowStatus } from '../domain/status.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import { reviseParent } from './tracks.ts';
import type { MeetingDeps } from './deps.ts';
import {
  clearSettledLateMarks,
  meetingsWithSettledLateWindows,
  saveLateWindowCounts,
} from './late-window-store.ts';

/**
 * L19 for windows that settle after publication. The close-out stops waiting for windows in
 * retry at its cap (L4) and publishes the transcript; such a window keeps its audio and its job
 * (L16) and may still be transcribed minutes later. The publication marks every window still
 * pending (`pending_at_publication`, under the meeting lock and each window's row lock, so a
 * window's commit either lands before the mark or sees it). When a marked window has settled,
 * this, under the meeting lock: clears its mark, takes the counts of untranscribed windows again,
 * and, if the window added words, gives the transcript a new revision, sends
 * `meeting.transcript_revised` and asks for the minutes to be rewritten, as a late chunk's repair
 * does. A second run finds nothing to do. True when the transcript was revised.
 */
export async function publishSettledLateWindows(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
): Promise<boolean> {
  const meeting = await deps.meetings.lockIfExists(trx, meetingId);
  if (!meeting || !meeting.transcript_completed_at) return false;
  const settled = await clearSettledLateMarks(trx, meetingId);
  if (settled.length === 0) return false;
  const added = settled
    .filter((w) => w.status === WindowStatus.transcribed && (w.segment_count ?? 0) > 0)
    .map((w) => w.index)
    .sort((a, b) => a - b);
  const revise = added.length > 0;
  const revision = await saveLateWindowCounts(trx, meetingId, revise);
  await recordAudit(trx, {
    workspaceId: meeting.workspace_id,
    subjectType: 'meeting',
    subjectId: meetingId,
    from: meeting.status,
    to: meeting.status,
    actor,
    reason: revise
      ? `${added.length} window(s) transcribed after the transcript was published: revision ${revision}`
      : `${settled.length} window(s) settled after the transcript was published without adding words`,
    details: {
      lateWindows: added,
      settled: settled.map((w) => ({ index: w.index, status: w.status })),
      revision,
    },
  });
  if (revise && meeting.parent_id !== null) {
    await reviseParent(trx, meeting, { lateChunks: [], lateWindows: added });
  } else if (revise) {
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.meetingTranscriptRevised,
      subjectId: meetingId,
      payload: { meetingId, revision, lateChunks: [], lateWindows: added },
    });
  }
  return revise;
}

/**
 * A window's job after its commit, when the commit said its window was marked at publication
 * (the statement's `lateWindow`): publish it now (the sweep does it otherwise, for a process that
 * died in between).
 */
export async function publishLateWindow(
  deps: MeetingDeps,
  meetingId: string,
  actor: string,
): Promise<boolean> {
  return deps.db.transaction().execute((trx) => publishSettledLateWindows(deps, trx, meetingId, actor));
}

/** The sweep's half: a few meetings per pass with a marked window that has settled or has no job left. */
export async function publishLateWindowsSweep(
  deps: MeetingDeps,
  actor: string,
  log: { warn: (o: object, msg: string) => void },
  limit = 20,
): Promise<number> {
  let revised = 0;
  for (const meetingId of await meetingsWithSettledLateWindows(deps.db, limit)) {
    try {
      if (
        await deps.db.transaction().execute((trx) => publishSettledLateWindows(deps, trx, meetingId, actor))
      )
        revised++;
    } catch (err) {
      log.warn({ meetingId, err: String(err) }, 'late windows not published yet');
    }
  }
  return revised;
}
