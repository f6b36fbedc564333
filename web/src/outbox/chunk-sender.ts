import { ApiError, call, NetworkError } from '../api.ts';
import type { ChunkKey, ChunkStore } from './chunk-store.ts';

/** What the screen shows about audio not yet on the server. */
export interface OutboxStatus {
  /** Chunks captured here and not yet acknowledged, per meeting. */
  pending: Record<string, number>;
  /** Chunks the server refused for good, per meeting, with its reason. */
  rejected: Record<string, Array<{ seq: number; error: string }>>;
  /** Highest sequence number acknowledged in this page's life, per meeting. */
  acknowledged: Record<string, number>;
  /** Set while the server cannot be reached; the time of the next try. */
  offlineUntil: number | null;
  lastError: string | null;
  needsSignIn: boolean;
  /** Meetings whose End this page delivered from the outbox. */
  ended: Record<string, boolean>;
}

const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_CAP_MS = 10_000;

/** Refusals that no retry can change: the chunk is kept as rejected and shown, never resent. */
const FINAL_CODES = new Set([
  'chunk.settled_missing',
  'chunk.conflict',
  'chunk.corrupt',
  'chunk.bad_format',
  'chunk.format_changed',
  'meeting.not_recording',
  'meeting.not_live',
  'meeting.not_found',
]);

/**
 * Sends stored chunks in sequence order, one at a time, deleting each when the server
 * acknowledges it. A failure stops the round (sending later chunks past a gap would start the
 * server's gap patience against the one that failed) and the next round waits 1, 2, 4, 8, then
 * 10 s, or less when the browser says it is back online or a new chunk is captured. After a
 * meeting's last chunk is acknowledged, its End is delivered if it was requested.
 */
export class ChunkSender {
  private running = false;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private failures = 0;
  private readonly listeners = new Set<(s: OutboxStatus) => void>();
  private state: OutboxStatus = {
    pending: {},
    rejected: {},
    acknowledged: {},
    offlineUntil: null,
    lastError: null,
    needsSignIn: false,
    ended: {},
  };

  constructor(private readonly store: ChunkStore) {
    window.addEventListener('online', () => this.kick());
  }

  get status(): OutboxStatus {
    return this.state;
  }

  subscribe(fn: (s: OutboxStatus) => void): () => void {
    this.listeners.add(fn);
    fn(this.state);
    return () => this.listeners.delete(fn);
  }

  /** Starts a round now (or right after the one running). */
  kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.running) {
      this.again = true;
      return;
    }
    void this.round();
  }

  private set(patch: Partial<OutboxStatus>): void {
    this.state = { ...this.state, ...patch };
    for (const fn of this.listeners) fn(this.state);
  }

  private async round(): Promise<void> {
    this.running = true;
    this.again = false;
    let ok = true;
    try {
      ok = await this.sendAll();
    } catch (err) {
      ok = false;
      this.set({ lastError: err instanceof Error ? err.message : String(err) });
    } finally {
      this.running = false;
    }
    if (ok) {
      this.failures = 0;
      this.set({ offlineUntil: null });
      if (this.again) this.kick();
      return;
    }
    if (this.state.needsSignIn) return;
    const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** this.failures);
    this.failures++;
    this.set({ offlineUntil: Date.now() + delay });
    this.timer = setTimeout(() => this.kick(), delay);
  }

  /** One pass over the outbox; false when the server could not be reached. */
  private async sendAll(): Promise<boolean> {
    const keys = await this.store.pendingKeys();
    await this.refresh(keys);
    for (const key of keys) {
      const sent = await this.send(key);
      if (!sent) return false;
    }
    await this.refresh(await this.store.pendingKeys());
    for (const m of await this.store.meetings()) {
      if (!m.endRequested || (this.state.pending[m.meetingId] ?? 0) > 0) continue;
      try {
        await call('POST', `/v1/meetings/${m.meetingId}/end`);
      } catch (err) {
        if (err instanceof NetworkError || (err instanceof ApiError && err.status >= 500)) return false;
        // 409 (already ended) or 404: nothing left to deliver for this meeting.
      }
      await this.store.forget(m.meetingId);
      this.set({ ended: { ...this.state.ended, [m.meetingId]: true } });
    }
    return true;
  }

  /** True when the chunk is settled (acknowledged or refused for good). */
  private async send(key: ChunkKey): Promise<boolean> {
    const chunk = await this.store.get(key);
    if (!chunk) return true;
    const [meetingId, seq] = key;
    try {
      await call('PUT', `/v1/meetings/${meetingId}/chunks/${seq}`, chunk.wav, {
        contentType: 'audio/wav',
        timeoutMs: 15_000,
      });
      await this.store.acknowledge(key);
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
        needsSignIn: false,
      });
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof ApiError && err.status === 401) {
        this.set({ needsSignIn: true, lastError: message });
        return false;
      }
      if (err instanceof ApiError && isFinal(err)) {
        await this.store.reject(key, `${err.code}: ${message}`);
        await this.refresh(await this.store.pendingKeys());
        return true;
      }
      this.set({ lastError: err instanceof NetworkError ? 'The server cannot be reached.' : message });
      return false;
    }
  }

  private async refresh(keys: ChunkKey[]): Promise<void> {
    const pending: Record<string, number> = {};
    for (const [meetingId] of keys) pending[meetingId] = (pending[meetingId] ?? 0) + 1;
    const rejected: OutboxStatus['rejected'] = {};
    for (const r of await this.store.rejected())
      (rejected[r.meetingId] ??= []).push({ seq: r.seq, error: r.error });
    this.set({ pending, rejected });
  }
}

/** Refusals that no retry can change: 4xx other than 401 (sign in), 408 and 429 (try later). */
function isFinal(err: ApiError): boolean {
  if (FINAL_CODES.has(err.code)) return true;
  return (
    err.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 408 && err.status !== 429
  );
}
