import { withTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { MeetingSource } from '../domain/status.ts';
import { SAMPLE_RATE } from '../domain/timeline.ts';
import { playbackDaysOf, setPlaybackDays, uploadPlaybackSources } from './audio-retention-rows.ts';
import type { MeetingDeps } from './deps.ts';
import { loadStretch, type ChunkSource } from './timeline-rows.ts';
import { stretchAudio } from './window-audio.ts';

/** E4: at most this much audio per request (a player asks for the next stretch as it plays). */
export const MAX_PLAYBACK_MS = 5 * 60_000;
export const MAX_PLAYBACK_DAYS = 365;

/**
 * E4: [fromMs, toMs) of a completed meeting's audio as a 16 kHz WAV, while its workspace keeps it
 * for playback. 410 `audio.not_kept` otherwise, saying why.
 */
export async function playbackAudio(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  fromMs: number,
  toMs: number,
): Promise<Buffer> {
  const { sources, from, to } = await withTenant(deps.db, workspaceId, async (trx) => {
    const meeting = await deps.meetings.get(workspaceId, meetingId, trx);
    if (!meeting.playback_until || meeting.playback_until <= new Date()) {
      const days = await playbackDaysOf(trx, workspaceId);
      throw new AppError(
        ErrorKind.gone,
        'audio.not_kept',
        meeting.playback_until
          ? `this meeting's audio was kept for playback until ${meeting.playback_until.toISOString()} and has been deleted`
          : days === 0
            ? 'this workspace keeps no audio once a meeting is transcribed (an admin can set days to keep it for playback)'
            : 'audio is kept for playback once a meeting is complete; this one is not, or was completed before the workspace kept audio',
      );
    }
    const end = Math.min(toMs, meeting.duration_ms ?? toMs);
    const from = Math.round((fromMs * SAMPLE_RATE) / 1000);
    const to = Math.max(from, Math.round((end * SAMPLE_RATE) / 1000));
    const sources: ChunkSource[] =
      meeting.source === MeetingSource.live
        ? (await loadStretch(trx, meeting.id, from, to)).sources
        : await uploadPlaybackSources(trx, meeting.id, from, to);
    return { sources, from, to };
  });
  if (sources.some((s) => s.deleted && s.start < to && s.start + s.length > from))
    throw new AppError(ErrorKind.gone, 'audio.not_kept', 'part of this stretch’s audio has been deleted');
  return stretchAudio(deps, sources, from, to);
}

export async function getPlaybackDays(deps: MeetingDeps, workspaceId: string): Promise<number> {
  return withTenant(deps.db, workspaceId, (trx) => playbackDaysOf(trx, workspaceId));
}

/** E4: how long meetings completed from now on keep their audio for playback (0: deleted at once). */
export async function changePlaybackDays(
  deps: MeetingDeps,
  workspaceId: string,
  days: number,
): Promise<void> {
  await withTenant(deps.db, workspaceId, (trx) => setPlaybackDays(trx, workspaceId, days));
}
