import { answer, apiKey } from '../api.ts';
import { backoffMs, chunkOutcome, endOutcome, type Answer } from './answers.ts';
import type { ChunkStore, StoredMeeting } from './chunk-store.ts';

/** Why one meeting's audio or End is still waiting, and when it is tried again. */
export interface MeetingTrouble {
  message: string;
  retryAt: number;
  /** The meeting is unknown to the key this tab signed in with (another workspace's key?). */
  notFound: boolean;
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
  lastError: string | null;
  /** The server refused the key (401): nothing is sent until someone signs in again. */
  needsSignIn: boolean;
  /** Meetings whose End this page delivered from the outbox. */
  ended: Record<string, boolean>;
}

type Stop = 'done' | 'failed' | 'stop';

/**
 * Sends stored chunks, each meeting's in sequence order, one at a time, deleting a chunk only when
 * the server acknowledged that very chunk (answers.ts). A meeting's round stops at its first
 * failure (sending later chunks past a gap would start the server's gap patience against the one
 * that failed) and that meeting waits 1, 2, 4, 8, then 10 s before its next try; other meetings go
 * on, so one chunk that is refused for hours blocks only its own meeting. After a meeting's last
 * chunk is acknowledged its End is delivered, if it was requested. Nothing is sent without a key;
 * a 401 stops everything until the next sign-in. See docs/web-app.md.
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
  private readonly listeners = new Set<(s: OutboxStatus) => void>();
  private state: OutboxStatus = {
    pending: {},
    rejected: {},
    endPending: {},
    trouble: {},
    acknowledged: {},
    offlineUntil: null,
    lastError: null,
    needsSignIn: false,
    ended: {},
  };

  constructor(private readonly store: ChunkStore) {
    window.addEventListener('online', () => this.retryNow());
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

  /** Forgets every backoff and sends at once: the browser is back online, or someone signed in. */
  retryNow(): void {
    this.backoff.clear();
    this.offlineFailures = 0;
    this.offlineUntil = 0;
    this.set({ needsSignIn: false, trouble: {}, offlineUntil: null });
    this.kick();
  }

  private set(patch: Partial<OutboxStatus>): void {
    this.state = { ...this.state, ...patch };
    for (const fn of this.listeners) fn(this.state);
  }

  private async round(): Promise<void> {
    this.running = true;
    this.again = false;
    try {
      // No key, no round: an empty Bearer would only collect 401s.
      if (apiKey() && !this.state.needsSignIn) await exclusive(() => this.sendAll());
      else await this.refresh();
    } catch (err) {
      // IndexedDB itself failed: nothing was lost, try the whole round again later.
      this.offlineUntil = Date.now() + backoffMs(this.offlineFailures++);
      this.set({ lastError: err instanceof Error ? err.message : String(err) });
    } finally {
      this.running = false;
    }
    if (this.again) {
      this.kick();
      return;
    }
    this.schedule();
  }

  private schedule(): void {
    if (!apiKey() || this.state.needsSignIn) return;
    let next = Infinity;
    for (const id of this.withWork) {
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
      const result = await this.flushMeeting(meetingId, seqs, endRequested.has(meetingId));
      if (result === 'stop') break;
    }
    await this.refresh();
  }

  private async flushMeeting(meetingId: string, seqs: number[], endRequested: boolean): Promise<Stop> {
    for (const seq of seqs) {
      const chunk = await this.store.get([meetingId, seq]);
      if (!chunk) continue;
      const a = await answer('PUT', `/v1/meetings/${meetingId}/chunks/${seq}`, chunk.wav, {
        contentType: 'audio/wav',
        timeoutMs: 15_000,
      });
      const outcome = chunkOutcome(seq, a);
      if (outcome !== 'unreachable') this.reachable();
      if (outcome === 'acknowledged') {
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
          lastError: null,
        });
        continue;
      }
      if (outcome === 'rejected') {
        // Final for this chunk only: its audio is kept (and shown) and the meeting goes on.
        await this.store.reject([meetingId, seq], `${a.code ?? a.status}: ${a.message}`);
        continue;
      }
      return this.failed(meetingId, outcome, a, `Chunk ${seq}`);
    }
    if (endRequested) {
      const a = await answer('POST', `/v1/meetings/${meetingId}/end`);
      const outcome = endOutcome(a);
      if (outcome !== 'unreachable') this.reachable();
      if (outcome !== 'delivered') return this.failed(meetingId, outcome, a, 'End meeting');
      await this.store.forget(meetingId);
      this.set({ ended: { ...this.state.ended, [meetingId]: true } });
    }
    this.backoff.delete(meetingId);
    const { [meetingId]: _cleared, ...trouble } = this.state.trouble;
    this.set({ trouble });
    return 'done';
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
        this.set({
          needsSignIn: true,
          lastError: 'The server did not accept the API key this tab signed in with.',
        });
        return 'stop';
      case 'unreachable':
        this.offlineUntil = now + backoffMs(this.offlineFailures++);
        this.set({ offlineUntil: this.offlineUntil, lastError: 'The server cannot be reached.' });
        return 'stop';
      case 'not_found':
      case 'retry': {
        const failures = this.backoff.get(meetingId)?.failures ?? 0;
        const retryAt = now + backoffMs(failures);
        this.backoff.set(meetingId, { failures: failures + 1, retryAt });
        const message =
          outcome === 'not_found'
            ? 'The server does not know this meeting under the key this tab signed in with (is it a key of another workspace?). Its audio stays in this browser; sign in with a key of the workspace that owns it to send it.'
            : a.code === 'storage.quota_exceeded'
              ? `${what} was not accepted: the workspace's storage quota is full. The audio stays in this browser and is sent once space is freed.`
              : `${what} was not accepted yet (${a.code ?? `HTTP ${a.status}`}: ${a.message}). It stays in this browser and is tried again.`;
        this.set({
          trouble: {
            ...this.state.trouble,
            [meetingId]: { message, retryAt, notFound: outcome === 'not_found' },
          },
          lastError: message,
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
