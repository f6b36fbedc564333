import { randomUUID } from 'node:crypto';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  BotRecordingStatus,
  JobKind,
  MeetingSource,
  MeetingStatus,
  MinutesStatus,
  WindowStatus,
} from '../domain/status.ts';
import { deleteNow, handOffMeetingObjects } from '../storage/objects.ts';
import { deleteMeetingAudio, failMeetingInTx, releaseHeldStretches } from './audio-lifecycle.ts';
import { heldWindowsOf } from './audio-retention-rows.ts';
import { markPendingAtPublication } from './late-window-store.ts';
import { tracksOf } from './track-rows.ts';
import type { MeetingDeps } from './deps.ts';
import { isUuid } from './pg-meeting-store.ts';
import { createTranscribeJob } from './transcribe-job.ts';
import { createCloseOutJob, startCloseOutIfSettled } from './close-out-start.ts';
import { createMinutesJob } from './minutes.ts';
import { ensureRepairJob } from './frontier.ts';
import { hasRepairWork } from './repair-rows.ts';
import { createJob } from '../jobs/catalog.ts';
import { activeRecordingsOfMeeting, moveBotRecording } from '../bots/bot-recording-store.ts';
import { ClientCode } from '../domain/client-codes.ts';
import { unlinkMeetingFromRecordings } from '../bots/bot-recording-store.ts';
import { dropEventsAbout } from '../events/outbox-store.ts';
import { forgetDeliveriesAbout } from '../events/webhook-store.ts';
import {
  findBatch,
  insertBatch,
  lockBatch,
  markBatchCanceled,
  meetingIdsOfBatch,
  meetingsOfBatch,
} from './batch-store.ts';
import { reopenFailedWindow, windowsOf } from './window-rows.ts';

const ENDED: readonly string[] = [MeetingStatus.complete, MeetingStatus.failed];

/**
 * B8: deletes a meeting through the application path. In one transaction, children first: its
 * active jobs are canceled (closing running attempts, so a late worker cannot commit), its objects
 * handed to the cleanup outbox, then segments, windows, chunks, blob rows and the meeting itself
 * are deleted. Job and attempt rows stay as the audit trail; they hold no meeting content. The
 * objects are then deleted at once, or by the cleanup pass if the store is down.
 */
export async function deleteMeeting(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
): Promise<void> {
  const actor = `user:${workspaceId}`;
  const keys = await deps.db.transaction().execute(async (trx) => {
    await deps.meetings.get(workspaceId, meetingId, trx);
    // Job rows before the meeting row, as everywhere else.
    await deps.jobs.cancelMeetingJobs(trx, [meetingId], actor, 'meeting deleted');
    // A concurrent delete may have removed it while this one waited for the lock: then it is gone.
    const meeting = await deps.meetings.lockIfExists(trx, meetingId);
    if (!meeting)
      throw new AppError(ErrorKind.notFound, ClientCode.meetingNotFound, `no meeting ${meetingId}`);
    // A writer that held the meeting's lock while this waited for it (a split committing its next
    // window, J19) may have added a job the first pass could not see: with the lock held, none can
    // be added any more, and this pass ends those.
    await deps.jobs.cancelMeetingJobs(trx, [meetingId], actor, 'meeting deleted');
    // L25: its tracks go with it, their jobs, rows and audio too.
    if (meeting.parent_id !== null)
      throw new AppError(
        ErrorKind.conflict,
        'meeting.is_track',
        `meeting ${meetingId} is the ${meeting.track} track of meeting ${meeting.parent_id}; it is deleted with that meeting`,
      );
    const tracks = (await tracksOf(trx, meetingId)).map((t) => t.id);
    if (tracks.length > 0) await deps.jobs.cancelMeetingJobs(trx, tracks, actor, 'meeting deleted');
    // Each track's row is held too, so no chunk of it is stored between its hand-off and its delete.
    for (const track of tracks) await deps.meetings.lockIfExists(trx, track);
    const handed = await handOffMeetingObjects(trx, meetingId, 'meeting deleted');
    for (const track of tracks) {
      handed.push(...(await handOffMeetingObjects(trx, track, 'meeting deleted')));
      await deps.meetings.deleteRows(trx, track);
    }
    // A bot recording that brought this meeting in ends with it, saying why (not `processing`
    // for ever, pointing at nothing). Before the meeting's rows go: a tenant sees a recording only
    // through its meeting (U4, migration 0047).
    for (const rec of await activeRecordingsOfMeeting(trx, meetingId)) {
      await moveBotRecording(trx, rec.id, BotRecordingStatus.canceled, {
        actor,
        reason: 'its meeting was deleted',
        set: { failure_code: 'meeting.deleted', failure_message: 'its meeting was deleted' },
      });
    }
    await unlinkMeetingFromRecordings(trx, meetingId);
    await deps.meetings.deleteRows(trx, meetingId);
    // Events about the meeting carry its content (minutes): they go with it, and webhook
    // deliveries not yet sent are closed; what was sent stays in the log without its body.
    await dropEventsAbout(trx, meetingId);
    await forgetDeliveriesAbout(trx, workspaceId, meetingId);
    await recordAudit(trx, {
      workspaceId,
      subjectType: 'meeting',
      subjectId: meetingId,
      from: meeting.status,
      to: 'deleted',
      actor,
      reason: `meeting deleted; ${handed.length} objects handed to cleanup`,
    });
    return handed;
  });
  await deleteNow(deps, keys);
}

