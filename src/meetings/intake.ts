import { createHash, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { planWindows } from '../domain/audio-windows.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { encodeWav } from '../domain/wav.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import { deleteMeetingAudio, failMeetingInTx } from './audio-lifecycle.ts';
import type { MeetingDeps } from './deps.ts';
import { recordWindow } from './window-rows.ts';
import { compensate, referenceStaged, stageAndPut, type StagedObject } from '../storage/objects.ts';

/** Upload content types we decode, by the media type a client sends. */
export const ACCEPTED_AUDIO_TYPES = [
  'audio/wav',
  'audio/x-wav',
  'audio/wave',
  'audio/mpeg',
  'audio/mp3',
  'audio/mp4',
  'audio/x-m4a',
  'audio/m4a',
  'audio/aac',
  'audio/webm',
  'video/webm',
  'audio/ogg',
  'audio/opus',
  'audio/flac',
] as const;

export function isAcceptedAudioType(contentType: string | undefined): boolean {
  const base = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return (ACCEPTED_AUDIO_TYPES as readonly string[]).includes(base);
}

/** B1: identity is server-generated — content digest plus a random id — so equal bytes never share an object. */
export function blobKey(
  workspaceId: string,
  meetingId: string,
  kind: string,
  data: Buffer,
): { key: string; sha256: string } {
  const sha256 = createHash('sha256').update(data).digest('hex');
  return { key: `${workspaceId}/${meetingId}/${kind}-${sha256}-${randomUUID()}`, sha256 };
}

/**
 * Stores an uploaded recording and commits the meeting's move to processing together with the job
 * that splits it into windows. The caller answers 202 once this returns, even if the job's delivery
 * failed to enqueue (J10): the rescue sweep re-drives it.
 */
export async function storeRecording(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  data: Buffer,
  contentType: string,
): Promise<MeetingRow> {
  const meeting = await deps.meetings.get(workspaceId, meetingId);
  // A bot's recording arrives the same way as an upload (R7).
  if (meeting.source !== MeetingSource.upload && meeting.source !== MeetingSource.bot) {
    throw new AppError(
      ErrorKind.conflict,
      'meeting.not_upload',
      `meeting ${meetingId} is a ${meeting.source} meeting`,
    );
  }
  if (meeting.status !== MeetingStatus.created) {
    throw new AppError(
      ErrorKind.conflict,
      'recording.already_stored',
      `meeting ${meetingId} already has a recording`,
    );
  }
  const staged = await stageAndPut(deps, { workspaceId, meetingId, kind: 'recording', data, admit: true });
  try {
    await deps.checkpoints.hit('recording.processing', {});
    return await deps.db.transaction().execute(async (trx) => {
      const locked = await deps.meetings.lock(trx, meetingId);
      if (locked.status !== MeetingStatus.created) {
        throw new AppError(
          ErrorKind.conflict,
          'recording.already_stored',
          `meeting ${meetingId} already has a recording`,
        );
      }
      await referenceStaged(trx, staged, { kind: 'recording', contentType });
      await deps.checkpoints.hit('recording.referenced', {});
      const updated = await deps.meetings.transition(
        trx,
        locked,
        'startProcessing',
        `user:${workspaceId}`,
        'recording stored',
      );
      await deps.jobs.createJob(
        trx,
        {
          workspaceId,
          kind: JobKind.splitRecording,
          subjectType: 'meeting',
          subjectId: meetingId,
          meetingId,
          payload: { meetingId },
          maxErrors: deps.config.transcribeMaxErrors,
          maxReclaims: deps.config.maxReclaims,
          dedupeKey: `split-recording:${meetingId}`,
        },
        `user:${workspaceId}`,
      );
      return updated;
    });
  } catch (err) {
    // B3: a COMMIT whose answer was lost may have succeeded; compensation only touches an object
    // whose staged row is still there, i.e. one that nothing references.
    await compensate(deps, [staged], err);
    throw err;
  }
}

/** Decodes the recording, cuts it into windows at quiet points (L18), and queues one job per window. */
export function splitRecordingJob(deps: MeetingDeps): JobDefinition {
  return {
    kind: JobKind.splitRecording,
    run: async (ctx) => {
      const meetingId = String(ctx.job.payload.meetingId);
      const recording = await deps.db
        .selectFrom('blobs')
        .selectAll()
        .where('meeting_id', '=', meetingId)
        .where('kind', '=', 'recording')
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      const meeting = await deps.db
        .selectFrom('meetings')
        .selectAll()
        .where('id', '=', meetingId)
        .executeTakeFirstOrThrow();
      if (meeting.status !== MeetingStatus.processing || !recording) {
        await ctx.complete();
        return;
      }
      await deps.checkpoints.hit('storage.get', { meetingId });
      const data = await deps.blobs.get(recording.object_key);
      const audio = await deps.decoder.decode(data, ctx.signal);
      const planned = planWindows(audio.samples, audio.sampleRate, meeting.window_ms / 1000, {
        searchSeconds: deps.config.boundarySearchMs / 1000,
      });
      if (planned.length === 0) {
        throw new AppError(ErrorKind.permanent, 'audio.undecodable', 'the recording contains no audio');
      }
      const windows: Array<{ index: number; audio: StagedObject; startMs: number; endMs: number }> = [];
      let abandoned = false;
      const commitWindows = () =>
        ctx.complete(async (trx) => {
          const locked = await deps.meetings.lock(trx, meetingId);
          // Canceled or deleted while this split ran: nothing to add; the windows' objects go.
          if (locked.status !== MeetingStatus.processing) {
            abandoned = true;
            return;
          }
          for (const w of windows) {
            const windowId = await recordWindow(trx, {
              workspaceId: meeting.workspace_id,
              meetingId,
              index: w.index,
              startMs: w.startMs,
              endMs: w.endMs,
              audio: w.audio,
            });
            await createTranscribeJob(
              deps,
              trx,
              meeting.workspace_id,
              meetingId,
              windowId,
              w.index,
              ctx.actor,
            );
          }
          await trx
            .updateTable('meetings')
            .set({
              duration_ms: Math.round((audio.samples.length * 1000) / audio.sampleRate),
              updated_at: sql<Date>`now()`,
            })
            .where('id', '=', meetingId)
            .execute();
        });
      try {
        for (const w of planned) {
          const wav = encodeWav(audio.samples.subarray(w.startSample, w.endSample), audio.sampleRate);
          windows.push({
            index: w.index,
            audio: await stageAndPut(deps, {
              workspaceId: meeting.workspace_id,
              meetingId,
              kind: `window-${w.index}`,
              data: wav,
              admit: false,
            }),
            startMs: Math.round((w.startSample * 1000) / audio.sampleRate),
            endMs: Math.round((w.endSample * 1000) / audio.sampleRate),
          });
        }
        await commitWindows();
        if (abandoned) {
          await compensate(
            deps,
            windows.map((w) => w.audio),
            new AppError(ErrorKind.conflict, 'meeting.not_processing', 'the meeting ended during the split'),
          );
        }
      } catch (err) {
        await compensate(
          deps,
          windows.map((w) => w.audio),
          err,
        );
        throw err;
      }
    },
    onTerminalFailure: async (trx, job, error) => {
      const meetingId = String(job.payload.meetingId);
      const failed = await failMeetingInTx(deps, trx, meetingId, error, `worker`);
      return failed ? () => deleteMeetingAudio(deps, meetingId) : null;
    },
  };
}

export async function createTranscribeJob(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  windowId: string,
  windowIndex: number,
  actor: string,
): Promise<void> {
  await deps.jobs.createJob(
    trx,
    {
      workspaceId,
      kind: JobKind.transcribeWindow,
      subjectType: 'window',
      subjectId: windowId,
      meetingId,
      payload: { meetingId, windowId, windowIndex },
      maxErrors: deps.config.transcribeMaxErrors,
      maxReclaims: deps.config.maxReclaims,
    },
    actor,
  );
}
