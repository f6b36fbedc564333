import { createHash } from 'node:crypto';
import type { MeetingRow, Tx } from '../db/schema.ts';
import { admitChunk, type ChunkAdmission, type ChunkFormat } from '../domain/chunk-admission.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { MeetingSource, MeetingStatus } from '../domain/status.ts';
import { encodeEnergy, energyProfile, splitGap, closedTimeline } from '../domain/timeline.ts';
import { parseWav } from '../domain/wav.ts';
import { startsWebmStream } from '../domain/webm.ts';
import { compensate, referenceStaged, stageAndPut } from '../storage/objects.ts';
import type { MeetingDeps } from './deps.ts';
import { advanceInTx, advanceTimeline, ensureRepairJob } from './frontier.ts';
import {
  countChunks,
  gapHolding,
  highestSeq,
  insertChunk,
  insertGap,
  removeGapRun,
  storedChunk,
} from './timeline-rows.ts';
import { beginCloseOut, startCloseOutIfAllHere } from './close-out-start.ts';
import { ClientCode } from '../domain/client-codes.ts';

const SAMPLE_RATE = 16_000;
/**
 * The highest seq: 200,000 chunks of 5 s are 11 days, and keep every position in milliseconds within
 * the integer columns of windows and segments.
 */
export const MAX_SEQ = 200_000;
export type { ChunkFormat } from '../domain/chunk-admission.ts';

export interface StoredChunk {
  meeting: MeetingRow;
  /** False when the same chunk had already been stored (L1: idempotent on meeting and seq). */
  created: boolean;
}

/**
 * L1, L19: stores one live chunk durably on arrival, once per (meeting, seq), whenever it comes:
 * while recording, after End, during the close-out or after the meeting ended (until the late-audio
 * bound). A chunk at the frontier is placed on the timeline and every window slot it fills is cut
 * with its job (L2); a chunk ahead of it waits; a chunk whose stretch the timeline already went
 * past (a reserved gap), or one after the close-out cut the last stretch, is repaired: the windows
 * around it are re-cut and transcribed again by the meeting's repair job (src/meetings/repair.ts).
 * Refused only for what the client cannot hold: a seq at or past End's count, a seq too far ahead
 * (retryable), a deleted meeting, bad audio, a full quota. See docs/live-meetings.md.
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
  if (!/^\d+$/.test(seqText) || !Number.isSafeInteger(seq) || seq > MAX_SEQ) {
    throw new AppError(
      ErrorKind.invalidInput,
      'chunk.seq',
      `seq must be a whole number from 0 to ${MAX_SEQ}`,
    );
  }
  const meeting = await deps.meetings.get(workspaceId, meetingId);
  assertLive(meeting);
  await assertAcceptable(deps, meeting, seq, format);
  const audio = chunkAudio(format, seq, data);
  const sha256 = createHash('sha256').update(data).digest('hex');
  const existing = await sameChunk(deps, meetingId, seq, sha256);
  if (existing) {
    // A retry of a chunk stored but not placed (its request died before it could read a WebM
    // piece): it moves the timeline on now, or hands it to the repair job.
    if (!existing.placed && (closedTimeline(meeting) || seq === meeting.next_seq)) {
      await advanceTimeline(deps, meetingId, `user:${workspaceId}`, { final: false });
    }
    return { meeting, created: false };
  }

  const staged = await stageAndPut(deps, { workspaceId, meetingId, kind: `chunk-${seq}`, data, admit: true });
  let stored: { meeting: MeetingRow; needsDecode: boolean };
  try {
    stored = await deps.db.transaction().execute(async (trx) => {
      let locked = await deps.meetings.lock(trx, meetingId);
      const admission = await assertAcceptable(deps, locked, seq, format, trx);
      const blobId = await referenceStaged(trx, staged, {
        kind: 'chunk',
        contentType: format === 'wav' ? 'audio/wav' : 'audio/webm',
      });
      const inserted = await insertChunk(trx, {
        workspaceId,
        meetingId,
        seq,
        blobId,
        sha256,
        samples: audio?.samples ?? null,
        energy: audio?.energy ?? null,
        format,
      });
      if (!inserted) throw new ChunkRace();
      const actor = `user:${workspaceId}`;
      if (locked.status === MeetingStatus.created) {
        locked = await deps.meetings.transition(trx, locked, 'startRecording', actor, 'first chunk');
      }
      if (locked.chunk_format === null) {
        locked = await deps.meetings.setChunkFormat(trx, meetingId, format);
      }
      if (admission.kind === 'repair') {
        // Its stretch was reserved: it becomes a one-number gap marked arrived, for the repair.
        await markArrived(trx, locked, seq);
        await ensureRepairJob(deps, trx, locked, actor);
        return { meeting: locked, needsDecode: false };
      }
      const advanced = await advanceInTx(deps, trx, meetingId, actor, false);
      return { meeting: advanced.meeting, needsDecode: advanced.needs !== null };
    });
  } catch (err) {
    await compensate(deps, [staged], err);
    if (err instanceof ChunkRace && (await sameChunk(deps, meetingId, seq, sha256))) {
      return { meeting, created: false };
    }
    throw err;
  }
  await startCloseOutIfAllHere(deps, meetingId, `user:${workspaceId}`);
  // WebM pieces the frontier reached are decoded outside the transaction, then placed.
  if (!stored.needsDecode) return { meeting: stored.meeting, created: true };
  const advanced = await advanceTimeline(deps, meetingId, `user:${workspaceId}`, { final: false });
  return { meeting: advanced ?? stored.meeting, created: true };
}

class ChunkRace extends Error {}

/** The chunk already stored under this seq (and whether it is placed), if it is the same chunk. */
async function sameChunk(
  deps: MeetingDeps,
  meetingId: string,
  seq: number,
  sha256: string,
): Promise<{ placed: boolean } | null> {
  const existing = await storedChunk(deps.db, meetingId, seq);
  if (!existing) return null;
  if (existing.sha256 !== sha256) {
    throw new AppError(
      ErrorKind.conflict,
      'chunk.conflict',
      `chunk ${seq} was already stored with other bytes`,
    );
  }
  return { placed: existing.start_samples !== null };
}

