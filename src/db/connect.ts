import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Logger } from '../log.ts';
import type { Database } from './schema.ts';
import { appConnectionString } from './roles.ts';
import { checkoutStatement } from './tenant.ts';

// bigint (int8) columns: counts and sizes here stay far below 2^53.
pg.types.setTypeParser(20, (value) => Number(value));

export const CHECKOUT_DEADLINE_MS = 5000;

/**
 * L12: a checkout is validated with a cheap query (the S10 role statement); a dead connection (a database restart cut it) is
 * destroyed and the next one tried, and checkout fails once no live connection was had within 5 s.
 * Without this, dead connections stay in line until they fail the next enqueue.
 */
export class ValidatingPool {
  readonly pool: pg.Pool;

  constructor(
    connectionString: string,
    private readonly log: Logger,
    max = 10,
    idleTransactionMs = 0,
  ) {
    this.pool = new pg.Pool({
      // S10: every connection starts as verbatim_all_workspaces, never as the login itself.
      connectionString: appConnectionString(connectionString),
      max,
      // A process paused inside a transaction (SIGSTOP, a frozen VM) holds its row locks; Postgres
      // ends such a session after this long so it cannot block every other process. 0: never.
      ...(idleTransactionMs > 0 ? { idle_in_transaction_session_timeout: idleTransactionMs } : {}),
      connectionTimeoutMillis: CHECKOUT_DEADLINE_MS,
      idleTimeoutMillis: 30_000,
    });
    // Without an 'error' listener an idle client's error (database restart) kills the process.
    this.pool.on('error', (err) => this.log.warn({ err: err.message }, 'idle database connection failed'));
    this.pool.on('connect', (client) => {
      client.on('error', (err) => this.log.warn({ err: err.message }, 'database connection failed'));
    });
  }

  async connect(): Promise<pg.PoolClient> {
    const deadline = Date.now() + CHECKOUT_DEADLINE_MS;
    let lastError: unknown;
    while (Date.now() < deadline) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        lastError = err;
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      try {
        // S10: the liveness check also gives the connection the role and workspace of the flow
        // that checks it out (tenant or system), so a setting never outlives its checkout.
        const { text, values } = checkoutStatement();
        await client.query(text, values);
        return client;
      } catch (err) {
        lastError = err;
        client.release(err instanceof Error ? err : true);
        // A refusal (the role cannot be set: a missing grant) is not a dead connection: another
        // connection would be refused the same way, so say so now instead of trying for 5 s.
        if (!connectionLost(err)) {
          throw new Error(`a database connection could not take its role: ${String(err)}`, { cause: err });
        }
      }
    }
    throw new Error(`no live database connection within ${CHECKOUT_DEADLINE_MS} ms: ${String(lastError)}`, {
      cause: lastError,
    });
  }

  async end(): Promise<void> {
    await this.pool.end();
  }
}

export { isDatabaseConnectionLoss } from './connection-errors.ts';

/** The error says the connection (or the server) is gone, rather than that a statement was refused. */
function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true; // a socket error, no SQLSTATE
  return code.startsWith('08') || code.startsWith('57P');
}

export interface DatabaseHandle {
  db: Kysely<Database>;
  pool: ValidatingPool;
  connectionString: string;
  close(): Promise<void>;
}

/**
 * The connection's user owns the tables, so row-level security does not apply to it: used outside a
 * tenant flow this handle is the system path, which sees every workspace on purpose (workers,
 * sweeps, auth). Inside one (runAsTenant: every authenticated API request) each checkout switches
 * to the tenant role and workspace (src/db/tenant.ts, docs/security.md).
 */
export function openDatabase(
  connectionString: string,
  log: Logger,
  max = 10,
  idleTransactionMs = 0,
): DatabaseHandle {
  const pool = new ValidatingPool(connectionString, log, max, idleTransactionMs);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    connectionString,
    close: async () => {
      await db.destroy();
    },
  };
}

/** Whether the database answers a trivial query (the health check). */
export async function databaseAnswers(db: Kysely<Database>): Promise<boolean> {
  try {
    await sql`select 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}
