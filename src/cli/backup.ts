import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { TEMP_PREFIX } from '../adapters/local-blob-store.ts';
import { pathOnlyEnv, type Config } from '../config.ts';
import { openDatabase } from '../db/connect.ts';
import { MIGRATION_NAMES } from '../db/migrate.ts';
import type { Logger } from '../log.ts';
import { migrationsNotApplied } from '../ops/readiness-store.ts';
import { UsageError } from './usage-error.ts';

const run = promisify(execFile);
const out = (line: string) => process.stdout.write(`${line}\n`);

const DUMP = 'database.dump';
const BLOBS = 'blobs';
const MANIFEST = 'manifest.json';
/** U7: the key that seals the secrets kept in the database, when it is the data dir's file. */
const SECRET_KEY_FILE = 'secret-key';

interface Manifest {
  format: 1;
  createdAt: string;
  /** The migrations the backed-up database had applied (this release's, when it was current). */
  release: { migrations: number; last: string };
  storage: 'local' | 's3';
  blobFiles: number;
  /** `file`: the data dir's secret key is in the backup; `setting`: VERBATIM_SECRET_KEY was set. */
  secretKey: 'file' | 'setting';
}

/**
 * The owner's URL split for pg_dump/pg_restore: the password goes in PGPASSWORD, never on a command
 * line another user of the machine could read in `ps`.
 */
function ownerConnection(config: Config): { given: string; url: string; env: NodeJS.ProcessEnv } {
  const given = config.migrationDatabaseUrl ?? config.databaseUrl;
  if (!given) {
    throw new UsageError(
      'the embedded database is backed up by copying the data dir while Verbatim is stopped (docs/deploy.md, Backup and restore); backup and restore are for DATABASE_URL installs',
    );
  }
  const url = new URL(given);
  const password = decodeURIComponent(url.password);
  url.password = '';
  return {
    given,
    url: url.toString(),
    env: { ...pathOnlyEnv(), ...(password ? { PGPASSWORD: password } : {}) },
  };
}

/** Copies the local blob tree into `to`, keeping what is there; temporaries of unfinished writes stay out. */
async function copyBlobs(from: string, to: string): Promise<number> {
  try {
    await fs.access(from);
  } catch {
    return 0;
  }
  await fs.cp(from, to, {
    recursive: true,
    force: false,
    errorOnExist: false,
    preserveTimestamps: true,
    filter: (source) => !path.basename(source).startsWith(TEMP_PREFIX),
  });
  return countFiles(to);
}

async function countFiles(dir: string): Promise<number> {
  let n = 0;
  for (const entry of await fs.readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) n++;
  return n;
}

/**
 * P6: `verbatim backup DIR`. The database as pg_dump's custom format (one consistent snapshot, taken
 * as the schema's owner) and, for local storage, the blob tree copied before and after the dump: so
 * every object the snapshot refers to and that still existed is in the backup (objects made or
 * deleted around the dump are at worst extra: the restored install's cleanup finds them orphans).
 * An S3 bucket is copied with the store's own tools (docs/deploy.md).
 */
