import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { JobKind } from '../domain/status.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { JobContext, JobDefinition } from '../jobs/job-definition.ts';
import { compensate } from '../storage/objects.ts';
import { deleteMeetingAudio } from './audio-lifecycle.ts';
import type { MeetingDeps } from './deps.ts';
import { advanceTimeline } from './frontier.ts';
import { stagedOf } from './live-webm.ts';
import { commitRepair } from './repair-commit.ts';
import { decodeResized, loadRepair, prepare, Replan } from './repair-plan.ts';
import { hasRepairWork } from './repair-rows.ts';
import { stretchAudio } from './window-audio.ts';
import { recogniseAudio, type Recognised } from './transcription.ts';
import { payloadOf } from '../jobs/catalog.ts';

/**
 * L19: the meeting's repair job. It places chunks that arrived for stretches the timeline already
 * went past, and cuts new audio after a closed timeline: it plans from a snapshot (src/domain/
 * timeline.ts decides), recognises the new windows with no lock held, then in one fenced
 * transaction checks that the snapshot still holds, moves everything after each resized stretch,
 * replaces the old windows (their active jobs superseded, J13) and commits the new ones with their
 * segments. A published transcript gets a new revision, `meeting.transcript_revised` and minutes
 * rewritten. One job per meeting; it runs again while work remains. See docs/live-meetings.md.
 */
export function repairTimelineJob(deps: MeetingDeps): JobDefinition<typeof JobKind.repairTimeline> {
  return {
    kind: JobKind.repairTimeline,
    run: async (ctx) => {
      const meetingId = payloadOf(ctx.job, JobKind.repairTimeline).meetingId;
      // After the close-out, new audio is placed as it comes; WebM pieces a request could not
      // decode in time are decoded and placed here first.
      await advanceTimeline(deps, meetingId, ctx.actor, {
        final: false,
        onlyClosed: true,
        untilDone: true,
        signal: ctx.signal,
      });
      const snapshot = await loadRepair(deps, deps.db, meetingId, null);
      if (!snapshot || snapshot.empty) {
        await settle(deps, ctx, meetingId, null);
        return;
      }
      const decoded = await decodeResized(deps, snapshot);
      try {
        const prepared = await prepare(deps, snapshot, decoded);
        const recognised = new Map<number, Recognised>();
        for (const [i, w] of prepared.plan.create.entries()) {
          if (w.kind !== 'transcribe') continue;
          let wav: Buffer;
          try {
            wav = await stretchAudio(deps, prepared.sources, w.start, w.end);
          } catch (err) {
            // The close-out deleted the meeting's audio after this plan was made: the plan's
            // neighbours are gone, so plan again, as a splice around the late audio (kept).
            if (!snapshot.meeting.audio_deleted_at && (await deps.meetings.audioDeleted(meetingId))) {
              await ctx.requeue(0, 'the meeting audio was deleted while repairing; planning again');
              await compensate(deps, stagedOf(decoded), err);
              return;
            }
            throw err;
          }
          const language = snapshot.meeting.language;
          // W3: the re-cut window's clusters become the meeting's speakers, as a window's own do.
          recognised.set(
            i,
            await recogniseAudio(deps, { id: randomUUID(), meeting_id: meetingId }, wav, {
              language,
              signal: ctx.signal,
            }),
          );
        }
        await deps.checkpoints.hit('repair-timeline.before-commit', { meetingId });
        const outcome = await settle(deps, ctx, meetingId, (trx) =>
          commitRepair(deps, trx, ctx.actor, snapshot, decoded, prepared, recognised),
        );
        if (outcome === 'replanned') await compensate(deps, stagedOf(decoded), new Replan());
      } catch (err) {
        await compensate(deps, stagedOf(decoded), err);
        throw err;
      }
    },
    onTerminalFailure: async (trx, job, error) => {
      const meetingId = payloadOf(job, JobKind.repairTimeline).meetingId;
      const meeting = await deps.meetings.lock(trx, meetingId);
      await deps.meetings.recordRepairFailure(trx, meetingId, error);
      await recordAudit(trx, {
        workspaceId: meeting.workspace_id,
        subjectType: 'meeting',
        subjectId: meetingId,
        from: meeting.status,
        to: meeting.status,
        actor: 'worker',
        reason: `late audio could not be added: ${error.code}: ${error.message}`,
      });
      deps.log.error({ meetingId, code: error.code }, 'a repair of late audio failed for good');
      return null;
    },
  };
}

class RunAgain extends Error {}

/**
 * Ends a run: commits the repair (if any) with the job's completion, or, when more work arrived
 * meanwhile (checked under the meeting lock, as ensureRepairJob checks for this job), with a
 * requeue so the same job runs again. After the commit, late audio of an ended meeting is deleted.
 */
async function settle(
  deps: MeetingDeps,
  ctx: JobContext,
  meetingId: string,
  commit: ((trx: Tx) => Promise<{ audioDeleted: boolean }>) | null,
): Promise<'done' | 'replanned'> {
  let audioDeleted = false;
  const body = async (trx: Tx): Promise<boolean> => {
    if (commit) audioDeleted = (await commit(trx)).audioDeleted;
    else await deps.meetings.lockIfExists(trx, meetingId);
    return hasRepairWork(trx, meetingId);
  };
  try {
    try {
      await ctx.complete(async (trx) => {
        if (await body(trx)) throw new RunAgain();
      });
    } catch (err) {
      if (!(err instanceof RunAgain)) throw err;
      await ctx.requeue(0, 'more late audio to place', async (trx) => {
        await body(trx);
      });
    }
  } catch (err) {
    if (!(err instanceof Replan)) throw err;
    await ctx.requeue(0, 'the timeline changed while repairing; planning again');
    return 'replanned';
  }
  if (audioDeleted) await deleteMeetingAudio(deps, meetingId);
  return 'done';
}
