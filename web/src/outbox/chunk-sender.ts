import { chunkPath, parseTrackKey } from './track-key.ts';
import { answer, apiKey } from '../api.ts';
import { backoffMs, chunkOutcome, endOutcome, type Answer } from './answers.ts';
import type { ChunkStore, StoredMeeting } from './chunk-store.ts';
import { locksSupported, withMeetingLock } from './recording-lock.ts';
import { codeIs } from '../codes.ts';

/** Why one meeting's audio or End is still waiting, and when it is tried again. */
export interface MeetingTrouble {
  message: string;
  retryAt: number;
  /** The meeting is unknown to the key this tab signed in with (another workspace's key?). */
  notFound: boolean;
  /**
   * The server acknowledged this meeting's audio under this very key earlier and now says it does
   * not exist: it was deleted there. Nothing more is tried until the person discards the audio or
   * signs in again.
   */
  deleted: boolean;
}

/** What the screen shows about audio not yet on the server. */
export interface OutboxStatus {
  /** Chunks captured here and not yet acknowledged, per meeting. */
  pending: Record<string, number>;
  /** Chunks the server refused for good, per meeting, with the reason; their audio is kept. */
  rejected: Record<string, Array<{ seq: number; error: string; hasAudio: boolean }>>;
  /** Meetings whose End was pressed here and is not yet delivered. */
  endPending: Record<string, boolean>;
  /** Per meeting: why what it has waiting was not delivered on the last try. */
  trouble: Record<string, MeetingTrouble>;
  /** Highest sequence number acknowledged in this page's life, per meeting. */
  acknowledged: Record<string, number>;
  /** Set while the server cannot be reached at all; the time of the next try. */
  offlineUntil: number | null;
  /**
   * Why the last round failed as a whole (IndexedDB failed, the server cannot be reached), or null
   * once a round succeeds; one meeting's trouble is in `trouble`.
   */
  lastError: string | null;
  /** When the round that failed is tried again, or null. */
  retryAt: number | null;
  /** The server refused the key (401): nothing is sent until someone signs in again. */
  needsSignIn: boolean;
  /** Meetings whose End this page delivered from the outbox. */
  ended: Record<string, boolean>;
  /**
   * Meetings the server said are no longer recording (a chunk's answer showed the meeting ended, or
   * 409 chunk.after_end / meeting.not_live, or 404 for a meeting it had acknowledged): a recording
   * of one must stop. Why, in words.
   */
  closed: Record<string, string>;
}

type Stop = 'done' | 'failed' | 'stop';

/** Chunks of one meeting in flight at once: a backlog after an outage goes up a few at a time. */
const PARALLEL = 4;

/**
 * Sends stored chunks, a few of a meeting's at a time (the server takes them in any order, L19),
 * deleting a chunk only when the server acknowledged that very chunk (answers.ts). A chunk that
 * fails is tried again after the meeting's backoff (1, 2, 4, 8, then 10 s) while the others go on;
 * other meetings go on too, so one chunk refused for hours holds back only its own meeting's End.
 * After a meeting's last chunk is acknowledged its End is delivered, if it was requested, with the
 * number of chunks recorded (L20). Nothing is sent without a key; a 401 or no answer at all stops
 * the round. See docs/web-app.md.
 */
export class ChunkSender {
  private running = false;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly backoff = new Map<string, { failures: number; retryAt: number }>();
  private offlineFailures = 0;
  private offlineUntil = 0;
  /** Meetings with chunks or an End waiting, as of the last look at the store. */
  private withWork: string[] = [];
  /** The key under which the server last acknowledged something of each meeting (this page only). */
  private readonly acceptedUnder = new Map<string, string>();
  /** The last round failed as a whole; it is retried at `offlineUntil` whatever the store held. */
  private roundFailed = false;
  private readonly listeners = new Set<(s: OutboxStatus) => void>();
  private state: OutboxStatus = {
    pending: {},
    rejected: {},
    endPending: {},
    trouble: {},
    acknowledged: {},
    offlineUntil: null,
    lastError: null,
    retryAt: null,
    needsSignIn: false,
    ended: {},
    closed: {},
  };

  constructor(private readonly store: ChunkStore) {
    // Back online forgets the backoffs, not a refused key: that waits for a new sign-in.
    window.addEventListener('online', () => this.retryNow({ signedIn: false }));
  }

  get status(): OutboxStatus {
    return this.state;
  }

  subscribe(fn: (s: OutboxStatus) => void): () => void {
    this.listeners.add(fn);
    fn(this.state);
    return () => this.listeners.delete(fn);
  }

