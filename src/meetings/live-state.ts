import { closedTimeline } from '../domain/timeline.ts';
import type { Executor, MeetingRow } from '../db/schema.ts';
import { MeetingSource } from '../domain/status.ts';
import { liveStateCounts, missingChunks } from './timeline-rows.ts';

/** What a person needs to know about a live meeting's audio that is not (yet) in the transcript. */
export interface LiveState {
  /** Sequence numbers that never arrived (at most 1000 listed) and how many there are. */
  missing: { seqs: number[]; count: number };
  /** Chunks stored ahead of one that has not arrived yet: they wait for it, or for the patience. */
  waiting: number;
  /** Chunks that arrived after the timeline went past their place, or after the close-out. */
  late: number;
  /** A repair (src/meetings/repair.ts) is queued or running. */
  repairing: boolean;
}

export const NO_LIVE_STATE: LiveState = {
  missing: { seqs: [], count: 0 },
  waiting: 0,
  late: 0,
  repairing: false,
};

/** Index reads only: the cost follows the chunks waiting or late, not the meeting's length. */
export async function liveState(db: Executor, m: MeetingRow): Promise<LiveState> {
  if (m.source !== MeetingSource.live) return NO_LIVE_STATE;
  const closed = closedTimeline(m);
  const r = await liveStateCounts(db, m, closed);
  return {
    missing: await missingChunks(db, m),
    waiting: closed ? 0 : r.waiting,
    late: r.arrived + r.tail + (closed ? r.waiting : 0),
    repairing: r.repairing,
  };
}
