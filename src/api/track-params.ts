import { AppError, ErrorKind } from '../domain/errors.ts';
import { isTrackName, MAX_TRACKS, PRIMARY_TRACK } from '../domain/tracks.ts';
import type { TrackRef } from '../meetings/tracks.ts';

/** Eleven days in ms: the longest a track may start after its meeting (MAX_SEQ chunks of 5 s). */
const MAX_OFFSET_MS = 11 * 86_400_000;

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}

function offsetOf(value: unknown, where: string): number {
  const n = typeof value === 'string' && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > MAX_OFFSET_MS) {
    throw invalid(
      'track.offset',
      `${where} must be where the track starts on the meeting's timeline, in whole milliseconds from 0 to ${MAX_OFFSET_MS}`,
    );
  }
  return n;
}

function nameOf(value: unknown): string {
  if (typeof value !== 'string' || !isTrackName(value)) {
    throw invalid(
      'track.name',
      `a track is named by 1 to 32 lowercase letters, digits and dashes, starting with a letter ("${PRIMARY_TRACK}" is the meeting's own; "tab" a browser tab's audio)`,
    );
  }
  return value;
}

/** L25: a chunk's `track` and `trackOffsetMs`; null for the meeting's own (microphone) track. */
export function chunkTrack(query: { track?: unknown; trackOffsetMs?: unknown }): TrackRef | null {
  if (query.track === undefined || query.track === '') return null;
  const track = nameOf(query.track);
  if (track === PRIMARY_TRACK) return null;
  if (query.trackOffsetMs === undefined) {
    throw invalid('track.offset', `a chunk of track ${track} says where the track starts: trackOffsetMs`);
  }
  return { track, offsetMs: offsetOf(query.trackOffsetMs, 'trackOffsetMs') };
}

/** L25: End's `tracks`, `{"tab": {"chunks": 12, "offsetMs": 0}}`: each track's count and start. */
export function endTracksOf(
  body: unknown,
): Array<{ track: string; offsetMs: number | null; chunks: number | null }> {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) return [];
  const tracks = (body as Record<string, unknown>).tracks;
  if (tracks === undefined || tracks === null) return [];
  if (typeof tracks !== 'object' || Array.isArray(tracks)) {
    throw invalid('end.tracks', 'tracks must be an object such as {"tab": {"chunks": 12, "offsetMs": 0}}');
  }
  const entries = Object.entries(tracks as Record<string, unknown>);
  if (entries.length >= MAX_TRACKS) {
    throw invalid('end.tracks', `a meeting has at most ${MAX_TRACKS - 1} tracks beside its own`);
  }
  return entries.map(([name, value]) => {
    const track = nameOf(name);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw invalid('end.tracks', `tracks.${track} must be an object such as {"chunks": 12, "offsetMs": 0}`);
    }
    const v = value as Record<string, unknown>;
    const chunks = v.chunks;
    if (
      chunks !== undefined &&
      chunks !== null &&
      (typeof chunks !== 'number' || !Number.isInteger(chunks) || chunks < 0)
    ) {
      throw invalid('end.chunks', `tracks.${track}.chunks must be the number of chunks the track recorded`);
    }
    return {
      track,
      // Without one, a track that exists keeps its own; a new one starts with the meeting.
      offsetMs:
        v.offsetMs === undefined || v.offsetMs === null
          ? null
          : offsetOf(v.offsetMs, `tracks.${track}.offsetMs`),
      chunks: typeof chunks === 'number' ? chunks : null,
    };
  });
}
