import type { Tx, WindowRow, WordTimes } from '../db/schema.ts';
import { AppError, ErrorKind, toErrorRecord, type ErrorRecord } from '../domain/errors.ts';
import { mayPass } from '../domain/retry-policy.ts';
import { JobKind, WindowStatus } from '../domain/status.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { TranscriptSegment } from '../ports.ts';
import type { MeetingDeps } from './deps.ts';
import { liveWindowAudio } from './window-audio.ts';
import { clusterSpeakers, knownSpeakersOf } from './cluster-speakers.ts';
import {
  commitWindowSegments,
  completeWindowAttemptStatement,
  loadWindowSource,
  markWindowFailed,
  windowById,
  type SegmentRow,
  type WindowSource,
} from './window-rows.ts';
import { publishLateWindow, publishSettledLateWindows } from './late-windows.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';
import { startCloseOutAfterCommit, startCloseOutIfSettled } from './close-out-start.ts';

/** One window: read its audio, recognise it, and commit its segments under the attempt's fence. */
export function transcribeWindowJob(deps: MeetingDeps): JobDefinition<typeof JobKind.transcribeWindow> {
  return {
    kind: JobKind.transcribeWindow,
    run: async (ctx) => {
      const source = await loadWindowSource(deps.db, payloadOf(ctx.job, JobKind.transcribeWindow).windowId);
      if (source.window.status !== WindowStatus.pending) {
        // J15: a settled window is never redone.
        await ctx.complete();
        return;
      }
      const { segments, clusterKeys } = await recogniseSource(deps, source, ctx.signal);
      await deps.checkpoints.hit('transcribe-window.before-commit', { windowIndex: source.window.index });
      const rows = segmentRows(source.window, segments, source.window.speaker_key, clusterKeys);
      // J5 in one statement: fence, window and segments, completion, and the close-out gate's facts.
      // The statement runs alone (autocommit): the meeting's lock, which the facts are read under,
      // is held for that statement only, so a meeting's windows commit one after another without
      // waiting on a decision made in this process. When the facts say every window is settled,
      // the close-out starts in a transaction of its own (a live meeting is never processing).
      let lateWindow = false;
      await ctx.completeWith(async (handle) => {
        const [result] = await deps.jobs.runFencedStatementAlone(handle, (ids) =>
          completeWindowAttemptStatement(ids, ctx.actor, rows),
        );
        lateWindow = result?.facts?.lateWindow === true;
        // The window is committed and the attempt complete whatever happens next: a start that
        // fails here is the sweep's (startLostCloseOuts), not a failure of this attempt.
        await startCloseOutAfterCommit(
          deps,
          source.window.meeting_id,
          ctx.actor,
          result?.facts ?? null,
        ).catch((err: unknown) => {
          ctx.log.warn(
            { meetingId: source.window.meeting_id, err: String(err) },
            'close-out not started after the last window; the sweep starts it',
          );
        });
      });
      // L19: a window that settles after its transcript was published revises it (the sweep does
      // this for a process that dies before it). The commit said whether it was marked.
      if (!lateWindow) return;
      await publishLateWindow(deps, source.window.meeting_id, ctx.actor).catch((err: unknown) => {
        ctx.log.warn({ windowId: source.window.id, err: String(err) }, 'late window not published yet');
      });
    },
    onTerminalFailure: async (trx, job, error) => {
      const windowId = payloadOf(job, JobKind.transcribeWindow).windowId;
      const window = await windowById(trx, windowId);
      await deps.meetings.lock(trx, window.meeting_id);
      await markWindowFailed(trx, window, error, 'worker');
      await startCloseOutIfSettled(deps, trx, window.meeting_id, 'worker');
      await publishSettledLateWindows(deps, trx, window.meeting_id, 'worker');
      return null;
    },
  };
}

/** What a window's recognition gave: its segments, and (W3) the speaker key of each cluster in them. */
export interface Recognised {
  segments: TranscriptSegment[];
  clusterKeys: Map<string, string>;
}

async function recogniseSource(
  deps: MeetingDeps,
  source: WindowSource,
  signal: AbortSignal,
): Promise<Recognised> {
  let wav: Buffer;
  if (!source.window.blob_id && source.window.start_samples !== null) {
    // A live window reads its audio from the chunks under it.
    await deps.checkpoints.hit('storage.get', { windowIndex: source.window.index });
    wav = (await liveWindowAudio(deps, source.window.id)).wav;
  } else {
    if (!source.objectKey)
      throw new AppError(ErrorKind.permanent, 'audio.missing', 'window has no stored audio');
    if (source.deletedAt)
      throw new AppError(ErrorKind.permanent, 'audio.deleted', 'window audio was already deleted');
    await deps.checkpoints.hit('storage.get', { windowIndex: source.window.index });
    wav = await deps.blobs.get(source.objectKey);
  }
  return recogniseAudio(deps, source.window, wav, {
    language: source.language,
    vocabulary: source.vocabulary,
    signal,
  });
}

/**
 * A stretch of a meeting's audio recognised, and (W3) its recogniser clusters made the meeting's
 * speakers: a diarizing recogniser that takes reference clips is told who the meeting has heard.
 * `window` names the stretch (its id keys clusters that hold only within one request); a repair
 * gives the id of a window it is about to make.
 */
