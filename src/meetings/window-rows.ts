import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import type { Executor, Tx, WindowRow, WordTimes } from '../db/schema.ts';
import type { CloseOutGateFacts } from '../domain/close-out-gate.ts';
import type { ErrorRecord } from '../domain/errors.ts';
import { ACTIVE_JOB_STATUSES, WindowStatus, WindowTransitions } from '../domain/status.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import { referenceStaged, type StagedObject } from '../storage/objects.ts';

/**
 * The windows of a meeting's timeline: recording them, reading one with what recognising it needs,
 * and the statements that settle them (src/meetings/transcription.ts runs them).
 */

/** A window's segment as it is committed: times relative to the window's start. */
export interface SegmentRow {
  seq: number;
  start_ms: number;
  end_ms: number;
  text: string;
  /** W1: the speaker the segment's own source gave it (track, channel, recogniser cluster). */
  speaker_key?: string | null;
  /** W2: the recogniser's word times relative to the segment's start, where it gave them. */
  words?: WordTimes | null;
}

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
    /** B11: the speaker all of the window's audio is (a channel's, a track's). */
    speakerKey?: string | null;
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
      speaker_key: w.speakerKey ?? null,
    })
    .execute();
  return windowId;
}

export async function windowById(db: Executor, windowId: string): Promise<WindowRow> {
  return db.selectFrom('windows').selectAll().where('id', '=', windowId).executeTakeFirstOrThrow();
}

export interface WindowSource {
  window: WindowRow;
  objectKey: string | null;
  deletedAt: Date | null;
  language: string | null;
  /** W7: the workspace's vocabulary, for recognisers that take a prompt. */
  vocabulary: string[];
  /** The meeting's source: a live meeting is never `processing`, so its windows pass no close-out gate. */
  meetingSource: string;
}

/** The window with what recognising it needs (its audio's key, the meeting's language), in one read. */
export async function loadWindowSource(db: Executor, windowId: string): Promise<WindowSource> {
  const row = await db
    .selectFrom('windows')
    .innerJoin('meetings', 'meetings.id', 'windows.meeting_id')
    .innerJoin('workspaces', 'workspaces.id', 'meetings.workspace_id')
    .leftJoin('blobs', 'blobs.id', 'windows.blob_id')
    .selectAll('windows')
    .select([
      'blobs.object_key',
      'blobs.deleted_at as blob_deleted_at',
      'meetings.language',
      'meetings.source as meeting_source',
      'workspaces.vocabulary',
    ])
    .where('windows.id', '=', windowId)
    .executeTakeFirstOrThrow();
  const { object_key, blob_deleted_at, language, meeting_source, vocabulary, ...window } = row;
  return {
    window,
    objectKey: object_key,
    deletedAt: blob_deleted_at,
    language,
    meetingSource: meeting_source,
    vocabulary,
  };
}

/** The window commit's answer: the close-out gate's facts, and whether its window was marked at publication (L19). */
export type WindowCommitFacts = CloseOutGateFacts & { lateWindow?: boolean };

/**
 * J5 in one statement, run under the attempt's fence: the window's segments and its move to
 * transcribed, the job's completion, then the facts of the meeting's close-out gate, read under the
 * meeting's lock when it is processing (verbatim_close_out_gate), and whether the window was
 * marked at its transcript's publication (migration 0059). The caller decides on them.
 */
export function completeWindowAttemptStatement(
  ids: { jobId: string; attemptId: string; token: string },
  actor: string,
  rows: SegmentRow[],
): RawBuilder<{ facts: WindowCommitFacts | null }> {
  return sql<{ facts: WindowCommitFacts | null }>`select verbatim_complete_window_attempt(${ids.jobId}::uuid,
    ${ids.attemptId}::uuid, ${ids.token}::uuid, ${actor}, ${JSON.stringify(rows)}::jsonb) as facts`;
}

/** J5/J15: the segments and the window's compare-and-swap to transcribed; false when it was no longer pending. */
export async function commitWindowSegments(
  trx: Tx,
  windowId: string,
  rows: SegmentRow[],
  actor: string,
): Promise<boolean> {
  const result = await sql<{ moved: boolean }>`select verbatim_commit_window(${windowId}::uuid,
    ${JSON.stringify(rows)}::jsonb, ${actor}) as moved`.execute(trx);
  return result.rows[0]?.moved === true;
}

/** L6: the window failed for good; audited. Nothing happens to a window that already settled. */
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
 * The facts the close-out gate decides on (verbatim_close_out_gate): a processing meeting's row is
 * locked until the transaction ends; null when there is no such meeting.
 */
