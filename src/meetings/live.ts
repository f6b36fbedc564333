import { createHash, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { planWindows, quietBoundary } from '../domain/audio-windows.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { encodeWav, parseWav } from '../domain/wav.ts';
import type { MeetingDeps } from './deps.ts';
import { recordWindow, type StoredWindowAudio } from './window-rows.ts';
import { blobKey, createTranscribeJob } from './intake.ts';

const SAMPLE_RATE = 16_000;
const MAX_SEQ = 1_000_000;

export interface StoredChunk {
  meeting: MeetingRow;
  /** False when the same chunk had already been stored (L1: idempotent on meeting and seq). */
  created: boolean;
}

/**
 * L1: stores one live chunk durably on arrival, once per (meeting, seq), and cuts every window slot
 * that the contiguous audio now fills (L2), each with its transcription job, in the same
 * transaction. Chunks may arrive out of order; a window waits for the chunks before it.
 */
export async function storeChunk(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  seqText: string,
  data: Buffer,
): Promise<StoredChunk> {
  const seq = Number(seqText);
  if (!Number.isInteger(seq) || seq < 0 || seq > MAX_SEQ) {
    throw new AppError(
      ErrorKind.invalidInput,
      'chunk.seq',
      `seq must be a whole number from 0 to ${MAX_SEQ}`,
    );
  }
  const meeting = await deps.meetings.get(workspaceId, meetingId);
  assertRecording(meeting);
  const audio = parseWav(data);
  if (!audio || audio.sampleRate !== SAMPLE_RATE) {
    throw new AppError(
      ErrorKind.unsupportedMedia,
      'chunk.bad_format',
      'a chunk must be a 16 kHz mono 16-bit PCM WAV file (audio/wav)',
    );
  }
  const sha256 = createHash('sha256').update(data).digest('hex');
  const duplicate = await sameChunk(deps, meetingId, seq, sha256);
  if (duplicate) return { meeting, created: false };

  const { key } = blobKey(workspaceId, meetingId, `chunk-${seq}`, data);
  await deps.blobs.put(key, data);
  try {
    return await deps.db.transaction().execute(async (trx) => {
      let locked = await deps.meetings.lock(trx, meetingId);
      assertRecording(locked);
      const blobId = randomUUID();
      await trx
        .insertInto('blobs')
        .values({
          id: blobId,
          workspace_id: workspaceId,
          meeting_id: meetingId,
          kind: 'chunk',
          object_key: key,
          sha256,
          size_bytes: data.length,
          content_type: 'audio/wav',
        })
        .execute();
      const inserted = await trx
        .insertInto('chunks')
        .values({
          id: randomUUID(),
          workspace_id: workspaceId,
          meeting_id: meetingId,
          seq,
          blob_id: blobId,
          sha256,
          samples: audio.samples.length,
        })
        .onConflict((oc) => oc.columns(['meeting_id', 'seq']).doNothing())
        .returning('id')
        .executeTakeFirst();
      if (!inserted) throw new ChunkRace();
      if (locked.status === MeetingStatus.created) {
        locked = await deps.meetings.transition(
          trx,
          locked,
          'startRecording',
          `user:${workspaceId}`,
          'first chunk',
        );
      }
      await cutFilledWindows(deps, trx, locked, `user:${workspaceId}`);
      return { meeting: locked, created: true };
    });
  } catch (err) {
    await deps.blobs.delete(key).catch(() => undefined);
    if (err instanceof ChunkRace) {
      if (await sameChunk(deps, meetingId, seq, sha256)) return { meeting, created: false };
    }
    throw err;
  }
}

class ChunkRace extends Error {}

async function sameChunk(
  deps: MeetingDeps,
  meetingId: string,
  seq: number,
  sha256: string,
): Promise<boolean> {
  const existing = await deps.db
    .selectFrom('chunks')
    .select('sha256')
    .where('meeting_id', '=', meetingId)
    .where('seq', '=', seq)
    .executeTakeFirst();
  if (!existing) return false;
  if (existing.sha256 !== sha256) {
    throw new AppError(
      ErrorKind.conflict,
      'chunk.conflict',
      `chunk ${seq} was already stored with other bytes`,
    );
  }
  return true;
}

function assertRecording(meeting: MeetingRow): void {
  if (meeting.source !== MeetingSource.live) {
    throw new AppError(
      ErrorKind.conflict,
      'meeting.not_live',
      `meeting ${meeting.id} is a ${meeting.source} meeting`,
    );
  }
  if (meeting.status !== MeetingStatus.created && meeting.status !== MeetingStatus.recording) {
    throw new AppError(
      ErrorKind.conflict,
      'meeting.not_recording',
      `meeting ${meeting.id} is ${meeting.status}`,
    );
  }
}

/** L3: "End meeting" — finalizing now, close-out after the grace period for the last chunks. */
export async function endMeeting(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
): Promise<MeetingRow> {
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    await deps.meetings.get(workspaceId, meetingId, trx);
    const meeting = await deps.meetings.lock(trx, meetingId);
    if (meeting.source !== MeetingSource.live) {
      throw new AppError(
        ErrorKind.conflict,
        'meeting.not_live',
        `meeting ${meetingId} is a ${meeting.source} meeting`,
      );
    }
    if (meeting.status !== MeetingStatus.created && meeting.status !== MeetingStatus.recording)
      return meeting;
    const ended = await deps.meetings.transition(trx, meeting, 'startFinalizing', actor, 'meeting ended');
    await deps.jobs.createJob(
      trx,
      {
        workspaceId,
        kind: JobKind.closeOutMeeting,
        subjectType: 'meeting',
        subjectId: meetingId,
        meetingId,
        payload: { meetingId },
        maxErrors: deps.config.closeoutMaxErrors,
        maxReclaims: deps.config.closeoutMaxReclaims,
        delayMs: deps.config.closeoutGraceMs,
        dedupeKey: `close-out:${meetingId}`,
      },
      actor,
    );
    return ended;
  });
}

