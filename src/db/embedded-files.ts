/**
 * S6: what the embedded Postgres keeps in the data dir beside its cluster — the superuser's password
 * and the port chosen at first start — and the pg_hba.conf Verbatim writes at every start.
 * See docs/security.md "Embedded database and local files".
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ConfigError } from '../config.ts';
import { PRIVATE_FILE_MODE } from '../storage/private-dir.ts';

/** The superuser password in `<dataDir>/pg-password`, 0600, owned by the Verbatim process's user. */
export const PASSWORD_FILE = 'pg-password';
/** A password being set on a data dir of an older version, until Postgres has it (see rotation). */
export const PENDING_PASSWORD_FILE = 'pg-password.new';
/** The port chosen at first start when VERBATIM_EMBEDDED_PG_PORT is unset, reused at every restart. */
export const PORT_FILE = 'pg-port';
export const PORT_SETTING = 'VERBATIM_EMBEDDED_PG_PORT';

/** Whose files in the cluster directory: the `postgres` system user as root, else this process. */
export interface FileOwner {
  uid: number;
  gid: number;
}

export function newPassword(): string {
  // base64url: safe in a connection URL and in a SQL literal without escaping.
  return crypto.randomBytes(32).toString('base64url');
}

/** Writes `data` to `file` 0600 via a temporary and a rename, so a crash leaves old or new, never half. */
export function writePrivateFile(file: string, data: string, owner?: FileOwner): void {
  const temp = `${file}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  try {
    fs.writeFileSync(temp, data, { mode: PRIVATE_FILE_MODE, flag: 'wx' });
    fs.chmodSync(temp, PRIVATE_FILE_MODE);
    if (owner) fs.chownSync(temp, owner.uid, owner.gid);
    fs.renameSync(temp, file);
  } finally {
    fs.rmSync(temp, { force: true });
  }
}

/** The secret in `file`, or null when there is no such file; a file wider than 0600 is narrowed. */
export function readSecretFile(file: string): string | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    throw new ConfigError(`cannot read ${file}: ${code ?? String(err)}`);
  }
  const value = text.trim();
  if (value.length < 16) {
    throw new ConfigError(`${file} holds no password (empty or cut short): restore it from a backup`);
  }
  if ((fs.statSync(file).mode & 0o077) !== 0) fs.chmodSync(file, PRIVATE_FILE_MODE);
  return value;
}

/**
 * The SCRAM-SHA-256 verifier Postgres stores for `password` (RFC 7677, as pg's own clients compute it),
 * so ALTER ROLE never carries the password itself: a failed statement in the server log shows only this.
 */
export function scramVerifier(password: string): string {
  const iterations = 4096;
  const salt = crypto.randomBytes(16);
  const salted = crypto.pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = crypto.createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = crypto.createHash('sha256').update(clientKey).digest();
  const serverKey = crypto.createHmac('sha256', salted).update('Server Key').digest();
  const b64 = (b: Buffer) => b.toString('base64');
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}

/**
 * Every connection needs the password (SCRAM), over the socket in the cluster directory or TCP on
 * 127.0.0.1; nothing else is listened on. Written at every start, so an older version's file (which
 * allowed cleartext passwords) and any hand edit are replaced.
 */
export function writeHbaFile(pgDir: string, owner?: FileOwner): void {
  writePrivateFile(
    path.join(pgDir, 'pg_hba.conf'),
    [
      '# Written by Verbatim at every start of its embedded Postgres (src/db/embedded.ts); edits are',
      '# overwritten. Every connection needs the password in ../pg-password (docs/security.md).',
      'local all all scram-sha-256',
      'host  all all 127.0.0.1/32 scram-sha-256',
      '',
    ].join('\n'),
    owner,
  );
}

export type PortSource = 'setting' | 'recorded' | 'chosen';

/**
 * The port: the setting when given; else the one recorded at first start; else a free one, recorded
 * now — the port older versions always used (54329) when it is free, so an upgrade keeps its port.
 */
export async function resolvePort(
  dataDir: string,
  setting: number | null,
  preferred: number,
): Promise<{ port: number; source: PortSource }> {
  if (setting !== null) return { port: setting, source: 'setting' };
  const file = path.join(dataDir, PORT_FILE);
  let text: string | null = null;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== null) {
    const port = Number(text);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new ConfigError(`${file} holds "${text}", not a port: delete it to choose a free port again`);
    }
    return { port, source: 'recorded' };
  }
  const port = (await isPortFree(preferred)) ? preferred : await anyFreePort();
  writePrivateFile(file, `${port}\n`);
  return { port, source: 'chosen' };
}

/** Whether 127.0.0.1:`port` can be listened on right now. */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port was assigned'))));
    });
  });
}

/** The clear error for a port someone else listens on (the message names the port and the setting). */
export function portTakenError(port: number, source: PortSource, dataDir: string): ConfigError {
  const why =
    source === 'setting'
      ? `${PORT_SETTING}=${port} is in use by another process: set ${PORT_SETTING} to a free port`
      : `this data dir (${dataDir}) uses port ${port} (recorded in ${path.join(dataDir, PORT_FILE)} at its first start), and another process listens on it: stop that process, or set ${PORT_SETTING} to a free port`;
  return new ConfigError(`embedded Postgres cannot listen on 127.0.0.1:${port}: ${why}`);
}