export async function createBatch(
  deps: MeetingDeps,
  workspaceId: string,
  title: string,
  ownerUserId: string | null = null,
) {
  return insertBatch(deps.db, workspaceId, title, ownerUserId);
}

export async function getBatch(deps: MeetingDeps, workspaceId: string, batchId: string) {
  const batch = isUuid(batchId) ? await findBatch(deps.db, workspaceId, batchId) : undefined;
  if (!batch) throw new AppError(ErrorKind.notFound, 'batch.not_found', `no batch ${batchId}`);
  const meetings = await meetingsOfBatch(deps.db, batch.id);
  return { batch, meetings };
}

/**
 * J14: cancels an upload batch. One transaction cancels every active job of its meetings and
 * closes each running attempt as canceled (so its token is dead) and fails the meetings that had
 * not ended with a "canceled" reason; only after that commit is any audio handed to deletion.
 */
export async function cancelBatch(deps: MeetingDeps, workspaceId: string, batchId: string) {
  const actor = `user:${workspaceId}`;
  const { batch } = await getBatch(deps, workspaceId, batchId);
  const canceled = await deps.db.transaction().execute(async (trx) => {
    // The batch row first: meeting creation in this batch waits, then sees it canceled.
    await lockBatch(trx, batch.id);
    const ids = await meetingIdsOfBatch(trx, batch.id);
    await deps.jobs.cancelMeetingJobs(trx, ids, actor, `batch ${batch.id} canceled`);
    const ended: string[] = [];
    for (const id of ids) {
      const failed = await failMeetingInTx(
        deps,
        trx,
        id,
        { kind: ErrorKind.permanent, code: 'meeting.canceled', message: 'its upload batch was canceled' },
        actor,
      );
      if (failed) ended.push(id);
    }
    // A split that held a meeting's lock while this waited for it (committing its next window,
    // J19) may have added a job the first pass could not see; with the locks held, this pass ends it.
    await deps.jobs.cancelMeetingJobs(trx, ids, actor, `batch ${batch.id} canceled`);
    await markBatchCanceled(trx, batch.id);
    return ended;
  });
  for (const id of canceled) await deleteMeetingAudio(deps, id);
  return getBatch(deps, workspaceId, batchId);
}

/**
 * J13: a new request for a meeting whose work is stuck or failed in part. Its active jobs are
 * superseded (their running attempts closed as superseded, history kept), and the remaining work
 * is created again: the split if there are no windows yet, a job per window without a transcript
 * (failed windows go back to pending; transcribed ones are never redone, J15), or the close-out.
 * It needs the audio, which is deleted when a meeting ends (L16).
 */
export async function resubmitMeeting(deps: MeetingDeps, workspaceId: string, meetingId: string) {
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    const before = await deps.meetings.get(workspaceId, meetingId, trx);
    // An ended meeting's jobs are left alone (minutes being written go on); only its late audio and
    // its held stretches (J20) are tried again below. Job rows before the meeting row, as everywhere.
    const endedBefore = ENDED.includes(before.status) || before.audio_deleted_at !== null;
    const held = endedBefore ? await heldWindowsOf(trx, meetingId) : [];
    let superseded = endedBefore
      ? await deps.jobs.supersedeJobsOf(
          trx,
          held.flatMap((w) => w.job_ids),
          actor,
        )
      : await deps.jobs.supersedeMeetingJobs(trx, meetingId, actor);
    const meeting = await deps.meetings.lock(trx, meetingId);
    // A split that held the meeting's lock while this waited for it (committing its next window,
    // J19) may have added a job the first pass could not see; with the lock held, this pass takes it.
    if (!endedBefore) superseded += await deps.jobs.supersedeMeetingJobs(trx, meetingId, actor);
    // L19: late audio whose repair gave up is still stored: a resubmission tries it again, also
    // for a meeting that ended (its late audio is kept until repaired).
    const repair = meeting.source === MeetingSource.live && (await hasRepairWork(trx, meetingId));
    const ended = ENDED.includes(meeting.status) || meeting.audio_deleted_at !== null;
    if (ended && !repair && held.length === 0) {
      throw new AppError(
        ErrorKind.conflict,
        'meeting.audio_deleted',
        `meeting ${meetingId} is ${meeting.status} and its audio was deleted; resubmission needs the audio` +
          (meeting.minutes_status === 'failed' || meeting.minutes_status === 'unavailable'
            ? ' (for the minutes, use POST /v1/meetings/{id}/minutes)'
            : ''),
      );
    }
    if (!ended && (meeting.status === MeetingStatus.created || meeting.status === MeetingStatus.recording)) {
      throw new AppError(
        ErrorKind.conflict,
        'meeting.not_started',
        `meeting ${meetingId} is ${meeting.status}`,
      );
    }
    if (repair) await ensureRepairJob(deps, trx, meeting, actor);
    const retried = ended ? await retryHeldStretches(deps, trx, meeting, held, actor) : 0;
    const created = (ended ? retried : await recreateWork(deps, trx, meeting, actor)) + (repair ? 1 : 0);
    await recordAudit(trx, {
      workspaceId,
      subjectType: 'meeting',
      subjectId: meetingId,
      from: meeting.status,
      to: meeting.status,
      actor,
      reason: `resubmitted: ${superseded} active jobs superseded, ${created} created${repair ? ' (a repair of late audio)' : ''}`,
    });
    return { superseded, created };
  });
}

