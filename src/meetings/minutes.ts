import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { AppError, ErrorKind, toErrorRecord, type ErrorRecord } from '../domain/errors.ts';
import { EventType, JobKind, MeetingStatus, MinutesStatus } from '../domain/status.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { Minutes } from '../ports.ts';
import { transcriptLines } from './transcript-read.ts';
import type { MeetingDeps } from './deps.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';
import { ClientCode } from '../domain/client-codes.ts';

/**
 * Writes a meeting's minutes. Quota or billing exhaustion is checked first (L9: some providers send
 * it as 429) and completes the meeting without minutes; an outside outage requeues every minute for
 * up to an hour without spending retries (L8); anything else is an ordinary error.
 */
export function writeMinutesJob(deps: MeetingDeps): JobDefinition<typeof JobKind.writeMinutes> {
  const { config } = deps;
  return {
    kind: JobKind.writeMinutes,
    run: async (ctx) => {
      const meetingId = payloadOf(ctx.job, JobKind.writeMinutes).meetingId;
      // One minutes job of a meeting sends its prompt at a time (V6: two workers would send one prompt,
      // the second inside the Retry-After the first had been given). A later job (a newer
      // revision, a request) reads the newer text, so an earlier one ends without writing; a later
      // one waits while an earlier one runs or waits out its own backoff, which ends it.
      const others = await deps.jobs.otherActiveJobs(ctx.job);
      const mine = ctx.job;
      const later = (o: (typeof others)[number]) =>
        o.created_at > mine.created_at ||
        (o.created_at.getTime() === mine.created_at.getTime() && o.id > mine.id);
      if (others.some(later)) {
        ctx.log.info({ meetingId }, 'a later minutes job of this meeting writes them; this one ends');
        await ctx.complete();
        return;
      }
      if (others.length > 0) {
        const until = Math.max(
          ...others.map((o) => (o.status === 'running' ? Date.now() + 1_000 : o.run_after.getTime())),
        );
        await ctx.requeue(
          Math.max(until - Date.now(), 0) + 250,
          'an earlier minutes job of this meeting is in progress',
        );
        return;
      }
      // The transcript and the revision it is at, read together: the minutes say which they describe.
      const { meeting, segments } = await deps.db
        .transaction()
        .setIsolationLevel('repeatable read')
        .setAccessMode('read only')
        .execute(async (trx) => ({
          meeting: await deps.meetings.byId(meetingId, trx),
          segments: await transcriptLines(trx, meetingId),
        }));
      const revision = meeting.transcript_revision;
      let minutes: Minutes;
      try {
        minutes = await deps.minutesWriter.write({
          title: meeting.title,
          language: meeting.language,
          segments,
          signal: ctx.signal,
        });
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        const error = toErrorRecord(err, 'llm');
        if (error.kind === ErrorKind.quotaExhausted) {
          ctx.log.warn(
            { meetingId, code: error.code },
            'minutes quota exhausted; completing without minutes',
          );
          await ctx.complete((trx) =>
            settleMinutes(deps, trx, meetingId, MinutesStatus.unavailable, error, null, ctx.actor, revision),
          );
          return;
        }
        if (error.kind === ErrorKind.transient) {
          const waited = Date.now() - ctx.job.created_at.getTime();
          if (waited < config.minutesWaitCapMs) {
            ctx.log.warn({ meetingId, code: error.code }, 'minutes model unavailable; trying again later');
            // The provider's Retry-After is honoured when it asks for longer (V6: a request sent
            // again inside it would exceed the provider's limit).
            const asked = err instanceof AppError ? (err.retryAfterSeconds ?? 0) * 1000 : 0;
            await ctx.requeue(Math.max(config.minutesRetryMs, asked), `minutes model outage: ${error.code}`);
            return;
          }
          const outage: ErrorRecord = {
            kind: ErrorKind.transient,
            code: 'llm.outage',
            message: `The minutes model was unavailable for over ${Math.round(config.minutesWaitCapMs / 60000)} minutes (${error.code}); use Regenerate later.`,
          };
          ctx.log.error({ meetingId, code: error.code }, 'minutes model outage outlasted the wait cap');
          await ctx.complete((trx) =>
            settleMinutes(deps, trx, meetingId, MinutesStatus.failed, outage, null, ctx.actor, revision),
          );
          return;
        }
        throw err;
      }
      await ctx.complete((trx) =>
        settleMinutes(deps, trx, meetingId, MinutesStatus.written, null, minutes, ctx.actor, revision),
      );
    },
    onTerminalFailure: async (trx, job, error) => {
      await settleMinutes(
        deps,
        trx,
        payloadOf(job, JobKind.writeMinutes).meetingId,
        MinutesStatus.failed,
        error,
        null,
        'worker',
      );
      return null;
    },
  };
}

