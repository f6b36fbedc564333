import type { Executor } from '../db/schema.ts';
import { applyCorrections, CORRECTION_DRIFT_MS, type CorrectedLine } from '../domain/corrections.ts';
import { formatSegments, type Formatted } from '../domain/readable-text.ts';
import { attributeSegments, nameSpeakers, type TranscriptLine } from '../domain/speakers.ts';
import { correctionsOf, vocabularyOfMeeting } from './correction-store.ts';
import { dropEchoes, PRIMARY_TRACK, trackSpeakerKey, type TrackWords } from '../domain/tracks.ts';
import { speakersOf, spokenSegmentsOf, turnsOf } from './speaker-store.ts';
import { energySpans, tracksOf } from './track-rows.ts';

/**
 * W1/W2: a meeting's transcript as people read it: its segments in order, each with its speaker
 * where a source knows it (its own track, channel or cluster, else the speaker timeline), named
 * and merged as people did. Attribution happens on reading, so a timeline imported after the
 * words, a repair that re-cut them and a rename all show at once, with nothing rewritten.
 * L25: a meeting with tracks reads every track's words onto its timeline, each track its own
 * speaker, a word another track dominates left out as that track's echo (src/domain/tracks.ts).
 * E2: a recogniser's text without case or punctuation is formatted into sentences (the raw text
 * goes beside it); E3: a person's corrections are applied last. Search, exports, minutes and ask
 * all read the transcript here, so all of them read the corrected words.
 */
export type ReadLine = CorrectedLine<Formatted<TranscriptLine>>;

export async function transcriptLines(
  db: Executor,
  meetingId: string,
  range?: { fromMs: number; toMs: number },
): Promise<ReadLine[]> {
  const [lines, vocabulary, corrections] = await Promise.all([
    attributedLines(db, meetingId, range),
    vocabularyOfMeeting(db, meetingId),
    // A correction follows its line as far as a repair may move it.
    correctionsOf(
      db,
      meetingId,
      range && { fromMs: range.fromMs - CORRECTION_DRIFT_MS, toMs: range.toMs + CORRECTION_DRIFT_MS },
    ),
  ]);
  return applyCorrections(formatSegments(lines, vocabulary), corrections);
}

async function attributedLines(
  db: Executor,
  meetingId: string,
  range?: { fromMs: number; toMs: number },
): Promise<TranscriptLine[]> {
  const [tracks, turns, speakers] = await Promise.all([
    tracksOf(db, meetingId),
    turnsOf(db, meetingId),
    speakersOf(db, meetingId),
  ]);
  if (tracks.length === 0) {
    const segments = await spokenSegmentsOf(db, meetingId, range);
    return nameSpeakers(attributeSegments(segments, turns), speakers);
  }
  const all = [{ id: meetingId, track: PRIMARY_TRACK, offsetMs: 0 }, ...tracks];
  const words: TrackWords[] = await Promise.all(
    all.map(async (t) => {
      const own = range ? { fromMs: range.fromMs - t.offsetMs, toMs: range.toMs - t.offsetMs } : undefined;
      const [segments, spans] = await Promise.all([
        spokenSegmentsOf(db, t.id, own),
        energySpans(db, t.id, t.offsetMs, range),
      ]);
      const key = trackSpeakerKey(t.track);
      return {
        track: t.track,
        spans,
        segments: segments.map((s) => ({
          ...s,
          startMs: s.startMs + t.offsetMs,
          endMs: s.endMs + t.offsetMs,
          speakerKey: s.speakerKey ?? key,
          words:
            s.words?.map((w) => ({ ...w, startMs: w.startMs + t.offsetMs, endMs: w.endMs + t.offsetMs })) ??
            null,
        })),
      };
    }),
  );
  return nameSpeakers(attributeSegments(dropEchoes(words).segments, turns), speakers);
}
