import { createHash } from 'node:crypto';
import type { Executor, MeetingRow, Tx } from '../db/schema.ts';
import { AppError } from '../domain/errors.ts';
import { encodeEnergy, energyProfile, SAMPLE_RATE } from '../domain/timeline.ts';
import { encodeWav } from '../domain/wav.ts';
import {
  buildStream,
  decodeReadState,
  encodeReadState,
  readChunk,
  readStreamHeader,
  WebmFormatError,
  type WebmBlock,
  type WebmReadState,
} from '../domain/webm.ts';
import type { AudioDecoder } from '../ports.ts';
import type { MeetingDeps } from './deps.ts';
import { referenceStaged, stageAndPut, type StagedObject } from '../storage/objects.ts';
import { pieceBefore, pieceObjects, recordPieceReading } from './webm-rows.ts';

/**
 * WebM/Opus pieces (docs/live-meetings.md): pieces of one MediaRecorder stream, cut at arbitrary
 * bytes. A piece is read as the continuation of the piece before it (its unfinished bytes and the
 * last blocks, which prime the Opus decoder); without that piece, the reader starts at the piece's
 * next cluster and the piece is marked `decoded_after_gap`, keeping its original bytes so it can be
 * read again in full when the missing piece arrives. Decoding happens outside any transaction; the
 * result names the state it was read from (its basis), and is applied only if that still holds.
 */

/**
 * Blocks of the previous chunk decoded ahead of a chunk's own, then dropped: the Opus decoder
 * carries state from frame to frame, so a chunk decoded cold would differ at its start and lose the
 * codec's start-up delay. Measured on speech cut every 3000 bytes: 5 blocks (100 ms) of priming
 * gave 31 dB against decoding the stream whole, 10 gave 45 dB, 25 gave 86 dB.
 */
const PRIME_BLOCKS = 25;

interface StreamState {
  read: WebmReadState | null;
  prime: WebmBlock[];
}

function encodeState(state: StreamState): string {
  return JSON.stringify({
    read: encodeReadState(state.read),
    prime: state.prime.map((b) => ({ t: b.clusterTime, b: b.element.toString('base64') })),
  });
}

function decodeState(json: unknown): StreamState {
  const value = (typeof json === 'string' ? JSON.parse(json) : (json ?? {})) as {
    read?: unknown;
    prime?: { t: number; b: string }[];
  };
  return {
    read: typeof value.read === 'string' ? decodeReadState(JSON.parse(value.read)) : null,
    prime: (value.prime ?? []).map((p) => ({ clusterTime: p.t, element: Buffer.from(p.b, 'base64') })),
  };
}

/** What a piece is read after: the stream's start, the piece before it (by its state), or a gap. */
export interface PieceBasis {
  key: string;
  state: StreamState | null;
}

function stateKey(seq: number, state: unknown): string {
  return `${seq}:${createHash('sha256')
    .update(JSON.stringify(state ?? null))
    .digest('hex')
    .slice(0, 16)}`;
}

/** The basis piece `seq` is read from, as the rows stand now. */
export async function basisOf(db: Executor, meetingId: string, seq: number): Promise<PieceBasis> {
  if (seq === 0) return { key: 'start', state: null };
  const prev = await pieceBefore(db, meetingId, seq);
  if (!prev || prev.samples === null || prev.undecodable || prev.stream_state === null)
    return { key: prev ? `reset:${seq - 1}` : 'gap', state: null };
  // A piece before it that held no cluster start left the reader nowhere: read from a cluster.
  const state = decodeState(prev.stream_state);
  return { key: stateKey(seq - 1, prev.stream_state), state: state.read ? state : null };
}

/** One piece, read: what it decoded to and the reader's state after it. */
export interface DecodedPiece {
  seq: number;
  basis: string;
  samples: number;
  energy: Buffer;
  /** The decoded audio, staged for storage (null when the piece held no whole block). */
  pcm: StagedObject | null;
  state: string | null;
  afterGap: boolean;
  undecodable: boolean;
  /** The stream header, read from piece 0. */
  header: Buffer | null;
}

/**
 * Reads pieces in order from `basis`, each after the one before it. The decoded audio is staged
 * (written) here; whoever applies a piece references it, and whoever drops it compensates it.
 */
