/**
 * What the outbox does with each answer the server (or something in front of it) gives to a chunk
 * PUT or an End POST. Pure, so the rules are unit-tested without a browser (test/web-api.test.ts).
 *
 * The one invariant: a chunk's audio leaves IndexedDB only when the server acknowledged that very
 * chunk (2xx whose body names the same seq). Anything we do not recognise as ours is retried,
 * because a proxy, a captive portal or a full disk can answer 4xx for a while and then stop.
 */

import { codeIs } from '../codes.ts';

export interface Answer {
  /** 0 when there was no HTTP answer at all (network error, timeout). */
  status: number;
  /** The `error.code` of our JSON error body, or null when the body was not ours. */
  code: string | null;
  /** The parsed JSON body, if any. */
  body: unknown;
}

export type ChunkOutcome =
  /** The server has this chunk: delete the local copy. */
  | 'acknowledged'
  /** The server refused this chunk for good: keep its audio, marked rejected, and move on. */
  | 'rejected'
  /** The key was refused: keep everything and ask the person to sign in again. */
  | 'sign_in'
  /** The meeting is unknown to this key (another workspace's key): keep, show, retry later. */
  | 'not_found'
  /** No answer at all: the server cannot be reached. */
  | 'unreachable'
  /** Anything else (5xx, 408, 429, 413 storage.quota_exceeded, a proxy's 403/407): retry later. */
  | 'retry';

/**
 * Refusals that are final for one chunk (status and our code must both match: a proxy's 409 or 413
 * without our body is retried). From src/meetings/live.ts, src/api/meeting-routes.ts and the body
 * limit in src/api/server.ts (docs/live-meetings.md, Refusals). Not here, so retried: 413
 * storage.quota_exceeded (it clears when space is freed) and 409 chunk.too_far_ahead (it clears
 * once the chunks before it are stored). A chunk is never refused for arriving late or after End.
 */
const FINAL_CHUNK_REFUSALS: ReadonlyArray<readonly [number, string]> = [
  [400, 'chunk.seq'],
  [400, 'chunk.empty'],
  [409, 'chunk.conflict'],
  [409, 'chunk.after_end'],
  [409, 'meeting.not_live'],
  [410, 'chunk.too_late'],
  [413, 'request.too_large'],
  [415, 'chunk.bad_format'],
  [415, 'chunk.format_changed'],
  [415, 'chunk.unsupported_type'],
];

export function chunkOutcome(seq: number, a: Answer): ChunkOutcome {
  if (a.status === 0) return 'unreachable';
  if (a.status >= 200 && a.status < 300) {
    const bodySeq = (a.body as { seq?: unknown } | null)?.seq;
    // A 2xx that does not name this chunk (a proxy's page, a cache) is not an acknowledgement.
    return bodySeq === seq ? 'acknowledged' : 'retry';
  }
  if (a.status === 401) return 'sign_in';
  if (a.status === 404 && codeIs(a.code, 'meeting.not_found')) return 'not_found';
  if (FINAL_CHUNK_REFUSALS.some(([status, code]) => status === a.status && code === a.code))
    return 'rejected';
  return 'retry';
}

export type EndOutcome =
  /** The meeting is ended (202), or was already past recording: forget the pending End. */
  | 'delivered'
  /** The count this browser declared is below a chunk the server has (another device recorded
   * more): send End again without a count. */
  | 'without_count'
  | 'sign_in'
  | 'not_found'
  | 'unreachable'
  | 'retry';

export function endOutcome(a: Answer): EndOutcome {
  if (a.status === 0) return 'unreachable';
  if (a.status >= 200 && a.status < 300) return 'delivered';
  if (a.status === 401) return 'sign_in';
  if (a.status === 404 && codeIs(a.code, 'meeting.not_found')) return 'not_found';
  // The server answers 202 for a meeting already finalizing or complete; these 409s also mean that
  // there is nothing left to end (not a live meeting, or ended before with another count).
  if (a.status === 409 && (codeIs(a.code, 'meeting.not_live') || codeIs(a.code, 'end.chunks_conflict')))
    return 'delivered';
  if (a.status === 409 && codeIs(a.code, 'end.chunks_below_stored')) return 'without_count';
  return 'retry';
}

/** Per-meeting retry delay after `failures` failed tries in a row: 1, 2, 4, 8, then 10 s. */
export function backoffMs(failures: number): number {
  return Math.min(10_000, 1_000 * 2 ** Math.max(0, failures));
}
