import pg from 'pg';

type ConnectCallback = (
  err: Error | undefined,
  client?: pg.PoolClient,
  done?: (release?: unknown) => void,
) => void;

/**
 * The pool graphile-worker runs on. It differs from pg.Pool in one way: releasing a client twice
 * is reported to `onDoubleRelease` instead of thrown.
 *
 * Why (V8, found by the simulation): graphile-worker 0.17.3 releases its LISTEN client from two
 * places when a runner is stopped while its LISTEN is in flight and the connection is cut — the
 * stop's release and the failed LISTEN's error handler each run `UNLISTEN`, both fail, and both
 * release. The second release throws inside an async function nobody awaits, and the unhandled
 * rejection ended the worker process. A second release of the same client has nothing left to do,
 * so here it is logged and ignored; the first release already returned or removed the client.
 */
export class TransportPool extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly onDoubleRelease: () => void,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<pg.PoolClient> | void {
    if (callback === undefined) {
      return super.connect().then((client) => this.releaseOnce(client));
    }
    super.connect((err, client) => {
      if (err || client === undefined) return callback(err);
      const once = this.releaseOnce(client);
      callback(undefined, once, (e?: unknown) => once.release(e as Error | boolean | undefined));
    });
  }

  private releaseOnce(client: pg.PoolClient): pg.PoolClient {
    const release = client.release.bind(client);
    let released = false;
    client.release = (err?: Error | boolean) => {
      if (released) return this.onDoubleRelease();
      released = true;
      release(err);
    };
    return client;
  }
}