/**
 * A WAV chunk's samples and energy, checked now; a WebM piece's are known once the stream before
 * it has been read.
 */
function chunkAudio(
  format: ChunkFormat,
  seq: number,
  data: Buffer,
): { samples: number; energy: Buffer } | null {
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
  return { samples: audio.samples.length, energy: encodeEnergy(energyProfile(audio.samples)) };
}

function assertLive(meeting: MeetingRow): void {
  if (meeting.source !== MeetingSource.live) {
    throw new AppError(
      ErrorKind.conflict,
      ClientCode.meetingNotLive,
      `meeting ${meeting.id} is a ${meeting.source} meeting`,
    );
  }
}

/**
 * L19-L21: the rule (src/domain/chunk-admission.ts) applied to the meeting as read: throws its
 * refusal, or says whether the chunk is placed at the frontier or repaired behind it.
 */
async function assertAcceptable(
  deps: MeetingDeps,
  meeting: MeetingRow,
  seq: number,
  format: ChunkFormat,
  db: Tx | MeetingDeps['db'] = deps.db,
): Promise<Exclude<ChunkAdmission, { kind: 'refuse' }>> {
  const admission = admitChunk({
    seq,
    format,
    meeting: {
      id: meeting.id,
      chunkFormat: meeting.chunk_format,
      declaredChunks: meeting.declared_chunks,
      nextSeq: meeting.next_seq,
      endedAt: meeting.completed_at ?? meeting.failed_at,
    },
    highestSeq: await highestSeq(db, meeting.id),
    now: new Date(),
    limits: { lateAudioMs: deps.config.lateAudioMs, maxSeqAhead: deps.config.maxSeqAhead },
  });
  if (admission.kind === 'refuse') throw admission.error;
  return admission;
}

/** Splits the reserved run holding `seq` so that its own stretch is a gap marked arrived. */
async function markArrived(trx: Tx, meeting: MeetingRow, seq: number): Promise<void> {
  const run = await gapHolding(trx, meeting.id, seq);
  if (!run) throw new Error(`seq ${seq} is behind the frontier but in no reserved gap`);
  if (run.arrived_at !== null) return;
  // The run leaves the missing count; what is left of it before and after comes back in.
  const parts = splitGap(
    {
      firstSeq: run.first_seq,
      endSeq: run.end_seq,
      start: Number(run.start_samples),
      samples: Number(run.samples),
    },
    seq,
  );
  await removeGapRun(trx, meeting.id, run);
  if (parts.before) await insertGap(trx, meeting, parts.before, false);
  await insertGap(trx, meeting, parts.own, true);
  if (parts.after) await insertGap(trx, meeting, parts.after, false);
}

/**
 * L3, L20: "End meeting" — finalizing now, close-out after the grace period for the last chunks.
 * With `chunks`, seqs 0…chunks−1 are expected and any later seq is refused; if all have arrived the
 * close-out starts at once (L24). Ending an ended meeting again changes nothing.
 */
export async function endMeeting(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  declared: number | null = null,
): Promise<MeetingRow> {
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    await deps.meetings.get(workspaceId, meetingId, trx);
    const meeting = await deps.meetings.lock(trx, meetingId);
    assertLive(meeting);
    const highest = await highestSeq(trx, meetingId);
    if (declared !== null && declared <= highest) {
      throw new AppError(
        ErrorKind.conflict,
        ClientCode.endChunksBelowStored,
        `chunk ${highest} is already stored, so the meeting has at least ${highest + 1} chunks (End said ${declared})`,
      );
    }
    if (meeting.status !== MeetingStatus.created && meeting.status !== MeetingStatus.recording) {
      if (declared !== null && meeting.declared_chunks !== null && declared !== meeting.declared_chunks) {
        throw new AppError(
          ErrorKind.conflict,
          ClientCode.endChunksConflict,
          `the meeting was already ended with ${meeting.declared_chunks} chunks`,
        );
      }
      if (declared !== null && meeting.declared_chunks === null && !meeting.timeline_closed_at) {
        return deps.meetings.declareChunks(trx, meetingId, declared);
      }
      return meeting;
    }
    // L24: every declared chunk is here, so there is nothing to wait for.
    const allHere = declared !== null && (await countChunks(trx, meetingId)) === declared;
    const ended = await beginCloseOut(
      deps,
      trx,
      meeting,
      actor,
      'meeting ended',
      allHere ? 0 : deps.config.closeoutGraceMs,
    );
    if (declared !== null) return deps.meetings.declareChunks(trx, meetingId, declared);
    return ended;
  });
}