  /** Starts a round now (or right after the one running); meetings still in backoff are skipped. */
  kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.running) {
      this.again = true;
      return;
    }
    void this.round();
  }

  /**
   * Forgets every backoff and sends at once: the browser is back online, or someone signed in. Only
   * a sign-in clears a refused key (401) and a meeting found deleted on the server.
   */
  retryNow({ signedIn }: { signedIn: boolean }): void {
    this.backoff.clear();
    this.offlineFailures = 0;
    this.offlineUntil = 0;
    const trouble = signedIn
      ? {}
      : Object.fromEntries(Object.entries(this.state.trouble).filter(([, t]) => t.deleted));
    this.set({
      ...(signedIn ? { needsSignIn: false } : {}),
      trouble,
      offlineUntil: null,
      retryAt: null,
    });
    this.kick();
  }

  /** The person downloaded (or chose not to) the audio of a meeting deleted on the server: drop it. */
  async discard(meetingId: string): Promise<void> {
    await this.store.discard(meetingId);
    this.backoff.delete(meetingId);
    const { [meetingId]: _cleared, ...trouble } = this.state.trouble;
    this.set({ trouble });
    await this.refresh();
  }

  private set(patch: Partial<OutboxStatus>): void {
    this.state = { ...this.state, ...patch };
    for (const fn of this.listeners) fn(this.state);
  }

  private async round(): Promise<void> {
    this.running = true;
    this.again = false;
    try {
      await this.promoteOrphanedDrafts();
      // No key, no round: an empty Bearer would only collect 401s.
      if (apiKey() && !this.state.needsSignIn) await exclusive(() => this.sendAll());
      else await this.refresh();
      if (this.roundFailed) {
        this.roundFailed = false;
        this.set({ lastError: null, retryAt: null });
      }
    } catch (err) {
      // IndexedDB itself failed: nothing was lost, try the whole round again later (schedule).
      this.roundFailed = true;
      this.offlineUntil = Date.now() + backoffMs(this.offlineFailures++);
      this.set({
        lastError: `This browser's storage failed (${err instanceof Error ? err.message : String(err)}).`,
        retryAt: this.offlineUntil,
      });
    } finally {
      this.running = false;
    }
    if (this.again) {
      this.kick();
      return;
    }
    this.schedule();
  }

  /**
   * A draft whose meeting's recording lock nobody holds was left by a tab that closed or died: it
   * becomes a pending chunk under its seq, taken while holding that lock so no tab can start
   * recording the meeting meanwhile. A draft whose tab still records is left alone. Without Web
   * Locks a live tab's draft cannot be told from a dead one's, so none is promoted here (recording
   * the meeting again or ending it promotes it).
   */
  private async promoteOrphanedDrafts(): Promise<void> {
    if (!locksSupported()) return;
    for (const meetingId of await this.store.draftMeetings()) {
      await withMeetingLock(meetingId, () => this.store.promoteDraft(meetingId));
    }
  }

  private schedule(): void {
    // A failed round is always tried again, even when it failed before the store could be read.
    if (this.roundFailed) {
      this.timer = setTimeout(() => this.kick(), Math.max(0, this.offlineUntil - Date.now()));
      return;
    }
    if (!apiKey() || this.state.needsSignIn) return;
    let next = Infinity;
    for (const id of this.withWork) {
      if (this.state.trouble[id]?.deleted) continue;
      next = Math.min(next, Math.max(this.backoff.get(id)?.retryAt ?? 0, this.offlineUntil));
    }
    if (next === Infinity) return;
    this.timer = setTimeout(() => this.kick(), Math.max(0, next - Date.now()));
  }

  private async sendAll(): Promise<void> {
    const meetings = await this.refresh();
    if (Date.now() < this.offlineUntil) return;
    const keys = await this.store.pendingKeys();
    const work = new Map<string, number[]>();
    for (const [meetingId, seq] of keys) {
      const seqs = work.get(meetingId) ?? [];
      seqs.push(seq);
      work.set(meetingId, seqs);
    }
    for (const m of meetings) if (m.endRequested && !work.has(m.meetingId)) work.set(m.meetingId, []);
    const endRequested = new Set(meetings.filter((m) => m.endRequested).map((m) => m.meetingId));
    for (const [meetingId, seqs] of work) {
      if ((this.backoff.get(meetingId)?.retryAt ?? 0) > Date.now()) continue;
      if (this.state.trouble[meetingId]?.deleted) continue;
      const result = await this.flushMeeting(meetingId, seqs, endRequested.has(meetingId));
      if (result === 'stop') break;
    }
    await this.refresh();
  }

  private async flushMeeting(meetingId: string, listed: number[], endRequested: boolean): Promise<Stop> {
    let seqs = listed;
    for (;;) {
      const stop = await this.sendChunks(meetingId, seqs);
      if (stop) return stop;
      if (!endRequested) break;
      // A chunk stored after this round listed the meeting's chunks (another tab, the last partial
      // chunk) must reach the server before End does: read again right before sending End.
      seqs = await this.store.pendingSeqs(meetingId);
      if (seqs.length === 0) break;
    }
    const track = parseTrackKey(meetingId);
    if (endRequested && track) {
      // L25: a track's count goes with its meeting's End; once that End was delivered and the
      // track's chunks are acknowledged, the track is done here.
      if (!(await this.store.meeting(track.meetingId))) await this.store.forget(meetingId);
    } else if (endRequested) {
      const key = apiKey();
      // L20: the chunks recorded here are 0…nextSeq−1; the server refuses any after them.
      const count = (await this.store.meeting(meetingId))?.nextSeq ?? null;
      const tracks: Record<string, { chunks: number; offsetMs: number }> = {};
      for (const m of await this.store.meetings()) {
        const t = parseTrackKey(m.meetingId);
        if (t?.meetingId === meetingId) tracks[t.track] = { chunks: m.nextSeq, offsetMs: t.offsetMs };
      }
      const body =
        count === null
          ? undefined
          : new TextEncoder().encode(
              JSON.stringify(Object.keys(tracks).length > 0 ? { chunks: count, tracks } : { chunks: count }),
            ).buffer;
      let a = await answer('POST', `/v1/meetings/${meetingId}/end`, body, {
        contentType: 'application/json',
      });
      let outcome = endOutcome(a);
      if (outcome === 'without_count') {
        a = await answer('POST', `/v1/meetings/${meetingId}/end`);
        outcome = endOutcome(a);
      }
      if (outcome !== 'unreachable') this.reachable();
      if (outcome === 'not_found' && key !== null && this.acceptedUnder.get(meetingId) === key)
        return this.deletedOnServer(meetingId);
      if (outcome !== 'delivered')
        return this.failed(meetingId, outcome === 'without_count' ? 'retry' : outcome, a, 'End meeting');
      await this.store.forget(meetingId);
      for (const m of await this.store.meetings()) {
        const t = parseTrackKey(m.meetingId);
        if (t?.meetingId === meetingId && (await this.store.pendingSeqs(m.meetingId)).length === 0)
          await this.store.forget(m.meetingId);
      }
      this.set({ ended: { ...this.state.ended, [meetingId]: true } });
    }
    this.backoff.delete(meetingId);
    const { [meetingId]: _cleared, ...trouble } = this.state.trouble;
    this.set({ trouble });
    return 'done';
  }

  /**
   * Sends one meeting's chunks, PARALLEL at a time; null when every one was acknowledged or
   * rejected. A failure leaves that chunk for the next round and the rest are still sent, except
   * when the server cannot be reached or refuses the key: then the round stops.
   */
  private async sendChunks(meetingId: string, seqs: number[]): Promise<Stop | null> {
    const queue = [...seqs];
    let result: Stop | null = null;
    const worst = (next: Stop) => {
      if (result === 'stop' || (result === 'failed' && next !== 'stop')) return;
      result = next;
    };
    const lane = async () => {
      for (let seq = queue.shift(); seq !== undefined && result !== 'stop'; seq = queue.shift()) {
        const failure = await this.sendChunk(meetingId, seq);
        if (failure) worst(failure);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, lane));
    return result;
  }

  /** One chunk: null once acknowledged or finally rejected (its audio kept), else how it failed. */
  private async sendChunk(meetingId: string, seq: number): Promise<Stop | null> {
    const chunk = await this.store.get([meetingId, seq]);
    if (!chunk) return null;
    const key = apiKey();
    const a = await answer('PUT', chunkPath(meetingId, seq), chunk.wav, {
      contentType: 'audio/wav',
      timeoutMs: 15_000,
    });
    const outcome = chunkOutcome(seq, a);
    if (outcome !== 'unreachable') this.reachable();
    if (outcome === 'acknowledged') {
      if (key) this.acceptedUnder.set(meetingId, key);
      await this.store.acknowledge([meetingId, seq]);
      this.set({
        pending: {
          ...this.state.pending,
          [meetingId]: Math.max(0, (this.state.pending[meetingId] ?? 1) - 1),
        },
        acknowledged: {
          ...this.state.acknowledged,
          [meetingId]: Math.max(this.state.acknowledged[meetingId] ?? -1, seq),
        },
      });
      // The chunk is kept whenever it comes, but a recording of a meeting ended elsewhere stops.
      const status = (a.body as { meeting?: { status?: unknown } } | null)?.meeting?.status;
      if (typeof status === 'string' && status !== 'created' && status !== 'recording') {
        this.close(
          meetingId,
          `the server says this meeting is no longer recording (it was ended elsewhere; it is ${status})`,
        );
      }
      return null;
    }
    if (outcome === 'rejected') {
      // Final for this chunk only: its audio is kept (and shown) and the meeting goes on.
      await this.store.reject([meetingId, seq], `${a.code ?? a.status}: ${a.message}`);
      if (codeIs(a.code, 'chunk.after_end') || codeIs(a.code, 'meeting.not_live')) {
        this.close(meetingId, 'the server says this meeting is no longer recording (it was ended elsewhere)');
      }
      return null;
    }
    if (outcome === 'not_found' && key !== null && this.acceptedUnder.get(meetingId) === key)
      return this.deletedOnServer(meetingId);
    return this.failed(meetingId, outcome, a, `Chunk ${seq}`);
  }

  /** A recording of this meeting must stop: the server no longer takes its audio. */
  private close(meetingId: string, reason: string): void {
    if (this.state.closed[meetingId]) return;
    this.set({ closed: { ...this.state.closed, [meetingId]: reason } });
  }

  /** 404 under the very key that sent this meeting's audio before: it was deleted on the server. */
  private deletedOnServer(meetingId: string): Stop {
    this.close(meetingId, 'this meeting was deleted on the server');
    this.set({
      trouble: {
        ...this.state.trouble,
        [meetingId]: {
          message:
            'This meeting was deleted on the server, so its audio kept in this browser cannot be sent. Download it, then discard it here.',
          retryAt: Infinity,
          notFound: true,
          deleted: true,
        },
      },
    });
    return 'failed';
  }

  private reachable(): void {
    this.offlineFailures = 0;
    this.offlineUntil = 0;
    if (this.state.offlineUntil !== null) this.set({ offlineUntil: null });
  }

  private failed(
    meetingId: string,
    outcome: 'sign_in' | 'not_found' | 'unreachable' | 'retry',
    a: Answer & { message: string },
    what: string,
  ): Stop {
    const now = Date.now();
    switch (outcome) {
      case 'sign_in':
        this.set({ needsSignIn: true });
        return 'stop';
      case 'unreachable':
        this.offlineUntil = now + backoffMs(this.offlineFailures++);
        this.set({ offlineUntil: this.offlineUntil });
        return 'stop';
      case 'not_found':
      case 'retry': {
        const failures = this.backoff.get(meetingId)?.failures ?? 0;
        const retryAt = now + backoffMs(failures);
        this.backoff.set(meetingId, { failures: failures + 1, retryAt });
        const message =
          outcome === 'not_found'
            ? 'The server does not know this meeting under the key this tab signed in with: it is a key of another workspace, or the meeting was deleted on the server. Its audio stays in this browser; sign in with a key of the workspace that owns it to send it, or download it and discard it here.'
            : codeIs(a.code, 'storage.quota_exceeded')
              ? `${what} was not accepted: the workspace's storage quota is full. The audio stays in this browser and is sent once space is freed.`
              : `${what} was not accepted yet (${a.code ?? `HTTP ${a.status}`}: ${a.message}). It stays in this browser and is tried again.`;
        this.set({
          trouble: {
            ...this.state.trouble,
            [meetingId]: { message, retryAt, notFound: outcome === 'not_found', deleted: false },
          },
        });
        return 'failed';
      }
    }
  }

  /** Re-reads counts from the store (no network); returns the stored meetings. */
  private async refresh(): Promise<StoredMeeting[]> {
    const keys = await this.store.pendingKeys();
    const meetings = await this.store.meetings();
    const pending: Record<string, number> = {};
    for (const [meetingId] of keys) pending[meetingId] = (pending[meetingId] ?? 0) + 1;
    const rejected: OutboxStatus['rejected'] = {};
    for (const r of await this.store.rejected())
      (rejected[r.meetingId] ??= []).push({ seq: r.seq, error: r.error, hasAudio: r.hasAudio });
    const endPending: Record<string, boolean> = {};
    for (const m of meetings) if (m.endRequested) endPending[m.meetingId] = true;
    this.withWork = [...new Set([...Object.keys(pending), ...Object.keys(endPending)])];
    this.set({ pending, rejected, endPending });
    return meetings;
  }
}

/** One sending round at a time across this browser's tabs (they share one IndexedDB outbox). */
async function exclusive(fn: () => Promise<void>): Promise<void> {
  if (!('locks' in navigator)) return fn();
  await navigator.locks.request('verbatim.outbox-sender', fn);
}
