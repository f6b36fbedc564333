/**
 * L25: a meeting's second track (a tab's or the screen's audio) is kept in the outbox under a key
 * of its own, `<meetingId>~<track>~<offsetMs>`, so its chunks have their own sequence numbers,
 * drafts and End, with every guarantee the microphone's have. Its chunks go to the meeting with
 * `?track=&trackOffsetMs=`; its count goes with the meeting's End.
 */
export interface TrackKey {
  meetingId: string;
  track: string;
  offsetMs: number;
}

export function trackKey(meetingId: string, track: string, offsetMs: number): string {
  return `${meetingId}~${track}~${Math.max(0, Math.round(offsetMs))}`;
}

export function parseTrackKey(key: string): TrackKey | null {
  const m = /^([^~]+)~([a-z][a-z0-9-]{0,31})~(\d+)$/.exec(key);
  return m ? { meetingId: m[1]!, track: m[2]!, offsetMs: Number(m[3]) } : null;
}

/** Where a chunk stored under `key` is sent. */
export function chunkPath(key: string, seq: number): string {
  const t = parseTrackKey(key);
  if (!t) return `/v1/meetings/${key}/chunks/${seq}`;
  return `/v1/meetings/${t.meetingId}/chunks/${seq}?track=${t.track}&trackOffsetMs=${t.offsetMs}`;
}
