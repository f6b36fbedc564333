import type { WindowRow } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { SAMPLE_RATE } from '../domain/timeline.ts';
import { encodeWav, parseWav } from '../domain/wav.ts';
import type { MeetingDeps } from './deps.ts';
import { loadWindowStretch, type ChunkSource } from './timeline-rows.ts';

/**
 * The audio of [from, to) of a live meeting's timeline, assembled from the chunks that hold it;
 * stretches with no audio (reserved gaps) are silence. Blob reads happen here, outside any lock.
 */
export async function stretchAudio(
  deps: MeetingDeps,
  sources: ChunkSource[],
  from: number,
  to: number,
): Promise<Buffer> {
  const out = new Int16Array(Math.max(0, to - from));
  for (const s of sources) {
    const start = Math.max(s.start, from);
    const stop = Math.min(s.start + s.length, to);
    if (stop <= start) continue;
    if (s.deleted) {
      throw new AppError(
        ErrorKind.permanent,
        'audio.deleted',
        `the audio of chunk ${s.seq} was already deleted`,
      );
    }
    if (!s.objectKey) continue;
    const audio = parseWav(await deps.blobs.get(s.objectKey));
    if (!audio)
      throw new AppError(ErrorKind.permanent, 'chunk.corrupt', `stored chunk ${s.seq} is not a WAV file`);
    out.set(audio.samples.subarray(start - s.start, stop - s.start), start - from);
  }
  return encodeWav(out, SAMPLE_RATE);
}

/** A live window's audio, from the chunks its snapshot found under it (blob reads after the snapshot). */
export async function liveWindowAudio(
  deps: MeetingDeps,
  windowId: string,
): Promise<{ window: WindowRow; wav: Buffer }> {
  const { window, sources } = await loadWindowStretch(deps.db, windowId);
  return {
    window,
    wav: await stretchAudio(deps, sources, Number(window.start_samples), Number(window.end_samples)),
  };
}
