import { MeetingStatus, MinutesStatus } from './status.ts';

/**
 * The close-out's decisions (L4, L5, L7, docs/close-out.md), as pure functions of what a run reads at
 * its start. The job (src/meetings/close-out.ts) reads, asks, and does what it is told; a run that
 * was reclaimed or requeued asks again and resumes at the first step not yet done.
 */

/** Extra time past the minutes wait cap before the close-out stops waiting for a minutes job that never ran. */
export const MINUTES_BACKSTOP_MARGIN_MS = 10 * 60 * 1000;

export type CloseOutStep =
  /** The meeting is no longer finalizing (completed, failed or deleted meanwhile): nothing to do. */
  | { step: 'nothing' }
  /** Steps (1)–(3): settle the windows, wait for those in retry, transcribe the last stretch. */
  | { step: 'settle-transcript' }
  /** Step (4): the transcript is published; its minutes are still being written. */
  | { step: 'wait-for-minutes' }
  /** Step (4), past the backstop: minutes that never settled are marked failed; then finish. */
  | { step: 'close-without-minutes' }
  /** Step (5): delete the audio and complete. */
  | { step: 'finish' };

export function closeOutStep(input: {
  status: string;
  transcriptPublished: boolean;
  minutesStatus: string | null;
  /** Since the transcript was published, by the database's clock. */
  minutesWaitedMs: number;
  minutesWaitCapMs: number;
}): CloseOutStep {
  if (input.status !== MeetingStatus.finalizing) return { step: 'nothing' };
  if (!input.transcriptPublished) return { step: 'settle-transcript' };
  if (input.minutesStatus === MinutesStatus.pending) {
    return input.minutesWaitedMs < input.minutesWaitCapMs + MINUTES_BACKSTOP_MARGIN_MS
      ? { step: 'wait-for-minutes' }
      : { step: 'close-without-minutes' };
  }
  return { step: 'finish' };
}

export type TranscriptWait =
  | { wait: true; reason: string }
  /** `capReached`: there was still something to wait for, but the wall-clock cap is spent. */
  | { wait: false; capReached: boolean };

/**
 * Step (2), L4/L5/L19: whether the close-out waits before transcribing what is left. Only windows
 * still being attempted and a repair of late audio in progress are worth waiting for, and only up
 * to the cap, counted from the first wait.
 */
export function transcriptWait(input: {
  windowsInRetry: number;
  repairing: boolean;
  waitedMs: number;
  waitCapMs: number;
}): TranscriptWait {
  if (input.windowsInRetry === 0 && !input.repairing) return { wait: false, capReached: false };
  if (input.waitedMs >= input.waitCapMs) return { wait: false, capReached: true };
  return {
    wait: true,
    reason:
      input.windowsInRetry === 0
        ? 'waiting for a repair of late audio'
        : `waiting for ${input.windowsInRetry} windows in retry`,
  };
}
