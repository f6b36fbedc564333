import type { Db, WindowRow } from '../db/schema.ts';
import { SpeakerSource } from '../domain/speakers.ts';
import { encodeWav, parseWav } from '../domain/wav.ts';
import type { TranscriptSegment } from '../ports.ts';
import type { MeetingDeps } from './deps.ts';
import { countSpeakers, ensureSpeakers, saveSpeakerReference, speakerReferences } from './speaker-store.ts';

/** W3: at most this many speakers' clips go with a request (the API's limit), each at most this long. */
const KNOWN_SPEAKERS = 4;
const REFERENCE_MS = 10_000;
const REFERENCE_MIN_MS = 1_500;

/** W3: the speakers a diarizing recogniser is told this meeting has heard, named by their ids. */
export async function knownSpeakersOf(
  db: Db,
  meetingId: string,
): Promise<Array<{ name: string; wav: Buffer }>> {
  return (await speakerReferences(db, meetingId, KNOWN_SPEAKERS)).map((r) => ({
    name: r.id,
    wav: r.reference,
  }));
}

/**
 * W3: a diarizing recogniser's clusters as the meeting's speakers. A cluster named by a speaker the
 * request was told of (reference clips) is that speaker. Any other is new: a speaker of its own,
 * keyed by this window (a server that diarizes each request apart numbers its clusters afresh, so
 * "SPEAKER_00" of two windows need not be one person: never merged by guess). With reference clips,
 * a clip of the new speaker's longest stretch is kept for the next windows.
 */
export async function clusterSpeakers(
  deps: MeetingDeps,
  window: Pick<WindowRow, 'id' | 'meeting_id'>,
  segments: TranscriptSegment[],
  wav: Buffer,
  identity: 'window' | 'references',
): Promise<Map<string, string>> {
  const clusters = [...new Set(segments.flatMap((s) => (s.cluster === undefined ? [] : [s.cluster])))];
  const keys = new Map<string, string>();
  if (clusters.length === 0) return keys;
  return deps.db.transaction().execute(async (trx) => {
    const meeting = await deps.meetings.lock(trx, window.meeting_id);
    const known = new Map(
      identity === 'references'
        ? (await speakerReferences(trx, meeting.id, KNOWN_SPEAKERS)).map((r) => [r.id, r.key])
        : [],
    );
    const fresh = clusters.filter((c) => !known.has(c));
    let n = await countSpeakers(trx, meeting.id, SpeakerSource.recogniser);
    const keyOf = (c: string) => clusterKey(identity, window.id, c);
    const made = fresh.map((c) => ({
      key: keyOf(c),
      source: SpeakerSource.recogniser,
      label: `Speaker ${++n}`,
    }));
    const rows = await ensureSpeakers(trx, meeting, made);
    for (const c of clusters) keys.set(c, known.get(c) ?? keyOf(c));
    if (identity === 'references') {
      const audio = parseWav(wav);
      for (const c of fresh) {
        const speaker = rows.get(keyOf(c));
        const clip = audio ? referenceClip(audio.samples, audio.sampleRate, segments, c) : null;
        if (speaker && clip) await saveSpeakerReference(trx, speaker.id, clip);
      }
    }
    return keys;
  });
}

/**
 * A new cluster's key: `cluster:w:` when the recogniser's speakers hold only within one request
 * (the API says the same person may be several speakers), `cluster:r:` when reference clips carry
 * them from window to window.
 */
export function clusterKey(identity: 'window' | 'references', windowId: string, cluster: string): string {
  return `cluster:${identity === 'window' ? 'w' : 'r'}:${windowId}:${cluster}`;
}

/** The cluster's longest stretch of the window (at most REFERENCE_MS), as a WAV; null when too short. */
function referenceClip(
  samples: Int16Array,
  sampleRate: number,
  segments: TranscriptSegment[],
  cluster: string,
): Buffer | null {
  const longest = segments
    .filter((s) => s.cluster === cluster)
    .sort((a, b) => b.endMs - b.startMs - (a.endMs - a.startMs))[0];
  if (!longest || longest.endMs - longest.startMs < REFERENCE_MIN_MS) return null;
  const from = Math.floor((longest.startMs / 1000) * sampleRate);
  const to = Math.min(
    samples.length,
    from + Math.floor((REFERENCE_MS / 1000) * sampleRate),
    Math.ceil((longest.endMs / 1000) * sampleRate),
  );
  return to > from ? encodeWav(samples.slice(from, to), sampleRate) : null;
}