interface PlacedChunk {
  seq: number;
  start: number;
  samples: number;
  blobId: string | null;
}

async function loadChunks(trx: Tx, meetingId: string) {
  return trx
    .selectFrom('chunks')
    .select(['seq', 'samples', 'blob_id'])
    .where('meeting_id', '=', meetingId)
    .orderBy('seq')
    .execute();
}

/**
 * Cuts each window slot that the contiguous audio from the start now covers. Slot k ends at
 * (k + 1) × window on the meeting's timeline; its boundary moves back to the quietest stretch of the
 * last few seconds (L18), and the next window starts exactly there.
 */
async function cutFilledWindows(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  actor: string,
): Promise<void> {
  const placed: PlacedChunk[] = [];
  let end = 0;
  for (const [i, c] of (await loadChunks(trx, meeting.id)).entries()) {
    if (c.seq !== i) break;
    placed.push({ seq: c.seq, start: end, samples: c.samples, blobId: c.blob_id });
    end += c.samples;
  }
  const slot = Math.round((meeting.window_ms / 1000) * SAMPLE_RATE);
  let index = await windowCount(trx, meeting.id);
  let cut = Number(meeting.cut_samples);
  while ((index + 1) * slot <= end) {
    const nominal = (index + 1) * slot;
    const pcm = await readTimeline(deps, trx, placed, cut, nominal);
    const boundary =
      cut + quietBoundary(pcm, nominal - cut, SAMPLE_RATE, deps.config.boundarySearchMs / 1000, 0);
    await insertWindow(
      deps,
      trx,
      meeting,
      index,
      cut,
      boundary,
      pcm.subarray(0, boundary - cut),
      actor,
      true,
    );
    cut = boundary;
    index++;
  }
  if (cut !== Number(meeting.cut_samples)) {
    await trx.updateTable('meetings').set({ cut_samples: cut }).where('id', '=', meeting.id).execute();
  }
}

