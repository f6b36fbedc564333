import { sql } from 'kysely';
import type { Tx, WindowRow } from '../db/schema.ts';
import { AppError, ErrorKind, toErrorRecord, type ErrorRecord } from '../domain/errors.ts';
import { JobKind, MeetingStatus, WindowStatus, WindowTransitions } from '../domain/status.ts';
import { recordAudit } from '../jobs/audit.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { TranscriptSegment } from '../ports.ts';
import type { MeetingDeps } from './deps.ts';

/** One window: read its audio, recognise it, and commit its segments under the attempt's fence. */
export function transcribeWindowJob(deps: MeetingDeps): JobDefinition {
  return {
    kind: JobKind.transcribeWindow,
    run: async (ctx) => {
      const windowId = String(ctx.job.payload.windowId);
      const window = await deps.db
        .selectFrom('windows')
        .selectAll()
        .where('id', '=', windowId)
        .executeTakeFirstOrThrow();
      if (window.status !== WindowStatus.pending) {
        // J15: a settled window is never redone.
        await ctx.complete();
        return;
      }
      const segments = await recogniseWindow(deps, window, ctx.signal);
      await deps.checkpoints.hit('transcribe-window.before-commit', { windowIndex: window.index });
      await ctx.complete(async (trx) => {
        await commitWindowTranscript(deps, trx, window, segments, ctx.actor);
        await maybeStartCloseOut(deps, trx, window.meeting_id, ctx.actor);
      });
    },
    onTerminalFailure: async (trx, job, error) => {
      const windowId = String(job.payload.windowId);
      const window = await trx
        .selectFrom('windows')
        .selectAll()
        .where('id', '=', windowId)
        .executeTakeFirstOrThrow();
      await deps.meetings.lock(trx, window.meeting_id);
      await markWindowFailed(trx, window, error, 'worker');
      await maybeStartCloseOut(deps, trx, window.meeting_id, 'worker');
      return null;
    },
  };
}

export async function recogniseWindow(
  deps: MeetingDeps,
  window: WindowRow,
  signal: AbortSignal,
): Promise<TranscriptSegment[]> {
  if (!window.blob_id) throw new AppError(ErrorKind.permanent, 'audio.missing', 'window has no stored audio');
  const blob = await deps.db
    .selectFrom('blobs')
    .select(['object_key', 'deleted_at'])
    .where('id', '=', window.blob_id)
    .executeTakeFirstOrThrow();
  if (blob.deleted_at)
    throw new AppError(ErrorKind.permanent, 'audio.deleted', 'window audio was already deleted');
  await deps.checkpoints.hit('storage.get', { windowIndex: window.index });
  const wav = await deps.blobs.get(blob.object_key);
  const meeting = await deps.db
    .selectFrom('meetings')
    .select(['language'])
    .where('id', '=', window.meeting_id)
    .executeTakeFirstOrThrow();
  return deps.transcriber.transcribe({ wav, language: meeting.language, signal });
}

/**
 * J5/J15: the window's segments and its compare-and-swap to transcribed commit once; a window that
 * is no longer pending keeps what it has. Times become absolute on the meeting's timeline, and each
 * segment is kept inside its window so windows never overlap (L18).
 */
export async function commitWindowTranscript(
  deps: MeetingDeps,
  trx: Tx,
  window: WindowRow,
  segments: TranscriptSegment[],
  actor: string,
): Promise<boolean> {
  await deps.meetings.lock(trx, window.meeting_id);
  const t = WindowTransitions.markWindowTranscribed;
  const moved = await trx
    .updateTable('windows')
    .set({ status: t.to, transcribed_at: sql<Date>`now()`, segment_count: segments.length })
    .where('id', '=', window.id)
    .where('status', 'in', t.from)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) return false;
  const rows = segments
    .filter((s) => s.text.trim().length > 0)
    .map((s, seq) => {
      const start = Math.min(window.end_ms, window.start_ms + Math.max(0, Math.round(s.startMs)));
      const end = Math.min(window.end_ms, Math.max(start, window.start_ms + Math.round(s.endMs)));
      return {
        workspace_id: window.workspace_id,
        meeting_id: window.meeting_id,
        window_id: window.id,
        seq,
        start_ms: start,
        end_ms: end,
        text: s.text.trim(),
      };
    });
  if (rows.length > 0) await trx.insertInto('segments').values(rows).execute();
  await recordAudit(trx, {
    workspaceId: window.workspace_id,
    subjectType: 'window',
    subjectId: window.id,
    from: window.status,
    to: t.to,
    actor,
    details: { segments: rows.length },
  });
  return true;
}

export async function markWindowFailed(
  trx: Tx,
  window: WindowRow,
  error: ErrorRecord,
  actor: string,
): Promise<void> {
  const t = WindowTransitions.markWindowFailed;
  const moved = await trx
    .updateTable('windows')
    .set({
      status: t.to,
      failed_at: sql<Date>`now()`,
      failure_code: error.code,
      failure_message: error.message,
    })
    .where('id', '=', window.id)
    .where('status', 'in', t.from)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) return;
  await recordAudit(trx, {
    workspaceId: window.workspace_id,
    subjectType: 'window',
    subjectId: window.id,
    from: window.status,
    to: t.to,
    actor,
    reason: `${error.code}: ${error.message}`,
  });
}

/**
 * L4 step 1 and step 3: a window nobody is working on (its job never registered, or it is the last
 * stretch) is transcribed inside the close-out. If that fails, only the window is marked failed
 * (L6) and close-out goes on.
 */
export async function transcribeDirectly(
  deps: MeetingDeps,
  window: WindowRow,
  signal: AbortSignal,
  actor: string,
  fenced: <T>(fn: (trx: Tx) => Promise<T>) => Promise<T>,
): Promise<void> {
  let segments: TranscriptSegment[];
  try {
    segments = await recogniseWindow(deps, window, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    const error = toErrorRecord(err, 'asr');
    deps.log.warn(
      { windowId: window.id, code: error.code },
      'close-out could not transcribe a window; marking it failed',
    );
    await fenced(async (trx) => {
      await deps.meetings.lock(trx, window.meeting_id);
      await markWindowFailed(trx, window, error, actor);
    });
    return;
  }
  await fenced((trx) => commitWindowTranscript(deps, trx, window, segments, actor));
}

/**
 * Once no window of a processing upload is still being attempted, the meeting moves to finalizing
 * and its close-out job is created — in the transaction that settled the last window, after taking
 * the meeting's lock so two last windows cannot both miss (or both start) it.
 */
export async function maybeStartCloseOut(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
): Promise<void> {
  const meeting = await deps.meetings.lock(trx, meetingId);
  if (meeting.status !== MeetingStatus.processing) return;
  const counts = await deps.meetings.windowCounts(meetingId, trx);
  if (counts.inFlight > 0) return;
  await deps.meetings.transition(trx, meeting, 'startFinalizing', actor, 'every window settled');
  await createCloseOutJob(deps, trx, meeting.workspace_id, meetingId, 0, actor);
}

export async function createCloseOutJob(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  delayMs: number,
  actor: string,
): Promise<void> {
  await deps.jobs.createJob(
    trx,
    {
      workspaceId,
      kind: JobKind.closeOutMeeting,
      subjectType: 'meeting',
      subjectId: meetingId,
      meetingId,
      payload: { meetingId },
      // L7: the retry budget is split between errors and stalled-job reclaims.
      maxErrors: deps.config.closeoutMaxErrors,
      maxReclaims: deps.config.closeoutMaxReclaims,
      delayMs,
      dedupeKey: `close-out:${meetingId}`,
    },
    actor,
  );
}
