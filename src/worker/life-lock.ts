import pg from 'pg';
import { appConnectionString } from '../db/roles.ts';
import type { Logger } from '../log.ts';

/** J18: the first key of every worker's life lock (two-int advisory locks: namespace, worker). */
export const LIFE_LOCK_NAMESPACE = 0x56425431;

const RECONNECT_MIN_MS = 50;
const RECONNECT_MAX_MS = 1000;

/**
 * J18: a worker's life, held as a session-level advisory lock on a connection of its own. Postgres
 * releases it the moment the worker's process dies (the socket closes), so the other workers can
 * tell a dead worker from a slow one without waiting for its lease. A stopped (SIGSTOP) worker
 * keeps its socket and so its lock: only its lease recovers it.
 *
 * The connection is re-made and the lock re-taken whenever it drops (a database restart, a
 * terminated backend); each time it is taken, `onTaken` records it on the worker's row (the
 * time it was taken is what tells a free lock after a restart from a dead worker).
 */
export class LifeLock {
  private client: pg.Client | null = null;
  private closed = false;
  private reconnectMs = RECONNECT_MIN_MS;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly connectionString: string,
    readonly key: number,
    private readonly log: Logger,
    private readonly onTaken: (client: pg.Client) => Promise<void>,
  ) {}

  /** Takes the lock; throws when the database cannot be reached (the worker does not start). */
  async start(): Promise<void> {
    await this.take();
  }

  private async take(): Promise<void> {
    const client = new pg.Client({ connectionString: appConnectionString(this.connectionString) });
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'life-lock connection failed; taking the lock again');
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query("set application_name = 'verbatim-life-lock'");
      await client.query('select pg_advisory_lock($1, $2)', [LIFE_LOCK_NAMESPACE, this.key]);
      if (this.closed) {
        await client.end();
        return;
      }
      await this.onTaken(client);
      this.client = client;
      this.reconnectMs = RECONNECT_MIN_MS;
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      throw err;
    }
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
      this.take().catch((err: unknown) => {
        this.log.warn({ err: String(err) }, 'could not take the life lock again; retrying');
        this.schedule();
      });
    }, delay);
    this.retryTimer.unref();
  }

  /** Releases the lock (after the worker's row says it stopped, so nobody reads it as a death). */
  async stop(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
