// A process with Verbatim's process guards and a pg connection nobody listens to for errors (as a
// library's pool leaves one while it closes). It prints its backend's pid, and "lived" once the
// caller has terminated that backend and nothing is left to do.
import pg from 'pg';
import { installProcessGuards } from '../../src/cli/process-guards.ts';
import { createLogger } from '../../src/log.ts';

installProcessGuards(createLogger('warn'));
const client = new pg.Client({ connectionString: process.argv[2] });
await client.connect();
const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
// Nothing else keeps it running: once the connection is gone it exits, 0 if it lived through it.
process.on('beforeExit', () => process.stdout.write('lived\n'));
process.stdout.write(`pid ${rows[0]!.pid}\n`);
