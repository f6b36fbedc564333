import pg from 'pg';
import { appConnectionString } from '../db/roles.ts';
import type { Db } from '../db/schema.ts';
import { asSystem } from '../db/tenant.ts';
import type { Logger } from '../log.ts';
import { STREAM_CHANNEL, streamHeads } from '../meetings/stream-store.ts';

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;
/** F3: the shared poll looks at every followed meeting this often, for a notification lost… */
const POLL_MS = 5_000;
/** …and this often while notifications are not arriving (no LISTEN connection, or it is down). */
const POLL_UNHEARD_MS = 1_000;

/**
 * L23: one LISTEN connection per api process, shared by every stream it serves. A notification
 * carries a meeting's id and only wakes that meeting's streams, which then read the rows: a lost
 * or merged notification costs nothing but a little delay, because every stream also looks on its
 * own every few seconds. When the connection is re-made (a database restart, a terminated backend)
 * every stream is woken, for what it may have missed in between.
 *
 * LISTEN needs a session of its own: behind a transaction-pooling proxy notifications do not
 * arrive, and the shared poll finds the changes (docs/live-meetings.md, "Following a meeting").
 *
 * F3: the poll is shared too. One query every few seconds reads where each followed meeting's
 * stream stands, and wakes a meeting's streams only when that moved (or rows wait for a position),
 * so a thousand idle streams cost one query per poll, not a thousand.
 */
export class StreamHub {
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private closed = false;
  private reconnectMs = RECONNECT_MIN_MS;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly subscribers = new Map<string, Set<() => void>>();
  /** Where each followed meeting's stream stood at the last poll ('gone' when it was deleted). */
  private readonly heads = new Map<string, string>();
  private pollTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly connectionString: string,
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  /** Calls `wake` whenever the meeting may have changed; returns the unsubscribe. */
  subscribe(meetingId: string, wake: () => void): () => void {
    let set = this.subscribers.get(meetingId);
    if (!set) this.subscribers.set(meetingId, (set = new Set()));
    set.add(wake);
    this.ensureConnected();
    this.schedulePoll();
    return () => {
      set.delete(wake);
      if (set.size === 0) this.subscribers.delete(meetingId);
    };
  }

  /** Whether notifications are arriving now (false while the connection is being re-made). */
  get listening(): boolean {
    return this.client !== null;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.pollTimer) clearTimeout(this.pollTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private schedulePoll(): void {
    if (this.closed || this.pollTimer || this.subscribers.size === 0) return;
    this.pollTimer = setTimeout(
      () => {
        void this.poll().finally(() => {
          this.pollTimer = null;
          this.schedulePoll();
        });
      },
      this.listening ? POLL_MS : POLL_UNHEARD_MS,
    );
    this.pollTimer.unref();
  }

  /** One read of every followed meeting's position; the streams of those that moved are woken. */
  private async poll(): Promise<void> {
    const ids = [...this.subscribers.keys()];
    try {
      const heads = await asSystem(() => streamHeads(this.db, ids));
      for (const id of ids) {
        const now = heads.get(id);
        const key = now ? String(now.head) : 'gone';
        if (this.heads.get(id) === key && !now?.unpositioned) continue;
        this.heads.set(id, key);
        for (const wake of this.subscribers.get(id) ?? []) wake();
      }
      for (const id of this.heads.keys()) if (!this.subscribers.has(id)) this.heads.delete(id);
    } catch (err) {
      this.log.warn({ err: String(err) }, 'stream poll failed; trying again');
    }
  }

  private ensureConnected(): void {
    if (this.closed || this.client || this.connecting || this.retryTimer) return;
    this.connecting = this.connect()
      .catch((err: unknown) => {
        this.log.warn(
          { err: String(err) },
          'stream notifications unavailable; streams poll until they return',
        );
        this.schedule();
      })
      .finally(() => {
        this.connecting = null;
      });
  }

  private async connect(): Promise<void> {
    // TCP keepalive: a connection that died without a word is noticed, not listened on for ever.
    const client = new pg.Client({
      connectionString: appConnectionString(this.connectionString),
      keepAlive: true,
    });
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'stream notification connection failed; connecting again');
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    client.on('notification', (msg) => {
      if (msg.channel !== STREAM_CHANNEL || !msg.payload) return;
      for (const wake of this.subscribers.get(msg.payload) ?? []) wake();
    });
    try {
      await client.connect();
      await client.query("set application_name = 'verbatim-stream-listener'");
      await client.query(`listen ${STREAM_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.reconnectMs = RECONNECT_MIN_MS;
    // Whatever changed while nobody listened.
    for (const set of this.subscribers.values()) for (const wake of set) wake();
  }

  private lost(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = null;
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.retryTimer) return;
    const delay = this.reconnectMs;
    this.reconnectMs = Math.min(RECONNECT_MAX_MS, this.reconnectMs * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.subscribers.size > 0) this.ensureConnected();
    }, delay);
    this.retryTimer.unref();
  }
}