export async function decodePieces(
  deps: MeetingDeps,
  meeting: MeetingRow,
  basis: PieceBasis,
  pieces: Array<{ seq: number; data: Buffer | null }>,
): Promise<DecodedPiece[]> {
  const out: DecodedPiece[] = [];
  let header = meeting.stream_header;
  let state: StreamState | null = basis.state;
  let key = basis.key;
  for (const piece of pieces) {
    // Read without the reader's place in the stream: from the piece's next cluster.
    const afterGap = piece.seq > 0 && !state?.read;
    let decoded: DecodedPiece;
    try {
      let blocks: WebmBlock[];
      let read: WebmReadState | null;
      let pieceHeader: Buffer | null = null;
      if (!piece.data) throw new WebmFormatError('its bytes were deleted');
      if (piece.seq === 0) {
        const start = readStreamHeader(piece.data);
        pieceHeader = header = start.header;
        ({ blocks, state: read } = readChunk({ carry: Buffer.alloc(0), clusterTime: 0 }, start.rest));
      } else {
        if (!header) throw new WebmFormatError('the stream header (piece 0) has not arrived');
        ({ blocks, state: read } = readChunk(state?.read ?? null, piece.data));
      }
      const prime = state?.read ? state.prime : [];
      const pcm = await decodeBlocks(deps.decoder, header, prime, blocks);
      const next: StreamState = { read, prime: [...prime, ...blocks].slice(-PRIME_BLOCKS) };
      decoded = {
        seq: piece.seq,
        basis: key,
        samples: pcm.length,
        energy: encodeEnergy(energyProfile(pcm)),
        pcm: pcm.length > 0 ? await stagePcm(deps, meeting, piece.seq, pcm) : null,
        state: encodeState(next),
        afterGap,
        undecodable: false,
        header: pieceHeader,
      };
      state = next;
    } catch (err) {
      if (!(err instanceof WebmFormatError) && !(err instanceof AppError && err.code === 'audio.undecodable'))
        throw err;
      deps.log.warn(
        { meetingId: meeting.id, seq: piece.seq, reason: err.message },
        'live chunk could not be decoded; its stretch has no audio',
      );
      // Without the stream's start it may yet be read; a piece that is itself broken is not kept.
      decoded = {
        seq: piece.seq,
        basis: key,
        samples: 0,
        energy: Buffer.alloc(0),
        pcm: null,
        state: null,
        afterGap: piece.seq > 0 && (afterGap || header === null),
        undecodable: true,
        header: null,
      };
      state = null;
    }
    out.push(decoded);
    key = decoded.state === null ? `reset:${piece.seq}` : stateKey(piece.seq, decoded.state);
  }
  return out;
}

/** The decoded objects of pieces that were not applied, for compensation. */
export function stagedOf(pieces: DecodedPiece[]): StagedObject[] {
  return pieces.flatMap((p) => (p.pcm ? [p.pcm] : []));
}

/** Records a decoded piece on its chunk row (and the stream header, from piece 0). */
export async function applyDecoded(trx: Tx, meeting: MeetingRow, piece: DecodedPiece): Promise<void> {
  const pcmBlobId = piece.pcm
    ? await referenceStaged(trx, piece.pcm, { kind: 'chunk-pcm', contentType: 'audio/wav' })
    : null;
  await recordPieceReading(trx, meeting.id, piece.seq, {
    samples: piece.samples,
    pcmBlobId,
    state: piece.state,
    energy: piece.energy,
    afterGap: piece.afterGap,
    undecodable: piece.undecodable,
    header: piece.header,
  });
}

/**
 * The audio of `blocks`, decoded as the continuation of `prime`: both are decoded together and the
 * prime's own length is cut from the front.
 */
async function decodeBlocks(
  decoder: AudioDecoder,
  header: Buffer,
  prime: WebmBlock[],
  blocks: WebmBlock[],
): Promise<Int16Array> {
  if (blocks.length === 0) return new Int16Array(0);
  const whole = await decoder.decode(buildStream(header, [...prime, ...blocks]));
  if (prime.length === 0) return whole.samples;
  const lead = await decoder.decode(buildStream(header, prime));
  return whole.samples.subarray(Math.min(lead.samples.length, whole.samples.length));
}

function stagePcm(
  deps: MeetingDeps,
  meeting: MeetingRow,
  seq: number,
  pcm: Int16Array,
): Promise<StagedObject> {
  return stageAndPut(deps, {
    workspaceId: meeting.workspace_id,
    meetingId: meeting.id,
    kind: `chunk-${seq}-pcm`,
    data: encodeWav(pcm, SAMPLE_RATE),
    admit: false,
  });
}

/**
 * The original bytes of stored pieces, in order; null for a piece whose bytes are gone (deleted past
 * the late-audio bound): it reads as undecodable, so the timeline still moves on.
 */
export async function readPieces(
  deps: MeetingDeps,
  meetingId: string,
  seqs: number[],
): Promise<Array<{ seq: number; data: Buffer | null }>> {
  if (seqs.length === 0) return [];
  const rows = await pieceObjects(deps.db, meetingId, seqs);
  const out: Array<{ seq: number; data: Buffer | null }> = [];
  for (const r of rows)
    out.push({ seq: r.seq, data: r.deleted_at ? null : await deps.blobs.get(r.object_key) });
  return out;
}