export async function recogniseAudio(
  deps: MeetingDeps,
  window: { id: string; meeting_id: string },
  wav: Buffer,
  opts: { language: string | null; vocabulary?: string[]; signal: AbortSignal },
): Promise<Recognised> {
  const identity = deps.transcriber.speakerIdentity;
  const knownSpeakers =
    identity === 'references' ? await knownSpeakersOf(deps.db, window.meeting_id) : undefined;
  const segments = await deps.transcriber.transcribe({
    wav,
    language: opts.language,
    signal: opts.signal,
    ...(opts.vocabulary ? { vocabulary: opts.vocabulary } : {}),
    ...(knownSpeakers ? { knownSpeakers } : {}),
  });
  const clusterKeys =
    identity && segments.some((s) => s.cluster !== undefined)
      ? await clusterSpeakers(deps, window, segments, wav, identity)
      : new Map<string, string>();
  return { segments, clusterKeys };
}

export async function recogniseWindow(
  deps: MeetingDeps,
  window: WindowRow,
  signal: AbortSignal,
): Promise<Recognised> {
  return recogniseSource(deps, await loadWindowSource(deps.db, window.id), signal);
}

/**
 * Segment rows relative to the window's start (the commit makes them absolute from the window as
 * it stands then: a repair may move it meanwhile), numbered, empty ones dropped, each kept inside
 * its window so windows never overlap (L18).
 */
export function segmentRows(
  window: { start_ms: number; end_ms: number },
  segments: TranscriptSegment[],
  /** W1: the speaker every segment of this window's audio is (its track's or channel's). */
  speakerKey?: string | null,
  /** W3: the speaker key of each recogniser cluster (a segment of another cluster has none). */
  clusterKeys?: Map<string, string>,
): SegmentRow[] {
  const length = window.end_ms - window.start_ms;
  return segments
    .filter((s) => s.text.trim().length > 0)
    .map((s, seq) => {
      const start = Math.min(length, Math.max(0, Math.round(s.startMs)));
      const end = Math.min(length, Math.max(start, Math.round(s.endMs)));
      return {
        seq,
        start_ms: start,
        end_ms: end,
        text: s.text.trim(),
        speaker_key: speakerKey ?? (s.cluster !== undefined ? (clusterKeys?.get(s.cluster) ?? null) : null),
        words: wordTimes(s, start, end),
      };
    });
}

/** W2: a segment's word times relative to its (clamped) start, kept inside it; null without any. */
function wordTimes(s: TranscriptSegment, start: number, end: number): WordTimes | null {
  const words = (s.words ?? []).filter((w) => w.text.trim() !== '');
  if (words.length === 0) return null;
  const within = (ms: number) => Math.min(end, Math.max(start, Math.round(ms))) - start;
  return words.map((w) => [within(w.startMs), Math.max(within(w.startMs), within(w.endMs)), w.text.trim()]);
}

/**
 * J5/J15: the window's segments and its compare-and-swap to transcribed commit once; a window that
 * is no longer pending keeps what it has. Times become absolute on the meeting's timeline, and each
 * segment is kept inside its window so windows never overlap (L18).
 */
export async function commitWindowTranscript(
  trx: Tx,
  window: WindowRow,
  recognised: Recognised,
  actor: string,
): Promise<boolean> {
  return commitWindowSegments(
    trx,
    window.id,
    segmentRows(window, recognised.segments, window.speaker_key, recognised.clusterKeys),
    actor,
  );
}

/**
 * L4 step 1 and step 3: a window nobody is working on (its job never registered, or it is the last
 * stretch) is transcribed inside the close-out. If that fails, only the window is marked failed
 * (L6) and close-out goes on.
 */
/**
 * The speech provider failed on a window the close-out transcribes itself with an error that may
 * pass (an outage, a rate limit, a quota): the close-out waits it out like any window's job (up to
 * its kind's outage waits) instead of failing the window at the first try.
 */
export class LastStretchOutage extends Error {
  constructor(
    readonly error: ErrorRecord,
    /** The provider's Retry-After, honoured as a thrown outage's is. */
    readonly retryAfterSeconds?: number,
  ) {
    super(`${error.code}: ${error.message}`);
  }
}

export async function transcribeDirectly(
  deps: MeetingDeps,
  window: WindowRow,
  signal: AbortSignal,
  actor: string,
  fenced: <T>(fn: (trx: Tx) => Promise<T>) => Promise<T>,
  /** Once the close-out has waited out its outages, a passing failure no longer waits here (L6). */
  failPassing = true,
): Promise<void> {
  let segments: Recognised;
  try {
    await deps.checkpoints.hit('close-out-meeting.transcribe-directly', { windowIndex: window.index });
    segments = await recogniseWindow(deps, window, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    const error = toErrorRecord(err, 'asr');
    if (!failPassing && (error.kind === ErrorKind.transient || error.kind === ErrorKind.quotaExhausted))
      throw new LastStretchOutage(error, err instanceof AppError ? err.retryAfterSeconds : undefined);
    if (mayPass(error)) {
      // J20: a window that may still be transcribed is not given up here (an unclassified error,
      // or outages past the close-out's patience): it gets a job of its own, with its own error
      // budget and then the isolated lane, and the close-out goes on. Its words revise the
      // transcript if they come after its publication (L19); its audio is held meanwhile.
      deps.log.warn(
        { windowId: window.id, code: error.code },
        'close-out could not transcribe a window; it goes on in a job of its own',
      );
      await fenced(async (trx) => {
        await deps.meetings.lock(trx, window.meeting_id);
        // Not before the provider's Retry-After, if it gave one.
        await createJob(
          deps,
          trx,
          JobKind.transcribeWindow,
          { meetingId: window.meeting_id, windowId: window.id, windowIndex: window.index },
          {
            workspaceId: window.workspace_id,
            delayMs: (err instanceof AppError ? (err.retryAfterSeconds ?? 0) : 0) * 1000,
          },
          actor,
        );
      });
      return;
    }
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
  await fenced((trx) => commitWindowTranscript(trx, window, segments, actor));
}
