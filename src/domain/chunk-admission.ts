import { AppError, ErrorKind } from './errors.ts';
import { ClientCode } from './client-codes.ts';

/** How long a client told "too far ahead" waits before sending that chunk again. */
export const AHEAD_RETRY_SECONDS = 5;

export type ChunkFormat = 'wav' | 'webm';

export interface ChunkAdmissionInput {
  seq: number;
  format: ChunkFormat;
  meeting: {
    id: string;
    /** The format of the meeting's first chunk; null before it. */
    chunkFormat: ChunkFormat | null;
    /** The chunk count End declared; null while recording. */
    declaredChunks: number | null;
    /** The first sequence number the timeline has not gone past. */
    nextSeq: number;
    /** When the meeting completed or failed; null while it has not ended. */
    endedAt: Date | null;
  };
  /** The highest seq stored for the meeting, -1 for none. */
  highestSeq: number;
  now: Date;
  limits: { lateAudioMs: number; maxSeqAhead: number };
}

/**
 * What happens to a live chunk (L1, L3, L19), decided from the meeting alone:
 * - `place`: at or ahead of the timeline's frontier; stored, and placed once the frontier reaches it;
 * - `repair`: its stretch was already passed (a reserved gap): stored, and the repair job re-cuts
 *   the windows around it;
 * - an `AppError` naming why it cannot be taken: another format than the meeting's, a seq at or past
 *   End's count, later than the late-audio bound, or too far ahead of the highest stored (the client
 *   can send it again later: the error carries a Retry-After).
 */
export type ChunkAdmission = { kind: 'place' } | { kind: 'repair' } | { kind: 'refuse'; error: AppError };

export function admitChunk(input: ChunkAdmissionInput): ChunkAdmission {
  const { seq, format, meeting, limits } = input;
  if (meeting.chunkFormat !== null && meeting.chunkFormat !== format) {
    return refuse(
      new AppError(
        ErrorKind.unsupportedMedia,
        'chunk.format_changed',
        `meeting ${meeting.id} streams ${meeting.chunkFormat} chunks; chunk ${seq} is ${format}`,
      ),
    );
  }
  if (meeting.declaredChunks !== null && seq >= meeting.declaredChunks) {
    return refuse(
      new AppError(
        ErrorKind.conflict,
        ClientCode.chunkAfterEnd,
        `the meeting was ended with ${meeting.declaredChunks} chunks (0 to ${meeting.declaredChunks - 1}); chunk ${seq} is past its end`,
      ),
    );
  }
  if (meeting.endedAt && input.now.getTime() - meeting.endedAt.getTime() > limits.lateAudioMs) {
    const days = Math.round(limits.lateAudioMs / 86_400_000);
    return refuse(
      new AppError(
        ErrorKind.gone,
        'chunk.too_late',
        `meeting ${meeting.id} ended on ${meeting.endedAt.toISOString()}; late chunks are taken for ${days} days after a meeting ends`,
      ),
    );
  }
  // A chunk End declared is always taken; before End, a client may run only so far ahead.
  const withinCount = meeting.declaredChunks !== null && seq < meeting.declaredChunks;
  if (!withinCount && seq > input.highestSeq + limits.maxSeqAhead) {
    return refuse(
      new AppError(
        ErrorKind.conflict,
        'chunk.too_far_ahead',
        `chunk ${seq} is more than ${limits.maxSeqAhead} ahead of the highest chunk stored (${input.highestSeq < 0 ? 'none yet' : input.highestSeq}); send the chunks before it first`,
        { retryAfterSeconds: AHEAD_RETRY_SECONDS },
      ),
    );
  }
  return seq < meeting.nextSeq ? { kind: 'repair' } : { kind: 'place' };
}

function refuse(error: AppError): ChunkAdmission {
  return { kind: 'refuse', error };
}
