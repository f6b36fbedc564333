import pg from 'pg';

type ConnectCallback = (
  err: Error | undefined,
  client?: pg.PoolClient,
  done?: (release?: unknown) => void,
) => void;

/**
 * The pool graphile-worker runs on. It differs from pg.Pool in one way: releasing a client twice
 * is reported to `onDoubleRelease` (with the second caller's stack) instead of thrown.
 *
 * Why (V8): graphile-worker 0.17.3 releases its LISTEN client from two
 * places when a runner is stopped while its LISTEN is in flight and the connection is cut — the
 * stop's release and the failed LISTEN's error handler each run `UNLISTEN`, both fail, and both
 * release. The second release throws inside an async function nobody awaits, and the unhandled
 * rejection would end the worker process. A second release of the same client has nothing left to do,
 * so here it is logged and ignored; the first release already returned or removed the client.
 */
export class TransportPool extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly onDoubleRelease: (stack: string) => void,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    if (callback === undefined) {
      return super.connect().then((client) => {
        this.releaseOnce(client);
        return client;
      });
    }
    super.connect((err, client) => {
      if (err || client === undefined) return callback(err);
      // This checkout's release, taken now: pg-pool gives the client a new one at every checkout,
      // so looking it up at call time would let a late second call release the next holder's.
      const release = this.releaseOnce(client);
      callback(undefined, client, (e?: unknown) => release(e as Error | boolean | undefined));
    });
  }

  /** Makes this checkout's `client.release` idempotent, and returns it. */
  private releaseOnce(client: pg.PoolClient): (err?: Error | boolean) => void {
    const release = client.release.bind(client);
    let released = false;
    const once = (err?: Error | boolean) => {
      if (released) return this.onDoubleRelease(new Error('released twice').stack ?? '');
      released = true;
      release(err);
    };
    client.release = once;
    return once;
  }
}
