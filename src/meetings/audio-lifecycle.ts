import { dropSpeakerReferences } from './speaker-store.ts';
import { endMeetingAs } from './meeting-end.ts';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { ErrorKind, type ErrorRecord } from '../domain/errors.ts';
import { JobKind, MeetingStatus, WindowStatus } from '../domain/status.ts';
import {
  heldWindowsOf,
  markAudioReleased,
  meetingsWithAudioToHandOff,
  pinnedBlobIds,
  startPlayback,
} from './audio-retention-rows.ts';
import { publishSettledLateWindows } from './late-windows.ts';
import { markWindowFailed, windowById } from './window-rows.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { MeetingDeps } from './deps.ts';
import { deleteNow, handOffMeetingObjects } from '../storage/objects.ts';

export const STOPPED_BEFORE_FINISHED = 'This meeting stopped before it finished';

/**
 * L11: marks the meeting failed with a reason a person can read. Returns false when the meeting had
 * already ended (a late failure must not overwrite a completed meeting).
 */
export async function failMeetingInTx(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  error: ErrorRecord,
  actor: string,
): Promise<boolean> {
  const meeting = await deps.meetings.lock(trx, meetingId);
  if (meeting.status === MeetingStatus.complete || meeting.status === MeetingStatus.failed) return false;
  await endMeetingAs(deps, trx, meeting, 'failMeeting', actor, `${error.code}: ${error.message}`, {
    failure_code: error.code,
    failure_message: `${STOPPED_BEFORE_FINISHED}: ${error.message}`,
  });
  deps.log.error({ meetingId, code: error.code }, 'meeting failed');
  return true;
}

/**
 * L16: hands every stored audio object of a meeting to the cleanup outbox and records when, in one
 * transaction, then deletes them at once. A delete that fails stays in the outbox and is retried by
 * the cleanup pass until it succeeds (B5); until then its bytes still count (B6). Idempotent.
 * Audio not yet in the transcript is kept (pinnedBlobIds): late chunks until the late-audio bound
 * (`lateExpired`), the audio of held stretches (J20) until theirs (`heldExpired`); a repair or a
 * late window's commit that needs it no more calls this again.
 */
export async function deleteMeetingAudio(
  deps: MeetingDeps,
  meetingId: string,
  opts: { lateExpired?: boolean; heldExpired?: boolean; playbackExpired?: boolean } = {},
): Promise<void> {
  const keys = await deps.db.transaction().execute(async (trx) => {
    // The meeting row before its blobs, as in deleteMeeting: the same order everywhere.
    const meeting = await deps.meetings.lockIfExists(trx, meetingId);
    if (!meeting) return [];
    // E4: a completed meeting of a workspace that keeps audio for playback keeps it until then.
    const playback = opts.playbackExpired ? null : await keepForPlayback(trx, meeting);
    // Past the late-audio bound no late chunk is kept, unless one taken just before it is being
    // repaired right now (checked under the meeting lock, which a chunk's store takes too).
    const repairing =
      opts.lateExpired === true && (await deps.jobs.hasActiveJob(trx, meetingId, JobKind.repairTimeline));
    const keep = await pinnedBlobIds(trx, meetingId, {
      late: opts.lateExpired !== true || repairing,
      held: opts.heldExpired !== true,
      playback: playback !== null,
    });
    const handed = await handOffMeetingObjects(trx, meetingId, 'meeting audio deleted', keep);
    await deps.meetings.markAudioDeleted(trx, meetingId);
    // W3: the clips of its speakers' voices are audio too.
    await dropSpeakerReferences(trx, meetingId);
    if (handed.length > 0 || !meeting.audio_deleted_at) {
      await recordAudit(trx, {
        workspaceId: meeting.workspace_id,
        subjectType: 'meeting',
        subjectId: meetingId,
        from: null,
        to: 'audio:deleted',
        actor: 'worker',
        reason: `${handed.length} audio objects handed to cleanup${keep.length > 0 ? `; ${keep.length} kept for late audio, held stretches${playback ? ` or playback until ${playback.toISOString()}` : ''}` : ''}${opts.heldExpired ? '; held stretches past their retention bound' : ''}${opts.playbackExpired ? '; the playback retention passed' : ''}`,
      });
    }
    return handed;
  });
  await deleteNow(deps, keys);
}

