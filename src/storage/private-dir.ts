import fs from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../config.ts';

/** S6: directories only their owner can enter, and files only their owner can read. */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;
/** The data dir as root: the embedded Postgres's system user (its group) may pass through, no more. */
export const TRAVERSE_DIR_MODE = 0o710;

/**
 * Creates `dir` if missing and sets it to 0700, or with `traverseGid` to 0710 with that group (the
 * data dir when the embedded Postgres runs as its own system user). mkdir's mode is masked by the
 * umask, so the mode is set explicitly; a directory an older version made wider is narrowed here.
 * Returns the mode it had when it was wider than wanted (null otherwise), for the log.
 */
export async function makePrivateDir(dir: string, traverseGid?: number): Promise<number | null> {
  await fs.mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const stat = await fs.stat(dir);
  const wanted = traverseGid === undefined ? PRIVATE_DIR_MODE : TRAVERSE_DIR_MODE;
  const had = stat.mode & 0o7777;
  // A shared folder (sticky and writable by all, as /tmp) is never narrowed: that would lock every
  // other user and service of the machine out of it.
  if ((had & 0o1000) !== 0 && (had & 0o002) !== 0) {
    throw new ConfigError(
      `${dir} is a shared folder (mode ${had.toString(8)}, as /tmp): give Verbatim a folder of its own (VERBATIM_DATA_DIR)`,
    );
  }
  try {
    if (traverseGid !== undefined && stat.gid !== traverseGid) await fs.chown(dir, stat.uid, traverseGid);
    if (had !== wanted) await fs.chmod(dir, wanted);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    throw new Error(
      `cannot make ${dir} private (mode ${wanted.toString(8)}): ${code}; it belongs to uid ${stat.uid}, this process runs as uid ${process.getuid?.() ?? '?'}`,
      { cause: err },
    );
  }
  return (had & ~wanted) !== 0 ? had : null;
}

/**
 * mkdir -p where every directory it creates is 0700 whatever the umask. Existing directories are
 * left as they are (the root was made private at start; see LocalBlobStore.prepare).
 */
export async function mkdirPrivate(dir: string): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if (first === undefined) return;
  // Only the directories this call created: from `first` down to `dir`.
  const top = path.resolve(first);
  const below = path.relative(top, path.resolve(dir));
  let current = top;
  await fs.chmod(current, PRIVATE_DIR_MODE);
  if (below.startsWith('..') || path.isAbsolute(below)) return;
  for (const part of below.split(path.sep).filter((p) => p.length > 0)) {
    current = path.join(current, part);
    await fs.chmod(current, PRIVATE_DIR_MODE);
  }
}
