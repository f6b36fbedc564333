import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NOT_AUDIO_MESSAGE, SNIFF_BYTES, sniffAudioContainer } from '../domain/audio-sniff.ts';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { WindowCutter, type CutWindow } from '../domain/audio-windows.ts';
import { ChannelBuffer, gateByDominance } from '../domain/channels.ts';
import { SpeakerSource } from '../domain/speakers.ts';
import { ensureSpeakers } from './speaker-store.ts';
import { SAMPLE_RATE } from '../domain/timeline.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { ClientCode } from '../domain/client-codes.ts';
import { durationFromHead, windowBytesFor } from '../domain/decoded-size.ts';
import { JobKind, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { encodeWav } from '../domain/wav.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import { deleteMeetingAudio, failMeetingInTx } from './audio-lifecycle.ts';
import type { MeetingDeps } from './deps.ts';
import { startCloseOutIfSettled } from './close-out-start.ts';
import { cutWindows, recordWindow } from './window-rows.ts';
import { liveBlobOf } from '../storage/blob-rows.ts';
import { createTranscribeJob } from './transcribe-job.ts';
import {
  assertRoom,
  releaseReservation,
  reserveRoom,
  compensate,
  referenceStaged,
  stageAndPut,
  stageAndPutStream,
  type StagedObject,
} from '../storage/objects.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';

/** B11: at most this many channels of an upload are speakers (a multitrack export); ffmpeg mixes more into these. */
export const MAX_SPEAKER_CHANNELS = 8;

/** B11: a channel's speaker key (channel 1 is the first). */
export function channelKey(index: number): string {
  return `channel:${index + 1}`;
}

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

/** E5: an upload that does not begin like any accepted container is refused before it is answered. */
function refuseNonAudio(head: Buffer): AppError | null {
  if (sniffAudioContainer(head) !== null) return null;
  return new AppError(ErrorKind.unsupportedMedia, 'recording.not_audio', NOT_AUDIO_MESSAGE);
}

/**
 * F1: the quota refusal of a recording whose head says how long it is, when its windows (16 kHz
 * mono, one set per channel for channel speakers) would not fit; null when they fit or the head
 * does not say (the split then admits each window as it cuts it).
 */
async function refuseOverQuota(
  deps: MeetingDeps,
  workspaceId: string,
  head: Buffer,
  totalBytes: number | null,
  perChannel: boolean,
  plan: { windows: { bytes: number; what: string } | null },
): Promise<AppError | null> {
  if (deps.config.workspaceQuotaBytes === 0 && deps.config.globalQuotaBytes === 0) return null;
  const duration = durationFromHead(head, totalBytes);
  if (!duration) return null;
  const bytes = windowBytesFor(duration, perChannel);
  const minutes = Math.max(1, Math.round(duration.seconds / 60));
  const what = `this recording holds about ${minutes} minute${minutes === 1 ? '' : 's'} of audio, which becomes ${bytes} bytes of windows to transcribe (kept, like the recording itself, until its transcript is complete); that`;
  try {
    await assertRoom(deps, workspaceId, bytes, what);
    // Reserved when the recording is accepted (storeRecording), so that uploads after it are
    // admitted against its windows before the split has stored them.
    plan.windows = { bytes, what };
    return null;
  } catch (err) {
    if (err instanceof AppError && err.code === ClientCode.storageQuotaExceeded) return err;
    throw err;
  }
}

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

/** F2: what a refused upload is told to wait before it tries again. */
const UPLOAD_BUSY_RETRY_SECONDS = 5;

/** B10: an upload's body as it arrives, with the size its client announced (Content-Length). */
export interface UploadBody {
  stream: Readable;
  declaredBytes: number | null;
  /** The error for a body past the upload limit (413, worded by the API). */
  tooLarge: () => AppError;
  /** F2: at most this many of the workspace's uploads stream in at once (API uploads; not a bot's import). */
  uploadsPerWorkspace?: number;
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
  data: Buffer | UploadBody,
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
  // F1: a recording whose windows would not fit the quota is refused before it is kept.
  const perChannel = meeting.channels === 'speakers';
  const plan: { windows: { bytes: number; what: string } | null } = { windows: null };
  const overQuota = (head: Buffer, totalBytes: number | null) =>
    refuseOverQuota(deps, workspaceId, head, totalBytes, perChannel, plan);
  if (Buffer.isBuffer(data)) {
    const refused = await overQuota(data.subarray(0, SNIFF_BYTES), data.length);
    if (refused) throw refused;
  }
  const staged = Buffer.isBuffer(data)
    ? await stageAndPut(deps, { workspaceId, meetingId, kind: 'recording', data, admit: true })
    : await stageAndPutStream(deps, {
        workspaceId,
        meetingId,
        kind: 'recording',
        source: data.stream,
        declaredBytes: data.declaredBytes,
        maxBytes: deps.config.maxUploadBytes,
        admit: true,
        empty: () => new AppError(ErrorKind.invalidInput, 'recording.empty', 'the recording is empty'),
        tooLarge: data.tooLarge,
        head: {
          bytes: SNIFF_BYTES,
          check: async (head) => refuseNonAudio(head) ?? (await overQuota(head, data.declaredBytes)),
        },
        inFlight:
          data.uploadsPerWorkspace === undefined
            ? undefined
            : {
                max: data.uploadsPerWorkspace,
                refused: () =>
                  new AppError(
                    ErrorKind.quotaExhausted,
                    'upload.too_many',
                    `this workspace is already uploading ${data.uploadsPerWorkspace} recordings at once (VERBATIM_UPLOADS_PER_WORKSPACE); send this one when one of them has arrived`,
                    { retryAfterSeconds: UPLOAD_BUSY_RETRY_SECONDS },
                  ),
              },
      });
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
      // F1: its windows' bytes are set aside now, admitted against everything stored and reserved
      // since its head was judged (two uploads at once cannot both take the last room).
      if (plan.windows)
        await reserveRoom(deps.config, trx, workspaceId, meetingId, plan.windows.bytes, plan.windows.what);
      await deps.checkpoints.hit('recording.referenced', {});
      const updated = await deps.meetings.transition(
        trx,
        locked,
        'startProcessing',
        `user:${workspaceId}`,
        'recording stored',
      );
      await createJob(
        deps,
        trx,
        JobKind.splitRecording,
        { meetingId },
        { workspaceId },
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

/**
 * Decodes the recording, cuts it into windows at quiet points (L18), and queues one job per window.
 *
 * J19: the recording is decoded as a stream and each window is committed with its job as soon as its
 * boundary is decided, so memory does not grow with the recording's length and transcription starts
 * while the rest is still being decoded. A run that dies (a killed worker, a lost lease) leaves its
 * committed windows; the next run decodes again, skips the audio they hold, and cuts the rest with
 * the same boundaries (a boundary depends only on its own slot's audio). The last window commits
 * with the meeting's duration and `windows_cut_at`, which the close-out waits for.
 */
export function splitRecordingJob(deps: MeetingDeps): JobDefinition<typeof JobKind.splitRecording> {
  return {
    kind: JobKind.splitRecording,
    run: async (ctx) => {
      const meetingId = payloadOf(ctx.job, JobKind.splitRecording).meetingId;
      const recording = await liveBlobOf(deps.db, meetingId, 'recording');
      const meeting = await deps.meetings.byId(meetingId);
      if (meeting.status !== MeetingStatus.processing || !recording || meeting.windows_cut_at !== null) {
        await ctx.complete();
        return;
      }
      const dir = await mkdtemp(join(tmpdir(), 'verbatim-split-'));
      try {
        const input = join(dir, 'recording');
        await deps.checkpoints.hit('storage.get', { meetingId });
        await pipeline(
          await deps.blobs.getStream(recording.object_key),
          createWriteStream(input, { mode: 0o600 }),
        );
        // B11: an upload whose channels are its speakers is cut once, on the mix, and each cut
        // window becomes one window per channel (index × channels + channel), each channel
        // silenced where another dominates (the bleed is transcribed once). A file with one
        // channel has unknown speakers, like any other.
        const channels =
          meeting.channels === 'speakers'
            ? Math.min(MAX_SPEAKER_CHANNELS, await deps.decoder.channelsOf(input, ctx.signal))
            : 1;
        const cut = await cutWindows(deps.db, meetingId);
        cut.forEach((w, i) => {
          if (w.index !== i)
            throw new AppError(ErrorKind.permanent, 'split.windows_inconsistent', `window ${i} is missing`);
        });
        if (cut.length % channels !== 0)
          throw new AppError(
            ErrorKind.permanent,
            'split.windows_inconsistent',
            `${cut.length} windows are not a whole number of cuts of ${channels} channels`,
          );
        // Boundaries fall on whole milliseconds (100 ms frames, centred), so end_ms is exact.
        const resume = {
          index: cut.length / channels,
          startSample: ((cut.at(-1)?.end_ms ?? 0) * SAMPLE_RATE) / 1000,
        };
        if (cut.length > 0)
          ctx.log.info({ meetingId, windows: cut.length }, 'split resumes after its committed windows');
        const keep = channels > 1 ? new ChannelBuffer(channels, resume.startSample) : null;

        const { stage, record } = splitWindows(deps, meeting, channels, keep, ctx.actor);
        // Canceled or deleted while this split ran: nothing more is added; the window's object goes.
        const stillProcessing = async (trx: Tx) =>
          (await deps.meetings.lockIfExists(trx, meetingId))?.status === MeetingStatus.processing;

        const cutter = new WindowCutter(
          SAMPLE_RATE,
          meeting.window_ms / 1000,
          { searchSeconds: deps.config.boundarySearchMs / 1000 },
          resume,
        );
        for await (const piece of deps.decoder.decodeFile(input, ctx.signal, channels)) {
          for (const w of cutter.push(keep ? keep.push(piece) : piece)) {
            const audio = await stage(w);
            try {
              const added = await ctx.fenced(async (trx) => {
                if (!(await stillProcessing(trx))) return false;
                await record(trx, w, audio);
                return true;
              });
              if (!added) {
                await compensate(
                  deps,
                  audio,
                  new AppError(
                    ErrorKind.conflict,
                    'meeting.not_processing',
                    'the meeting ended during the split',
                  ),
                );
                await ctx.complete();
                return;
              }
            } catch (err) {
              await compensate(deps, audio, err);
              throw err;
            }
            await deps.checkpoints.hit('split.window-committed', { windowIndex: w.index });
          }
        }
        const last = cutter.finish();
        const audio = last ? await stage(last) : [];
        let abandoned = false;
        try {
          await ctx.complete(async (trx) => {
            if (!(await stillProcessing(trx))) {
              abandoned = true;
              return;
            }
            if (last) await record(trx, last, audio);
            await deps.meetings.recordSplitFinished(
              trx,
              meetingId,
              Math.round((cutter.decodedSamples * 1000) / SAMPLE_RATE),
            );
            // F1: what is left of its reservation (an estimate from the recording's head) is given back.
            await releaseReservation(trx, meetingId);
            // Every earlier window may be settled already: then this split was the last thing the
            // close-out waited for.
            if (!last) await startCloseOutIfSettled(deps, trx, meetingId, ctx.actor);
          });
        } catch (err) {
          await compensate(deps, audio, err);
          throw err;
        }
        if (abandoned && audio.length > 0) {
          await compensate(
            deps,
            audio,
            new AppError(ErrorKind.conflict, 'meeting.not_processing', 'the meeting ended during the split'),
          );
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    onTerminalFailure: async (trx, job, error) => {
      const meetingId = payloadOf(job, JobKind.splitRecording).meetingId;
      // J19: the windows cut before the failure have jobs of their own; the meeting fails, so
      // they end with it rather than transcribe for a meeting that will never publish.
      await deps.jobs.cancelMeetingJobs(trx, [meetingId], 'worker', `split failed: ${error.code}`);
      const failed = await failMeetingInTx(deps, trx, meetingId, error, `worker`);
      return failed ? () => deleteMeetingAudio(deps, meetingId) : null;
    },
  };
}

/**
 * How the split stores and records a cut window: its audio as one object, or (B11) one per
 * channel, each silenced where another channel dominates; and its window rows with their
 * transcription jobs, in the caller's transaction.
 */
function splitWindows(
  deps: MeetingDeps,
  meeting: MeetingRow,
  channels: number,
  keep: ChannelBuffer | null,
  actor: string,
): {
  stage: (w: CutWindow) => Promise<StagedObject[]>;
  record: (trx: Tx, w: CutWindow, audios: StagedObject[]) => Promise<void>;
} {
  const meetingId = meeting.id;
  const stage = async (w: CutWindow): Promise<StagedObject[]> => {
    const pieces = keep ? gateByDominance(keep.take(w.startSample, w.endSample), SAMPLE_RATE) : [w.samples];
    const staged: StagedObject[] = [];
    try {
      for (const [c, samples] of pieces.entries())
        staged.push(
          await stageAndPut(deps, {
            workspaceId: meeting.workspace_id,
            meetingId,
            kind: keep ? `window-${w.index}-channel-${c + 1}` : `window-${w.index}`,
            data: encodeWav(samples, SAMPLE_RATE),
            // F1: each window is admitted against the quotas, spending the meeting's reservation
            // (made when its recording was accepted, when its head said how long it is): one that
            // does not fit fails the split (and the meeting, with the quota's reason), so a
            // workspace never holds more than its quota and one window.
            admit: { meetingId, mode: 'spend' },
          }),
        );
    } catch (err) {
      await compensate(deps, staged, err);
      throw err;
    }
    return staged;
  };
  const record = async (trx: Tx, w: CutWindow, audios: StagedObject[]) => {
    if (keep)
      await ensureSpeakers(
        trx,
        meeting,
        audios.map((_, c) => ({
          key: channelKey(c),
          source: SpeakerSource.channel,
          label: `Channel ${c + 1}`,
        })),
      );
    for (const [c, audio] of audios.entries()) {
      const index = w.index * channels + c;
      const windowId = await recordWindow(trx, {
        workspaceId: meeting.workspace_id,
        meetingId,
        index,
        startMs: Math.round((w.startSample * 1000) / SAMPLE_RATE),
        endMs: Math.round((w.endSample * 1000) / SAMPLE_RATE),
        audio,
        speakerKey: keep ? channelKey(c) : null,
      });
      await createTranscribeJob(deps, trx, meeting.workspace_id, meetingId, windowId, index, actor);
    }
  };
  return { stage, record };
}
