import type { MeetingRow, Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { ClientCode } from '../domain/client-codes.ts';
import { EventType, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { SpeakerSource } from '../domain/speakers.ts';
import { MAX_TRACKS, PRIMARY_TRACK, trackLabel, trackSpeakerKey } from '../domain/tracks.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { beginCloseOut } from './close-out-start.ts';
import type { MeetingDeps } from './deps.ts';
import { ensureSpeakers } from './speaker-store.ts';
import { insertTrack, reviseParentRow, trackByName, tracksOf } from './track-rows.ts';

/**
 * L25: a live meeting's tracks (src/domain/tracks.ts). A track other than the microphone is a live
 * meeting under the parent, made by the first chunk or End that names it, so a client that was
 * offline needs no other request to have been kept; End on the parent ends every track; the
 * parent's close-out publishes once every track has published (or failed); a track's words that
 * change after the parent published revise the parent's transcript.
 */

export interface TrackRef {
  track: string;
  /** Where the track's sample 0 falls on the meeting's timeline. */
  offsetMs: number;
}

/** The meeting a chunk of `ref` is stored in: the meeting itself for the microphone. */
export async function trackMeetingId(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  ref: TrackRef | null,
): Promise<string> {
  if (!ref || ref.track === PRIMARY_TRACK) return meetingId;
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    await deps.meetings.get(workspaceId, meetingId, trx);
    const parent = await deps.meetings.lock(trx, meetingId);
    if (parent.source !== MeetingSource.live || parent.parent_id !== null) {
      throw new AppError(
        ErrorKind.conflict,
        ClientCode.meetingNotLive,
        parent.parent_id !== null
          ? `meeting ${meetingId} is a track; send its chunks to its meeting ${parent.parent_id} with track=${parent.track}`
          : `meeting ${meetingId} is a ${parent.source} meeting; only a live meeting has tracks`,
      );
    }
    const existing = await trackByName(trx, meetingId, ref.track);
    if (existing) {
      if (existing.track_offset_ms !== ref.offsetMs) {
        throw new AppError(
          ErrorKind.conflict,
          'track.offset_conflict',
          `track ${ref.track} starts at ${existing.track_offset_ms} ms; this request said ${ref.offsetMs} ms`,
        );
      }
      return existing.id;
    }
    const tracks = await tracksOf(trx, meetingId);
    if (tracks.length + 1 >= MAX_TRACKS) {
      throw new AppError(
        ErrorKind.conflict,
        'track.too_many',
        `a meeting has at most ${MAX_TRACKS} tracks (the microphone and ${MAX_TRACKS - 1} more)`,
      );
    }
    const endedAt = parent.completed_at ?? parent.failed_at;
    if (endedAt && Date.now() - endedAt.getTime() > deps.config.lateAudioMs) {
      throw new AppError(
        ErrorKind.gone,
        'chunk.too_late',
        `meeting ${meetingId} ended on ${endedAt.toISOString()}; a new track is not taken after the late-audio bound`,
      );
    }
    const child = await insertTrack(trx, parent, ref.track, ref.offsetMs, actor);
    await ensureSpeakers(
      trx,
      parent,
      [PRIMARY_TRACK, ref.track].map((t) => ({
        key: trackSpeakerKey(t),
        source: SpeakerSource.track,
        label: trackLabel(t),
      })),
    );
    if (parent.status !== MeetingStatus.created && parent.status !== MeetingStatus.recording) {
      // Its meeting was ended before this track's first chunk: the track is ended as it is made,
      // its close-out waiting out the grace for the rest of its chunks.
      await beginCloseOut(deps, trx, child, actor, 'its meeting had ended', deps.config.closeoutGraceMs);
    }
    return child.id;
  });
}

/**
 * L25: what End does to the tracks: each declared one is made if no chunk made it yet and ended
 * with its count; every other track is ended without one. Ending an ended track changes nothing.
 */
export async function endTracks(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  declared: Array<{ track: string; offsetMs: number | null; chunks: number | null }>,
  end: (meetingId: string, chunks: number | null) => Promise<MeetingRow>,
): Promise<void> {
  const named = new Set<string>();
  for (const d of declared) {
    if (d.track === PRIMARY_TRACK) continue;
    named.add(d.track);
    const existing = (await tracksOf(deps.db, meetingId)).find((t) => t.track === d.track);
    const ref = { track: d.track, offsetMs: d.offsetMs ?? existing?.offsetMs ?? 0 };
    await end(await trackMeetingId(deps, workspaceId, meetingId, ref), d.chunks);
  }
  for (const t of await tracksOf(deps.db, meetingId)) {
    if (named.has(t.track)) continue;
    if (t.status === MeetingStatus.created || t.status === MeetingStatus.recording) await end(t.id, null);
  }
}

/**
 * L25: how many of the meeting's tracks have not published their transcript yet (a failed one
 * counts as settled). A track still recording while its meeting closes out (End did not reach
 * it: a process died between the two) is ended here with the grace, as End would have.
 */
export async function tracksStillOpen(deps: MeetingDeps, meetingId: string, actor: string): Promise<number> {
  let open = 0;
  for (const t of await tracksOf(deps.db, meetingId)) {
    if (t.status === MeetingStatus.created || t.status === MeetingStatus.recording) {
      await deps.db.transaction().execute(async (trx) => {
        const track = await deps.meetings.lock(trx, t.id);
        if (track.status !== MeetingStatus.created && track.status !== MeetingStatus.recording) return;
        await beginCloseOut(
          deps,
          trx,
          track,
          actor,
          'its meeting is closing out',
          deps.config.closeoutGraceMs,
        );
      });
    }
    if (!t.transcriptPublished && t.status !== MeetingStatus.failed) open++;
  }
  return open;
}

/**
 * L25: a track's words changed after its meeting published its transcript (late audio, a window
 * transcribed late, the track itself publishing late): the meeting's transcript has a new
 * revision and `meeting.transcript_revised` says so. Nothing while the meeting has not published.
 */
export async function reviseParent(
  trx: Tx,
  track: Pick<MeetingRow, 'parent_id' | 'track'>,
  payload: Record<string, unknown>,
): Promise<void> {
  if (!track.parent_id) return;
  const parent = await reviseParentRow(trx, track.parent_id);
  if (!parent) return;
  await emitEvent(trx, {
    workspaceId: parent.workspace_id,
    type: EventType.meetingTranscriptRevised,
    subjectId: parent.id,
    payload: { ...payload, meetingId: parent.id, revision: parent.transcript_revision, track: track.track },
  });
}