/**
 * Records how the minutes ended and wakes the meeting's close-out if it is waiting on them. Minutes
 * that could not be rewritten (L8/L9) keep the ones written before, marked stale by their revision.
 */
async function settleMinutes(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  status: MinutesStatus,
  error: ErrorRecord | null,
  minutes: Minutes | null,
  actor: string,
  revision: number | null = null,
): Promise<void> {
  // Lock order everywhere: job rows before the meeting row.
  const closeOut = await deps.jobs.lockPendingJob(trx, meetingId, JobKind.closeOutMeeting);
  const meeting = await deps.meetings.lock(trx, meetingId);
  await deps.meetings.setMinutes(trx, meetingId, { status, error, minutes, revision: revision ?? 0 });
  await recordAudit(trx, {
    workspaceId: meeting.workspace_id,
    subjectType: 'meeting',
    subjectId: meetingId,
    from: `minutes:${meeting.minutes_status}`,
    to: `minutes:${status}`,
    actor,
    reason: error ? `${error.code}: ${error.message}` : null,
  });
  if (status === MinutesStatus.written) {
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.minutesReady,
      subjectId: meetingId,
      // The transcript revision they were written from: a receiver can tell minutes of a revised
      // transcript from a second copy of the same ones.
      payload: { minutes, revision: revision ?? 0 },
    });
  }
  if (meeting.status === MeetingStatus.finalizing && closeOut) {
    await deps.jobs.wakeJob(trx, closeOut.id, actor, `minutes ${status}`);
  }
}

/**
 * O2, L19: the minutes consumer of meeting.transcribed and meeting.transcript_revised, idempotent
 * on (meeting, event) through the dedupe key. An event about a revision older than the meeting's
 * is skipped: the newer event asks for the same minutes. A newer one supersedes minutes still
 * being written for an older transcript (J13), so they are written once, from the final text.
 */
export async function onTranscriptEvent(
  deps: MeetingDeps,
  event: { workspaceId: string; meetingId: string; eventId: string; revision: number },
): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    // A meeting deleted since the event was written needs no minutes.
    const meeting = await deps.meetings.findById(event.meetingId, trx);
    if (!meeting || !meeting.transcript_completed_at || event.revision < meeting.transcript_revision) return;
    if (event.revision > 0) {
      await deps.jobs.supersedeActiveJobs(trx, event.meetingId, JobKind.writeMinutes, 'consumer:minutes');
    }
    // The meeting row serializes this with a resubmit or a Regenerate asking for minutes at the
    // same time (job rows before the meeting row, as everywhere); read after the supersede, which
    // waits on a job committing now.
    const locked = await deps.meetings.lockIfExists(trx, event.meetingId);
    if (!locked) return; // deleted since the read above
    // Minutes already written from this revision or a later one need no second copy: a job made
    // for an older event that read the newer text, or a Regenerate, got there first (V5: one
    // minutes.ready per revision).
    if (
      locked.minutes_status === MinutesStatus.written &&
      locked.minutes_revision !== null &&
      locked.minutes_revision >= event.revision
    ) {
      return;
    }
    // For the first revision, a minutes job already waiting or running (a resubmit's, a
    // Regenerate's) reads the transcript when it runs, so it writes these very minutes.
    if (event.revision === 0 && (await deps.jobs.hasActiveJob(trx, event.meetingId, JobKind.writeMinutes)))
      return;
    await createMinutesJob(deps, trx, event.workspaceId, event.meetingId, event.eventId, 'consumer:minutes');
  });
}

/** The user's Regenerate: supersedes any active minutes job (J13) and starts a new one. */
export async function regenerateMinutes(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
): Promise<void> {
  const actor = `user:${workspaceId}`;
  await deps.db.transaction().execute(async (trx) => {
    const meeting = await deps.meetings.get(workspaceId, meetingId, trx);
    if (!meeting.transcript_completed_at) {
      throw new AppError(
        ErrorKind.conflict,
        ClientCode.minutesNoTranscript,
        'the meeting has no finished transcript yet',
      );
    }
    // Job rows before the meeting row, as everywhere else.
    await deps.jobs.supersedeActiveJobs(trx, meetingId, JobKind.writeMinutes, actor);
    await deps.meetings.lock(trx, meetingId);
    await deps.meetings.askForMinutes(trx, meetingId);
    await createMinutesJob(deps, trx, workspaceId, meetingId, `regenerate:${randomUUID()}`, actor);
  });
}

/**
 * A write-minutes job, once per `reason` (an event id, a Regenerate, a resubmission): the dedupe
 * key makes a redelivered reason a no-op.
 */
export async function createMinutesJob(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  reason: string,
  actor: string,
): Promise<void> {
  await createJob(
    deps,
    trx,
    JobKind.writeMinutes,
    { meetingId },
    { workspaceId, dedupeVariant: reason },
    actor,
  );
}