/**
 * L4 step 3: at close-out, the stretch after the last window — and anything after a chunk that never
 * arrived — becomes windows without jobs, which the close-out transcribes directly. A missing chunk
 * counts as silence of the nominal chunk length and is reported; a window with no audio at all is
 * left without a blob, so it settles as missing.
 */
export async function cutRemainder(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
): Promise<void> {
  const meeting = await deps.meetings.lock(trx, meetingId);
  const chunks = await loadChunks(trx, meetingId);
  const nominal = Math.round((deps.config.chunkMs / 1000) * SAMPLE_RATE);
  const placed: PlacedChunk[] = [];
  const missing: number[] = [];
  let end = 0;
  let next = 0;
  for (const c of chunks) {
    for (; next < c.seq; next++) {
      missing.push(next);
      placed.push({ seq: next, start: end, samples: nominal, blobId: null });
      end += nominal;
    }
    placed.push({ seq: c.seq, start: end, samples: c.samples, blobId: c.blob_id });
    end += c.samples;
    next = c.seq + 1;
  }
  const cut = Number(meeting.cut_samples);
  if (end > cut) {
    const pcm = await readTimeline(deps, trx, placed, cut, end);
    const planned = planWindows(pcm, SAMPLE_RATE, meeting.window_ms / 1000, {
      searchSeconds: deps.config.boundarySearchMs / 1000,
    });
    let index = await windowCount(trx, meetingId);
    for (const w of planned) {
      const from = cut + w.startSample;
      const to = cut + w.endSample;
      const heard = placed.some((p) => p.blobId !== null && p.start < to && p.start + p.samples > from);
      const samples = heard ? pcm.subarray(w.startSample, w.endSample) : null;
      await insertWindow(deps, trx, meeting, index++, from, to, samples, actor, false);
    }
  }
  await trx
    .updateTable('meetings')
    .set({ cut_samples: Math.max(end, cut), missing_chunks: missing })
    .where('id', '=', meetingId)
    .execute();
}

async function windowCount(trx: Tx, meetingId: string): Promise<number> {
  const row = await trx
    .selectFrom('windows')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('meeting_id', '=', meetingId)
    .executeTakeFirstOrThrow();
  return row.n;
}

/** The meeting's audio from `from` to `to` (samples), silence where a chunk is missing. */
async function readTimeline(
  deps: MeetingDeps,
  trx: Tx,
  placed: PlacedChunk[],
  from: number,
  to: number,
): Promise<Int16Array> {
  const out = new Int16Array(Math.max(0, to - from));
  for (const p of placed) {
    const start = Math.max(p.start, from);
    const stop = Math.min(p.start + p.samples, to);
    if (stop <= start || p.blobId === null) continue;
    const blob = await trx
      .selectFrom('blobs')
      .select('object_key')
      .where('id', '=', p.blobId)
      .executeTakeFirstOrThrow();
    const audio = parseWav(await deps.blobs.get(blob.object_key));
    if (!audio)
      throw new AppError(ErrorKind.permanent, 'chunk.corrupt', `stored chunk ${p.seq} is not a WAV file`);
    out.set(audio.samples.subarray(start - p.start, stop - p.start), start - from);
  }
  return out;
}

async function insertWindow(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  index: number,
  startSample: number,
  endSample: number,
  samples: Int16Array | null,
  actor: string,
  withJob: boolean,
): Promise<void> {
  let audio: StoredWindowAudio | null = null;
  if (samples) {
    const wav = encodeWav(samples, SAMPLE_RATE);
    const { key, sha256 } = blobKey(meeting.workspace_id, meeting.id, `window-${index}`, wav);
    await deps.blobs.put(key, wav);
    audio = { key, sha256, size: wav.length };
  }
  const windowId = await recordWindow(trx, {
    workspaceId: meeting.workspace_id,
    meetingId: meeting.id,
    index,
    startMs: Math.round((startSample * 1000) / SAMPLE_RATE),
    endMs: Math.round((endSample * 1000) / SAMPLE_RATE),
    audio,
  });
  if (withJob) await createTranscribeJob(deps, trx, meeting.workspace_id, meeting.id, windowId, index, actor);
}
