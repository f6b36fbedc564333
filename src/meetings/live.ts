import { createHash, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { planWindows, quietBoundary } from '../domain/audio-windows.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { encodeWav, parseWav } from '../domain/wav.ts';
import { startsWebmStream } from '../domain/webm.ts';
import type { MeetingDeps } from './deps.ts';
import { decodeReadyChunks } from './live-webm.ts';
import { recordWindow } from './window-rows.ts';
import { compensate, referenceStaged, stageAndPut, type StagedObject } from '../storage/objects.ts';
import { createTranscribeJob } from './intake.ts';

const SAMPLE_RATE = 16_000;
const MAX_SEQ = 1_000_000;

export type ChunkFormat = 'wav' | 'webm';

export interface StoredChunk {
  meeting: MeetingRow;
  /** False when the same chunk had already been stored (L1: idempotent on meeting and seq). */
  created: boolean;
}

/**
 * L1: stores one live chunk durably on arrival, once per (meeting, seq), and cuts every window slot
 * that the contiguous audio now fills (L2), each with its transcription job, in the same
 * transaction. Chunks may arrive out of order; a window waits for the chunks before it, until the
 * gap has been waited on long enough (`gapPatienceMs` of audio after it) and is settled as missing.
 * WAV chunks stand alone; WebM chunks are pieces of one stream and are decoded in order.
 */
export async function storeChunk(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  seqText: string,
  data: Buffer,
  format: ChunkFormat = 'wav',
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
  assertAcceptable(meeting, seq, format);
  const samples = chunkSamples(format, seq, data);
  const sha256 = createHash('sha256').update(data).digest('hex');
  const duplicate = await sameChunk(deps, meetingId, seq, sha256);
  if (duplicate) return { meeting, created: false };

  const staged = await stageAndPut(deps, { workspaceId, meetingId, kind: `chunk-${seq}`, data, admit: true });
  // Objects this request derives from the chunk (windows, decoded WebM), compensated with it (B3).
  const derived: StagedObject[] = [];
  try {
    return await deps.db.transaction().execute(async (trx) => {
      let locked = await deps.meetings.lock(trx, meetingId);
      assertRecording(locked);
      assertAcceptable(locked, seq, format);
      const blobId = await referenceStaged(trx, staged, {
        kind: 'chunk',
        contentType: format === 'wav' ? 'audio/wav' : 'audio/webm',
      });
      const inserted = await trx
        .insertInto('chunks')
        .values({
          id: randomUUID(),
          workspace_id: workspaceId,
          meeting_id: meetingId,
          seq,
          blob_id: blobId,
          sha256,
          samples,
          format,
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
      if (locked.chunk_format === null) {
        locked = await trx
          .updateTable('meetings')
          .set({ chunk_format: format })
          .where('id', '=', meetingId)
          .returningAll()
          .executeTakeFirstOrThrow();
      }
      locked = await settleGaps(deps, trx, locked, false, derived);
      await cutFilledWindows(deps, trx, locked, `user:${workspaceId}`, derived);
      return { meeting: locked, created: true };
    });
  } catch (err) {
    await compensate(deps, [staged, ...derived], err);
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

/** A WAV chunk's sample count, checked now; a WebM chunk's is known once the stream before it is read. */
function chunkSamples(format: ChunkFormat, seq: number, data: Buffer): number | null {
  if (format === 'webm') {
    if (seq === 0 && !startsWebmStream(data)) {
      throw new AppError(
        ErrorKind.unsupportedMedia,
        'chunk.bad_format',
        'chunk 0 of a WebM stream must begin with the stream header (EBML)',
      );
    }
    return null;
  }
  const audio = parseWav(data);
  if (!audio || audio.sampleRate !== SAMPLE_RATE) {
    throw new AppError(
      ErrorKind.unsupportedMedia,
      'chunk.bad_format',
      'a WAV chunk must be 16 kHz mono 16-bit PCM (audio/wav)',
    );
  }
  return audio.samples.length;
}

/** A meeting's chunks share one format, and a stretch settled as missing is not reopened. */
function assertAcceptable(meeting: MeetingRow, seq: number, format: ChunkFormat): void {
  if (meeting.chunk_format !== null && meeting.chunk_format !== format) {
    throw new AppError(
      ErrorKind.unsupportedMedia,
      'chunk.format_changed',
      `meeting ${meeting.id} streams ${meeting.chunk_format} chunks; chunk ${seq} is ${format}`,
    );
  }
  if (meeting.missing_chunks.includes(seq)) {
    throw new AppError(
      ErrorKind.conflict,
      'chunk.settled_missing',
      `chunk ${seq} arrived after its stretch was settled as missing audio`,
    );
  }
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
  /** The chunk's 16 kHz WAV (the decoded copy for WebM); null for a stretch settled as missing. */
  blobId: string | null;
}

/**
 * L1: a chunk that has not arrived is waited for while later audio keeps coming, and settled as
 * missing once `gapPatienceMs` of chunks after it have been stored — or at close-out (`final`),
 * when nothing more can come. Its stretch then counts as silence of the nominal chunk length, and
 * the chunk is listed in the meeting's missing chunks. WebM chunks are decoded here, in order.
 */
async function settleGaps(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
  final: boolean,
  derived: StagedObject[],
): Promise<MeetingRow> {
  const seqs = (
    await trx.selectFrom('chunks').select('seq').where('meeting_id', '=', meeting.id).orderBy('seq').execute()
  ).map((r) => r.seq);
  const missing = new Set(meeting.missing_chunks);
  const received = new Set(seqs);
  const patience = Math.max(1, Math.ceil(deps.config.gapPatienceMs / deps.config.chunkMs));
  const last = seqs.at(-1) ?? -1;
  let after = 0;
  for (let seq = last; seq >= 0; seq--) {
    if (received.has(seq)) after++;
    else if (!missing.has(seq) && (final || after >= patience)) missing.add(seq);
  }
  let updated = meeting;
  if (missing.size !== meeting.missing_chunks.length) updated = await setMissing(trx, meeting.id, missing);
  if (updated.chunk_format === 'webm') {
    const undecodable = await decodeReadyChunks(deps, trx, updated, derived);
    if (undecodable.length > 0) {
      for (const seq of undecodable) missing.add(seq);
      updated = await setMissing(trx, meeting.id, missing);
    }
  }
  return updated;
}

function setMissing(trx: Tx, meetingId: string, missing: Set<number>): Promise<MeetingRow> {
  return trx
    .updateTable('meetings')
    .set({ missing_chunks: [...missing].sort((a, b) => a - b) })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The meeting's timeline as far as it is known without a hole: chunks in sequence order, each as
 * long as its audio, and settled-missing chunks as silence of the nominal length.
 */
async function placeChunks(
  deps: MeetingDeps,
  trx: Tx,
  meeting: MeetingRow,
): Promise<{ placed: PlacedChunk[]; end: number }> {
  const rows = await trx
    .selectFrom('chunks')
    .select(['seq', 'samples', 'blob_id', 'pcm_blob_id', 'format'])
    .where('meeting_id', '=', meeting.id)
    .orderBy('seq')
    .execute();
  const bySeq = new Map(rows.map((r) => [r.seq, r]));
  const missing = new Set(meeting.missing_chunks);
  const nominal = Math.round((deps.config.chunkMs / 1000) * SAMPLE_RATE);
  const placed: PlacedChunk[] = [];
  let end = 0;
  for (let seq = 0; ; seq++) {
    const row = bySeq.get(seq);
    if (missing.has(seq)) {
      placed.push({ seq, start: end, samples: nominal, blobId: null });
      end += nominal;
      continue;
    }
    if (!row || row.samples === null) break;
    const blobId = row.format === 'webm' ? row.pcm_blob_id : row.blob_id;
    placed.push({ seq, start: end, samples: row.samples, blobId });
    end += row.samples;
  }
  return { placed, end };
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
  derived: StagedObject[],
): Promise<void> {
  const { placed, end } = await placeChunks(deps, trx, meeting);
  const slot = Math.round((meeting.window_ms / 1000) * SAMPLE_RATE);
  let index = await windowCount(trx, meeting.id);
  let cut = Number(meeting.cut_samples);
  while ((index + 1) * slot <= end) {
    const nominal = (index + 1) * slot;
    const pcm = await readTimeline(deps, trx, placed, cut, nominal);
    const boundary =
      cut + quietBoundary(pcm, nominal - cut, SAMPLE_RATE, deps.config.boundarySearchMs / 1000, 0);
    const heard = hasAudio(placed, cut, boundary);
    await insertWindow(
      deps,
      trx,
      meeting,
      index,
      cut,
      boundary,
      heard ? pcm.subarray(0, boundary - cut) : null,
      actor,
      heard,
      derived,
    );
    cut = boundary;
    index++;
  }
  if (cut !== Number(meeting.cut_samples)) {
    await trx.updateTable('meetings').set({ cut_samples: cut }).where('id', '=', meeting.id).execute();
  }
}

/** True when any received audio falls in [from, to): a window of nothing but missing chunks has none. */
function hasAudio(placed: PlacedChunk[], from: number, to: number): boolean {
  return placed.some((p) => p.blobId !== null && p.samples > 0 && p.start < to && p.start + p.samples > from);
}

/**
 * L4 step 3: at close-out, every chunk still missing is settled as missing, and the stretch after
 * the last window becomes windows without jobs, which the close-out transcribes directly. A window
 * with no audio at all is left without a blob, so it settles as missing.
 */
export async function cutRemainder(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  actor: string,
  derived: StagedObject[],
): Promise<void> {
  const meeting = await settleGaps(deps, trx, await deps.meetings.lock(trx, meetingId), true, derived);
  const { placed, end } = await placeChunks(deps, trx, meeting);
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
      const samples = hasAudio(placed, from, to) ? pcm.subarray(w.startSample, w.endSample) : null;
      await insertWindow(deps, trx, meeting, index++, from, to, samples, actor, false, derived);
    }
    await trx.updateTable('meetings').set({ cut_samples: end }).where('id', '=', meetingId).execute();
  }
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
  derived: StagedObject[],
): Promise<void> {
  let audio: StagedObject | null = null;
  if (samples) {
    audio = await stageAndPut(deps, {
      workspaceId: meeting.workspace_id,
      meetingId: meeting.id,
      kind: `window-${index}`,
      data: encodeWav(samples, SAMPLE_RATE),
      admit: false,
    });
    derived.push(audio);
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
