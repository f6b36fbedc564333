/**
 * A process that stops a graphile-worker runner while its LISTEN is in flight and cuts that
 * connection, under the worker's own process guards. Usage: listen-race.ts <url> plain|transport.
 * With a plain pg.Pool the library releases the LISTEN client twice and the process exits 1
 * ("unhandled rejection; exiting"); with the worker's TransportPool it prints a JSON summary and
 * exits 0.
 */
import { EventEmitter } from 'node:events';
import { Logger, run, type Runner } from 'graphile-worker';
import pg from 'pg';
import { installProcessGuards } from '../../src/cli/process-guards.ts';
import { createLogger } from '../../src/log.ts';
import { TransportPool } from '../../src/worker/transport-pool.ts';

const [url, kind] = process.argv.slice(2) as [string, 'plain' | 'transport'];
installProcessGuards(createLogger('info', 'listen-race'));

let doubles = 0;
const pool =
  kind === 'plain'
    ? new pg.Pool({ connectionString: url })
    : new TransportPool({ connectionString: url }, () => void doubles++);
pool.on('error', () => undefined);

const events = new EventEmitter();
const current: { runner?: Runner } = {};
let releases = 0;
const releasedTwice = new Promise<void>((resolve) => {
  events.on('pool:listen:release', () => {
    if (++releases === 2) resolve();
  });
});
events.on('pool:listen:success', ({ client }: { client: pg.PoolClient }) => {
  client.on('error', () => undefined);
  void current.runner?.stop();
  (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
});
const runner = await run({
  pgPool: pool,
  taskList: { noop: async () => undefined },
  events,
  noHandleSignals: true,
  concurrency: 1,
  logger: new Logger(() => () => undefined),
});
current.runner = runner;
await runner.promise.catch(() => undefined);
await releasedTwice;
// Each release awaits its failed UNLISTEN before releasing the client: give both time to finish.
for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
const r = await pool.query<{ one: number }>('select 1 as one');
console.log(JSON.stringify({ releases, doubles, queryAfter: r.rows[0]!.one }));
await pool.end();
