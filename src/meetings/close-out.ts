import { endMeetingAs } from './meeting-end.ts';
import { EventType, JobKind, MeetingSource } from '../domain/status.ts';
import { closeOutStep, transcriptWait } from '../domain/close-out-plan.ts';
import { emitEvent } from '../events/outbox-store.ts';
import type { JobContext, JobDefinition } from '../jobs/job-definition.ts';
import { advanceTimeline } from './frontier.ts';
import { deleteMeetingAudio, failMeetingInTx } from './audio-lifecycle.ts';
import { markPendingAtPublication } from './late-window-store.ts';
import { markWindowMissing, unworkedWindows } from './window-rows.ts';
import type { MeetingDeps } from './deps.ts';
import { LastStretchOutage, transcribeDirectly } from './transcription.ts';
import { failurePolicyOf, payloadOf } from '../jobs/catalog.ts';
import { reviseParent, tracksStillOpen } from './tracks.ts';

/**
 * The close-out runs in this order and no other (L4): (1) settle windows nobody is working on,
 * (2) wait while windows are still in a recognition retry, up to a wall-clock cap, (3) transcribe
 * what is left directly, (4) publish the transcript and wait for minutes, (5) delete the audio and
 * complete. Each run re-reads the meeting and resumes at the first step not yet done, so a reclaim
 * or a requeue repeats nothing that was committed.
 */
export function closeOutMeetingJob(deps: MeetingDeps): JobDefinition<typeof JobKind.closeOutMeeting> {
  const { config } = deps;
  return {
    kind: JobKind.closeOutMeeting,
    run: async (ctx) => {
      const meetingId = payloadOf(ctx.job, JobKind.closeOutMeeting).meetingId;
      const meeting = await deps.meetings.withMinutesWait(meetingId);
      const next = closeOutStep({
        status: meeting.status,
        transcriptPublished: meeting.transcript_completed_at !== null,
        minutesStatus: meeting.minutes_status,
        minutesWaitedMs: Number(meeting.minutes_waited_ms ?? 0),
        minutesWaitCapMs: config.minutesWaitCapMs,
      });
      switch (next.step) {
        case 'nothing':
          await ctx.complete();
          return;
        case 'settle-transcript':
          await settleAndPublish(deps, ctx, meetingId, meeting.source);
          return;
        case 'wait-for-minutes':
          // Settled minutes wake this job at once; the poll only covers a wake-up that raced a run.
          await ctx.requeue(config.minutesRetryMs, 'waiting for minutes');
          return;
        case 'close-without-minutes':
          ctx.log.error({ meetingId }, 'minutes never settled; closing the meeting without them');
          await ctx.fenced((trx) => deps.meetings.giveUpOnMinutes(trx, meetingId));
          break;
        case 'finish':
          break;
      }

      // (5) Delete the audio, then complete. A delete that fails does not hold the meeting back: the
      // transcript is final, and the audio sweep retries the delete (its backlog is a metric).
      await ctx.fenced(() => Promise.resolve());
      try {
        await deleteMeetingAudio(deps, meetingId);
      } catch (err) {
        ctx.log.warn({ meetingId, err: String(err) }, 'audio deletion failed; the audio sweep will retry it');
      }
      const counts = await deps.meetings.windowCounts(meetingId);
      const untranscribed = counts.inFlight + counts.held + counts.exhausted + counts.missing;
      if (untranscribed > 0) {
        // L5: the warning counts both windows still in retry and windows whose retries ran out;
        // J20: the audio of those that could still be transcribed is held for them, not deleted.
        ctx.log.warn(
          {
            meetingId,
            inFlight: counts.inFlight,
            held: counts.held,
            exhausted: counts.exhausted,
            exhaustedAudioKept: counts.exhaustedAudioKept,
            missing: counts.missing,
          },
          'meeting completes with some windows untranscribed; the audio of those that may still be transcribed is held',
        );
      }
      await ctx.complete(async (trx) => {
        const locked = await deps.meetings.lock(trx, meetingId);
        // Counted again under the lock: a late window's publication may have counted since.
        const now = await deps.meetings.windowCounts(meetingId, trx);
        await endMeetingAs(deps, trx, locked, 'completeMeeting', ctx.actor, 'close-out finished', {
          untranscribed_in_flight: now.inFlight + now.held,
          untranscribed_exhausted: now.exhausted + now.missing,
        });
      });
    },
    onTerminalFailure: async (trx, job, error) => {
      const meetingId = payloadOf(job, JobKind.closeOutMeeting).meetingId;
      const failed = await failMeetingInTx(deps, trx, meetingId, error, 'worker');
      return failed ? () => deleteMeetingAudio(deps, meetingId) : null;
    },
  };
}

/** Steps (1)–(4): settle the transcript, then publish it and wait for the minutes consumer. */
async function settleAndPublish(
  deps: MeetingDeps,
  ctx: JobContext,
  meetingId: string,
  source: string,
): Promise<void> {
  try {
    if (await settleTranscript(deps, ctx, meetingId, source)) return;
  } catch (err) {
    if (!(err instanceof LastStretchOutage)) throw err;
    // The speech provider failed on a window transcribed here with an error that passes:
    // wait and try again, like a window in retry (L4, L7: waiting spends no retry).
    ctx.log.warn(
      { meetingId, code: err.error.code },
      'the last stretch could not be transcribed yet; waiting',
    );
    await ctx.waitOutOutage(
      `speech provider unavailable for the last stretch: ${err.error.code}`,
      (trx) => deps.meetings.startCloseoutWait(trx, meetingId),
      err.retryAfterSeconds,
    );
    return;
  }

  // (4) The transcript is final: publish meeting.transcribed and wait for the minutes consumer.
  // A window still in retry is marked, so that its words, if they come, revise the transcript.
  await ctx.requeue(deps.config.minutesRetryMs, 'waiting for minutes', async (trx) => {
    const locked = await deps.meetings.lock(trx, meetingId);
    await markPendingAtPublication(trx, meetingId);
    const counts = await deps.meetings.windowCounts(meetingId, trx);
    // L25: a track has no minutes and no events of its own: its meeting's transcript holds its
    // words (a track published after its meeting did revises the meeting's).
    await deps.meetings.publishTranscript(trx, meetingId, counts, locked.parent_id === null);
    if (locked.parent_id !== null) {
      await reviseParent(trx, locked, { lateChunks: [] });
      return;
    }
    await emitEvent(trx, {
      workspaceId: locked.workspace_id,
      type: EventType.meetingTranscribed,
      subjectId: meetingId,
      payload: { meetingId, revision: locked.transcript_revision },
    });
  });
}

