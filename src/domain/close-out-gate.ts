import { MeetingSource, MeetingStatus } from './status.ts';

/**
 * What the close-out gate looks at, read under the meeting's lock (verbatim_close_out_gate, migration
 * 0035). Only `status` is read for a meeting that is not processing.
 */
export interface CloseOutGateFacts {
  status: MeetingStatus;
  source?: MeetingSource;
  /** An upload's or a bot's split has cut its last window (windows_cut_at). */
  windowsCut?: boolean;
  /** A split-recording job of the meeting is pending or running. */
  splitActive?: boolean;
  /** A pending window is being attempted: a job works on it, and it is not held (J20). */
  inFlight?: boolean;
  /** A window is pending at all: in flight, or held on its isolated backoff. */
  pending?: boolean;
}

export type CloseOutGateVerdict =
  | { start: false; because: 'not processing' | 'windows still being cut' | 'a window is in flight' }
  | { start: true; reason: 'every window settled' | 'every window settled or held' };

/**
 * J5/J19/J20: whether a processing meeting may move to finalizing and get its close-out job. It
 * waits while an upload's or a bot's split is still cutting windows (J19: a window not cut yet is
 * not settled), and while any window is being attempted; a held window (isolated, on its slow
 * backoff) does not hold it back: the meeting completes with the gap shown and the held window's
 * words revise it when they come (J20, L19). The reason is the audit row's.
 */
export function decideCloseOutStart(facts: CloseOutGateFacts): CloseOutGateVerdict {
  if (facts.status !== MeetingStatus.processing) return { start: false, because: 'not processing' };
  const splits = facts.source === MeetingSource.upload || facts.source === MeetingSource.bot;
  if (splits && facts.windowsCut !== true && facts.splitActive === true) {
    return { start: false, because: 'windows still being cut' };
  }
  if (facts.inFlight === true) return { start: false, because: 'a window is in flight' };
  return {
    start: true,
    reason: facts.pending === true ? 'every window settled or held' : 'every window settled',
  };
}