/**
 * E4: until when a meeting's audio is kept for playback, null when it is not: set once, when a
 * finished meeting's audio is first handed off (the close-out's last step), from its workspace's
 * playback days then. A failed meeting keeps none.
 */
async function keepForPlayback(trx: Tx, meeting: MeetingRow): Promise<Date | null> {
  if (meeting.playback_until) return meeting.playback_until > new Date() ? meeting.playback_until : null;
  // The close-out deletes the audio (step 5) while finalizing, the transcript already final.
  const finishing = meeting.status === MeetingStatus.finalizing || meeting.status === MeetingStatus.complete;
  if (!finishing || meeting.audio_deleted_at) return null;
  return startPlayback(trx, meeting.id);
}

/**
 * J20: gives up a meeting's held stretches: each window with no transcript whose audio is held
 * (still being tried, or failed on the way) has its jobs canceled and is failed with `error`, and
 * its audio is released; the transcript's counts are taken again. Then the audio no longer needed
 * is deleted. For an operator (verbatim release) and the held-audio retention bound. Audited.
 */
export async function releaseHeldStretches(
  deps: MeetingDeps,
  meetingId: string,
  error: ErrorRecord,
  actor: string,
): Promise<number> {
  const released = await deps.db.transaction().execute(async (trx) => {
    const held = await heldWindowsOf(trx, meetingId);
    if (held.length === 0) return 0;
    // Job rows before the meeting row, as everywhere else.
    await deps.jobs.cancelJobsOf(
      trx,
      held.flatMap((w) => w.job_ids),
      actor,
      `held stretch given up: ${error.message}`,
    );
    const meeting = await deps.meetings.lock(trx, meetingId);
    for (const w of held) {
      if (w.status === WindowStatus.pending)
        await markWindowFailed(trx, await windowById(trx, w.id), error, actor);
    }
    await markAudioReleased(
      trx,
      held.map((w) => w.id),
    );
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'meeting',
      subjectId: meetingId,
      from: meeting.status,
      to: meeting.status,
      actor,
      reason: `${held.length} held stretch(es) given up and their audio released: ${error.code}: ${error.message}`,
      details: { windows: held.map((w) => w.id) },
    });
    await publishSettledLateWindows(deps, trx, meetingId, actor);
    return held.length;
  });
  if (released > 0) deps.log.warn({ meetingId, released, code: error.code }, 'held stretches given up');
  await deleteMeetingAudio(deps, meetingId, { heldExpired: true });
  return released;
}

/**
 * The audio sweep: hands off the audio that an ended meeting still has (its close-out or failure
 * path stopped before the hand-off, or it kept audio that is needed no more or whose retention
 * bound has passed: held stretches are given up then, J20). The deletes are the cleanup pass's.
 */
export async function deleteEndedMeetingsAudio(deps: MeetingDeps, limit = 20): Promise<number> {
  const rows = await meetingsWithAudioToHandOff(
    deps.db,
    { lateAudioMs: deps.config.lateAudioMs, heldAudioMs: deps.config.heldAudioMs },
    limit,
  );
  let cleaned = 0;
  for (const { meeting_id, late_expired, held_expired, playback_expired } of rows) {
    try {
      if (held_expired) {
        await releaseHeldStretches(
          deps,
          meeting_id,
          {
            kind: ErrorKind.permanent,
            code: 'audio.retention_expired',
            message: 'its audio was kept for the held-audio retention period, and that has passed',
          },
          'sweep:audio-retention',
        );
      }
      await deleteMeetingAudio(deps, meeting_id, {
        lateExpired: late_expired,
        heldExpired: held_expired,
        playbackExpired: playback_expired,
      });
      cleaned++;
    } catch (err) {
      deps.log.warn({ meetingId: meeting_id, err: String(err) }, 'audio deletion failed again; will retry');
    }
  }
  return cleaned;
}
