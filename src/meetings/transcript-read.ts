import type { Executor } from '../db/schema.ts';
import { attributeSegments, nameSpeakers, type TranscriptLine } from '../domain/speakers.ts';
import { speakersOf, spokenSegmentsOf, turnsOf } from './speaker-store.ts';

/**
 * W1/W2: a meeting's transcript as people read it: its segments in order, each with its speaker
 * where a source knows it (its own track, channel or cluster, else the speaker timeline), named
 * and merged as people did. Attribution happens on reading, so a timeline imported after the
 * words, a repair that re-cut them and a rename all show at once, with nothing rewritten.
 */
export async function transcriptLines(
  db: Executor,
  meetingId: string,
  range?: { fromMs: number; toMs: number },
): Promise<TranscriptLine[]> {
  const [segments, turns, speakers] = await Promise.all([
    spokenSegmentsOf(db, meetingId, range),
    turnsOf(db, meetingId),
    speakersOf(db, meetingId),
  ]);
  return nameSpeakers(attributeSegments(segments, turns), speakers);
}