/**
 * Close-out steps (1)–(3): settle windows nobody works on, wait for windows in retry and repairs
 * (up to the wait cap), transcribe the last stretch of a live meeting here. True when the job was
 * requeued to wait. A passing speech failure on a window transcribed here throws LastStretchOutage
 * until the close-out has waited out its kind's outage waits, after which the window goes on in a
 * job of its own (L6, J20).
 */
async function settleTranscript(
  deps: MeetingDeps,
  ctx: JobContext,
  meetingId: string,
  source: string,
): Promise<boolean> {
  const { config } = deps;
  // A window transcribed here gets the patience any window's own job has for a speech outage (its
  // kind's outage waits, about half an hour), counted from its own outages, not from the wait cap
  // for windows in retry.
  const failPassing = ctx.job.outage_waits >= failurePolicyOf(config, JobKind.closeOutMeeting).outageWaits;
  // (1) Windows with no transcript and nobody working on them: no audio, or a job that never
  // got registered.
  await settleUnworkedWindows(deps, ctx, meetingId, failPassing);

  // (2) L4/L5: only windows still being attempted are worth waiting for, and (L19) a repair
  // of late audio in progress.
  const counts = await deps.meetings.windowCounts(meetingId);
  const repairing = await deps.jobs.hasActiveJob(deps.db, meetingId, JobKind.repairTimeline);
  const waitedMs = await deps.meetings.closeoutWaitedMs(meetingId);
  const first = transcriptWait({
    windowsInRetry: counts.inFlight,
    repairing,
    waitedMs,
    waitCapMs: config.closeoutWaitCapMs,
  });
  if (first.wait) {
    await ctx.requeue(config.closeoutPollMs, first.reason, (trx) =>
      deps.meetings.startCloseoutWait(trx, meetingId),
    );
    return true;
  }
  if (first.capReached) {
    ctx.log.warn(
      { meetingId, inFlight: counts.inFlight, repairing, waitedMs: Math.round(waitedMs) },
      'close-out wait cap reached; finishing without windows still in retry',
    );
  }

  // (3) The last stretch of a live meeting, transcribed here rather than queued (L4).
  if (source === MeetingSource.live) {
    await advanceTimeline(deps, meetingId, ctx.actor, { final: true, runTx: ctx.fenced });
    await settleUnworkedWindows(deps, ctx, meetingId, failPassing);
  }
  await deps.checkpoints.hit('close-out-meeting.after-last-stretch', { meetingId });
  // L25: the meeting's transcript holds its tracks' words: it is published once they are.
  if (source === MeetingSource.live) {
    const tracks = await tracksStillOpen(deps, meetingId, ctx.actor);
    if (tracks > 0) {
      await ctx.requeue(config.closeoutPollMs, `waiting for ${tracks} track(s) to publish their words`);
      return true;
    }
  }
  // L19: a chunk that came in while the last stretch was cut has a repair queued; wait for it
  // too (within the same cap), so the transcript published next already holds it.
  const late = transcriptWait({
    windowsInRetry: 0,
    repairing: await deps.jobs.hasActiveJob(deps.db, meetingId, JobKind.repairTimeline),
    waitedMs: await deps.meetings.closeoutWaitedMs(meetingId),
    waitCapMs: config.closeoutWaitCapMs,
  });
  if (late.wait) {
    await ctx.requeue(config.closeoutPollMs, late.reason, (trx) =>
      deps.meetings.startCloseoutWait(trx, meetingId),
    );
    return true;
  }
  return false;
}

/** Settles each pending window that has no active job: missing if it has no audio, else transcribed here. */
async function settleUnworkedWindows(
  deps: MeetingDeps,
  ctx: JobContext,
  meetingId: string,
  failPassing: boolean,
): Promise<void> {
  const orphans = await unworkedWindows(deps.db, meetingId);
  const toTranscribe: typeof orphans = [];
  for (const window of orphans) {
    // A live window reads its audio from the chunks; a window without audio has neither.
    if (!window.blob_id && window.start_samples === null) {
      await ctx.fenced(async (trx) => {
        await deps.meetings.lock(trx, meetingId);
        await markWindowMissing(trx, window, ctx.actor);
      });
    } else {
      toTranscribe.push(window);
    }
  }
  // L24: as many at once as the worker runs recognisers (the last stretch was cut for them).
  await eachAtMost(deps.config.concurrency.transcription, toTranscribe, (window) =>
    transcribeDirectly(deps, window, ctx.signal, ctx.actor, ctx.fenced, failPassing),
  );
}

/**
 * Runs `work` on every item, at most `limit` at once. After a failure no new item starts; the
 * ones running are waited for, then the first failure is thrown.
 */
async function eachAtMost<T>(limit: number, items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { err: unknown } | null = null;
  const lane = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failure !== null) throw (failure as { err: unknown }).err;
}