export async function backupCommand(config: Config, log: Logger, dir: string | undefined): Promise<number> {
  if (!dir) throw new UsageError('backup needs a DIR to write into (it must be empty or absent)');
  const target = path.resolve(dir);
  await fs.mkdir(target, { recursive: true, mode: 0o700 });
  if ((await fs.readdir(target)).length > 0) throw new UsageError(`${target} is not empty`);
  await fs.chmod(target, 0o700);
  const { given, url, env } = ownerConnection(config);
  const local = config.storage.kind === 'local';
  const blobRoot = path.join(config.dataDir, 'blobs');
  if (local) await copyBlobs(blobRoot, path.join(target, BLOBS));
  const database = openDatabase(given, log.child({ level: 'silent' }), 1);
  let applied: string[];
  try {
    const missing = new Set(await migrationsNotApplied(database.db, MIGRATION_NAMES));
    applied = MIGRATION_NAMES.filter((m) => !missing.has(m));
  } finally {
    await database.close();
  }
  await run('pg_dump', ['--format=custom', `--file=${path.join(target, DUMP)}`, `--dbname=${url}`], {
    env,
    maxBuffer: 16 * 1024 * 1024,
  });
  // Every transcript is in it: readable by the owner only, whatever the umask.
  await fs.chmod(path.join(target, DUMP), 0o600);
  const blobFiles = local ? await copyBlobs(blobRoot, path.join(target, BLOBS)) : 0;
  // Without the key the restored install cannot open the webhook secrets it seals (U7).
  const secretKey = config.secretKey === null ? 'file' : 'setting';
  if (secretKey === 'file') {
    await fs.copyFile(path.join(config.dataDir, SECRET_KEY_FILE), path.join(target, SECRET_KEY_FILE));
    await fs.chmod(path.join(target, SECRET_KEY_FILE), 0o600);
  }
  const manifest: Manifest = {
    format: 1,
    createdAt: new Date().toISOString(),
    release: { migrations: applied.length, last: applied.at(-1) ?? '' },
    storage: config.storage.kind,
    blobFiles,
    secretKey,
  };
  await fs.writeFile(path.join(target, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  out(`database dumped to ${path.join(target, DUMP)} (${manifest.release.migrations} migrations applied)`);
  out(
    local
      ? `${blobFiles} stored objects copied to ${path.join(target, BLOBS)}`
      : `storage is the S3 bucket ${config.storage.bucket}: copy it with your S3 tools (docs/deploy.md)`,
  );
  out(
    secretKey === 'file'
      ? `the data dir's secret key is in the backup: keep the backup as secret as the database`
      : 'VERBATIM_SECRET_KEY is not in the backup: the restored install needs the same one',
  );
  return 0;
}

/**
 * P6: `verbatim restore DIR` into an empty database (its roles made as docs/security.md says) and
 * this install's data dir. The next start applies any migrations newer than the backup; in-flight
 * work resumes through the usual recovery (leases run out, lost queue messages are found again).
 */
export async function restoreCommand(config: Config, log: Logger, dir: string | undefined): Promise<number> {
  if (!dir) throw new UsageError('restore needs the DIR a backup wrote');
  const source = path.resolve(dir);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await fs.readFile(path.join(source, MANIFEST), 'utf8')) as Manifest;
  } catch {
    throw new UsageError(`${source} holds no backup (no readable ${MANIFEST})`);
  }
  if (manifest.release.migrations > MIGRATION_NAMES.length) {
    throw new UsageError(
      `the backup is of a newer release (${manifest.release.migrations} migrations, this one knows ${MIGRATION_NAMES.length}): restore it with that release or a later one`,
    );
  }
  const { given, url, env } = ownerConnection(config);
  const keyFile = path.join(config.dataDir, SECRET_KEY_FILE);
  if (manifest.secretKey === 'file' && config.secretKey === null) {
    const backedUp = (await fs.readFile(path.join(source, SECRET_KEY_FILE), 'utf8')).trim();
    const here = await fs.readFile(keyFile, 'utf8').then(
      (k) => k.trim(),
      () => null,
    );
    if (here !== null && here !== backedUp) {
      throw new UsageError(
        `${keyFile} is another key than the backup's: restore into a new data dir (VERBATIM_DATA_DIR)`,
      );
    }
  } else if (manifest.secretKey === 'setting' && config.secretKey === null) {
    throw new UsageError('the backup was sealed with VERBATIM_SECRET_KEY: set the same one to restore it');
  }
  const database = openDatabase(given, log.child({ level: 'silent' }), 1);
  try {
    // Only a missing migration table means an empty database; any other failure stops the restore.
    const missing = await migrationsNotApplied(database.db, MIGRATION_NAMES).catch((err: unknown) => {
      if ((err as { code?: string }).code === '42P01') return null;
      throw err;
    });
    if (missing !== null && missing.length < MIGRATION_NAMES.length) {
      throw new UsageError('the database is not empty: restore into a new database (docs/deploy.md)');
    }
  } finally {
    await database.close();
  }
  // The files first (the key, the objects): alone they are harmless, while rows without their
  // objects would fail meetings.
  if (manifest.secretKey === 'file' && config.secretKey === null) {
    await fs.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    await fs.copyFile(path.join(source, SECRET_KEY_FILE), keyFile).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await fs.chmod(keyFile, 0o600);
  }
  if (manifest.storage === 'local' && config.storage.kind === 'local') {
    const copied = await copyBlobs(path.join(source, BLOBS), path.join(config.dataDir, 'blobs'));
    out(`${copied} stored objects in ${path.join(config.dataDir, 'blobs')}`);
  } else {
    out('storage: restore the bucket with your S3 tools before starting (docs/deploy.md)');
  }
  await run(
    'pg_restore',
    ['--exit-on-error', '--single-transaction', `--dbname=${url}`, path.join(source, DUMP)],
    { env, maxBuffer: 16 * 1024 * 1024 },
  );
  out(`database restored (${manifest.release.migrations} migrations; the next start applies newer ones)`);
  return 0;
}