/**
 * J20: an ended meeting's held stretches get a new run each, in the ordinary lane, at once: a
 * failed window is pending again, and each gets a new job (its isolated one was superseded above).
 * The transcript is published, so they are marked as such, and their words revise it (L19).
 */
async function retryHeldStretches(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  held: Array<{ id: string; status: string }>,
  actor: string,
): Promise<number> {
  const windows = new Map((await windowsOf(trx, meeting.id)).map((w) => [w.id, w]));
  let created = 0;
  for (const h of held) {
    const w = windows.get(h.id);
    if (!w || (w.blob_id === null && w.start_samples === null)) continue;
    if (w.status === WindowStatus.failed) await reopenFailedWindow(trx, meeting.workspace_id, w, actor);
    else if (w.status !== WindowStatus.pending) continue;
    await createTranscribeJob(deps, trx, meeting.workspace_id, meeting.id, w.id, w.index, actor);
    created++;
  }
  if (meeting.transcript_completed_at) await markPendingAtPublication(trx, meeting.id);
  return created;
}

/**
 * J20: an operator gives up a meeting's held stretches (`verbatim release`): their jobs end, the
 * windows still pending fail, and the audio held for them is deleted now. Audited.
 */
export async function releaseHeldAudio(deps: MeetingDeps, meetingId: string, actor: string): Promise<number> {
  return releaseHeldStretches(
    deps,
    meetingId,
    { kind: ErrorKind.permanent, code: 'audio.released', message: 'an operator released its held audio' },
    actor,
  );
}

async function recreateWork(deps: MeetingDeps, trx: Tx, meeting: MeetingRow, actor: string): Promise<number> {
  const windows = await windowsOf(trx, meeting.id);
  if (meeting.status === MeetingStatus.finalizing) {
    await createCloseOutJob(deps, trx, meeting, actor);
    // A published transcript's windows still in retry (past the close-out's cap, L4) had their jobs
    // superseded above; the close-out does not go back to them, so they get jobs of their own again
    // (their words then revise the transcript, L19); else their audio would be deleted untranscribed.
    let again = 0;
    if (meeting.transcript_completed_at) {
      for (const w of windows) {
        if (w.status !== WindowStatus.pending || (w.blob_id === null && w.start_samples === null)) continue;
        await createTranscribeJob(deps, trx, meeting.workspace_id, meeting.id, w.id, w.index, actor);
        again++;
      }
    }
    // The transcript is published and its minutes were being written: that job was superseded
    // above with the rest, and the close-out waits for minutes, so they are asked for again.
    // (A minutes job the transcript event's consumer made since the supersede is left to write them.)
    if (
      meeting.transcript_completed_at &&
      meeting.minutes_status === MinutesStatus.pending &&
      !(await deps.jobs.hasActiveJob(trx, meeting.id, JobKind.writeMinutes))
    ) {
      await createMinutesJob(deps, trx, meeting.workspace_id, meeting.id, `resubmit:${randomUUID()}`, actor);
      return 2 + again;
    }
    return 1 + again;
  }
  // J19: a recording whose split has not cut its last window gets its split again; it resumes
  // after the windows already committed, which get their own jobs below.
  const splitUnfinished =
    (meeting.source === MeetingSource.upload || meeting.source === MeetingSource.bot) &&
    meeting.windows_cut_at === null;
  let created = 0;
  // (A completed split holds its key: then nothing is created and the close-out is tried below.)
  if (
    splitUnfinished &&
    (await createJob(
      deps,
      trx,
      JobKind.splitRecording,
      { meetingId: meeting.id },
      { workspaceId: meeting.workspace_id },
      actor,
    ))
  )
    created++;
  for (const w of windows) {
    // A window with no audio (no copy of its own, nor a stretch of a live timeline) has nothing to redo.
    if (w.blob_id === null && w.start_samples === null) continue;
    if (w.status === WindowStatus.failed) {
      await reopenFailedWindow(trx, meeting.workspace_id, w, actor);
    } else if (w.status !== WindowStatus.pending) {
      continue;
    }
    await createTranscribeJob(deps, trx, meeting.workspace_id, meeting.id, w.id, w.index, actor);
    created++;
  }
  if (created === 0) await startCloseOutIfSettled(deps, trx, meeting.id, actor);
  return created;
}