export async function closeOutGateFacts(trx: Tx, meetingId: string): Promise<CloseOutGateFacts | null> {
  const result = await sql<{
    facts: CloseOutGateFacts | null;
  }>`select verbatim_close_out_gate(${meetingId}::uuid) as facts`.execute(trx);
  return result.rows[0]?.facts ?? null;
}

/** The windows an upload's split has committed so far, in order: where a resumed split goes on. */
export async function cutWindows(
  db: Executor,
  meetingId: string,
): Promise<Array<{ index: number; end_ms: number }>> {
  return db
    .selectFrom('windows')
    .select(['index', 'end_ms'])
    .where('meeting_id', '=', meetingId)
    .orderBy('index')
    .execute();
}

/** L4: the meeting's pending windows that no job is working on, in order. */
export async function unworkedWindows(db: Executor, meetingId: string): Promise<WindowRow[]> {
  return db
    .selectFrom('windows as w')
    .selectAll('w')
    .where('w.meeting_id', '=', meetingId)
    .where('w.status', '=', WindowStatus.pending)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('jobs as j')
            .select('j.id')
            .whereRef('j.subject_id', '=', 'w.id')
            .where('j.status', 'in', ACTIVE_JOB_STATUSES),
        ),
      ),
    )
    .orderBy('w.index')
    .execute();
}

/** L4: a pending window no audio arrived for settles as missing, audited. */
export async function markWindowMissing(trx: Tx, window: WindowRow, actor: string): Promise<void> {
  await trx
    .updateTable('windows')
    .set({ status: WindowStatus.missing, missing_at: sql<Date>`now()` })
    .where('id', '=', window.id)
    .where('status', '=', WindowStatus.pending)
    .execute();
  await recordAudit(trx, {
    workspaceId: window.workspace_id,
    subjectType: 'window',
    subjectId: window.id,
    from: WindowStatus.pending,
    to: WindowStatus.missing,
    actor,
    reason: 'no audio arrived for this window',
  });
}

/** The meeting's windows as a resubmission goes through them, in order. */
export async function windowsOf(db: Executor, meetingId: string) {
  return db
    .selectFrom('windows')
    .select(['id', 'index', 'status', 'blob_id', 'start_samples'])
    .where('meeting_id', '=', meetingId)
    .orderBy('index')
    .execute();
}

/** J13: a failed window is pending again (a resubmission), audited. */
export async function reopenFailedWindow(
  trx: Tx,
  workspaceId: string,
  window: { id: string; status: string },
  actor: string,
): Promise<void> {
  const t = WindowTransitions.retryWindow;
  await trx
    .updateTable('windows')
    .set({ status: t.to, failed_at: null, failure_code: null, failure_message: null })
    .where('id', '=', window.id)
    .where('status', 'in', t.from)
    .execute();
  await recordAudit(trx, {
    workspaceId,
    subjectType: 'window',
    subjectId: window.id,
    from: window.status,
    to: t.to,
    actor,
    reason: 'resubmitted',
  });
}

/**
 * J20: processing recordings with a held window (its job isolated, waiting out its backoff): the
 * close-out gate may now let them finalize, since a held window does not hold its meeting back.
 */
/**
 * J5: processing meetings with no window left pending and no split still cutting: the ones whose
 * close-out start was lost when a process died between a last window's commit and the start (the
 * gate decides; this only finds the candidates, by the meetings_processing index).
 */
export async function processingMeetingsSettled(db: Executor, limit = 20): Promise<string[]> {
  const rows = await sql<{ id: string }>`
    select m.id from meetings m
     where m.status = 'processing'
       and not exists (select 1 from windows w where w.meeting_id = m.id and w.status = 'pending')
       and (m.windows_cut_at is not null or not exists (
             select 1 from jobs j where j.meeting_id = m.id and j.kind = 'split-recording'
                and j.status in ('pending', 'running')))
     limit ${limit}`.execute(db);
  return rows.rows.map((r) => r.id);
}

export async function processingMeetingsWithHeldWindows(db: Executor, limit = 20): Promise<string[]> {
  const rows = await sql<{ meeting_id: string }>`
    select distinct j.meeting_id from jobs j join meetings m on m.id = j.meeting_id
     where j.isolated_at is not null and j.status = 'pending' and j.run_after > now()
       and j.kind = 'transcribe-window' and m.status = 'processing'
     limit ${limit}`.execute(db);
  return rows.rows.map((r) => r.meeting_id);
}
