import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import path from 'node:path';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { BlobStore } from '../ports.ts';
import { makePrivateDir, mkdirPrivate, PRIVATE_FILE_MODE } from '../storage/private-dir.ts';

/** Temporaries of an interrupted atomic write carry this prefix (B7 removes old ones at start-up). */
export const TEMP_PREFIX = '.verbatim-upload-';

/** P4: a disk that is full, read-only (remounted after errors) or busy comes back: the work waits. */
const TRANSIENT_FS_CODES = new Set([
  'EIO',
  'EMFILE',
  'ENFILE',
  'EAGAIN',
  'EBUSY',
  'ETIMEDOUT',
  'ENOSPC',
  'EDQUOT',
  'EROFS',
]);

/**
 * Blobs as files under one root; writes go to a temporary and are renamed into place. S6: the tree
 * is 0700 and every file 0600, so no other OS user reads a recording.
 */
export class LocalBlobStore implements BlobStore {
  constructor(private readonly root: string) {}

  /**
   * S6, at start: creates the root 0700, or narrows one an older version made 0755. Entries older
   * versions wrote inside keep their modes, unreachable now through the private root.
   */
  async prepare(): Promise<void> {
    await makePrivateDir(this.root);
  }

  private pathOf(key: string): string {
    const resolved = path.resolve(this.root, key);
    if (!resolved.startsWith(path.resolve(this.root) + path.sep)) {
      throw new AppError(ErrorKind.permanent, 'storage.bad_key', 'object key escapes the blob root');
    }
    return resolved;
  }

  async put(key: string, data: Buffer): Promise<void> {
    const target = this.pathOf(key);
    const temp = path.join(path.dirname(target), `${TEMP_PREFIX}${randomUUID()}`);
    try {
      await mkdirPrivate(path.dirname(target));
      await fs.writeFile(temp, data, { mode: PRIVATE_FILE_MODE });
      await fs.rename(temp, target);
    } catch (err) {
      await fs.rm(temp, { force: true });
      throw classify(err, 'write');
    }
  }

  async putStream(key: string, source: Readable): Promise<void> {
    const target = this.pathOf(key);
    const temp = path.join(path.dirname(target), `${TEMP_PREFIX}${randomUUID()}`);
    const state: { sourceError: Error | null; writeError: Error | null } = {
      sourceError: null,
      writeError: null,
    };
    source.once('error', (err) => (state.sourceError ??= err));
    try {
      await mkdirPrivate(path.dirname(target));
      const file = createWriteStream(temp, { mode: PRIVATE_FILE_MODE });
      // (The pipeline fails the file with the source's own error too: that is not a write's.)
      file.once('error', (err) => {
        if (err !== state.sourceError) state.writeError ??= err;
      });
      await pipeline(source, file);
      await fs.rename(temp, target);
    } catch (err) {
      await fs.rm(temp, { force: true });
      // A failed write (a full disk) is the store's failure, even though the pipeline then fails
      // the source with it; otherwise the body failed (a client cut off), and that is what is said.
      if (state.writeError !== null) throw classify(state.writeError, 'write');
      if (state.sourceError !== null) throw state.sourceError;
      throw classify(err, 'write');
    }
  }

  async getStream(key: string): Promise<Readable> {
    try {
      const handle = await fs.open(this.pathOf(key), 'r');
      return handle.createReadStream();
    } catch (err) {
      throw classify(err, 'read');
    }
  }

  async get(key: string): Promise<Buffer> {
    try {
      return await fs.readFile(this.pathOf(key));
    } catch (err) {
      throw classify(err, 'read');
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await fs.rm(this.pathOf(key), { force: true });
    } catch (err) {
      throw classify(err, 'delete');
    }
  }

  /**
   * B7: removes temporaries left by writes that were interrupted (a crash between write and rename).
   * Only regular files named with TEMP_PREFIX and last modified more than `maxAgeMs` ago go; recent
   * temporaries (a write may be in flight), symlinks (never followed, never descended into),
   * directories and canonical names stay. `removed` lists paths relative to the root; `kept` counts
   * the prefixed entries left in place. A missing root has nothing to remove.
   */
  async removeStaleTemporaries(maxAgeMs = 3_600_000): Promise<{ removed: string[]; kept: number }> {
    const removed: string[] = [];
    let kept = 0;
    const cutoff = Date.now() - maxAgeMs;
    const pending = [this.root];
    try {
      while (pending.length > 0) {
        const dir = pending.pop()!;
        const names = await ignoreMissing(fs.readdir(dir));
        if (!names) continue;
        for (const name of names) {
          const full = path.join(dir, name);
          const stat = await ignoreMissing(fs.lstat(full));
          if (!stat) continue;
          const isTemp = name.startsWith(TEMP_PREFIX);
          if (stat.isDirectory()) {
            if (isTemp) kept++;
            pending.push(full);
          } else if (isTemp && stat.isFile() && stat.mtimeMs < cutoff) {
            const gone = await ignoreMissing(fs.unlink(full).then(() => true));
            if (gone) removed.push(path.relative(this.root, full));
          } else if (isTemp) {
            kept++;
          }
        }
      }
    } catch (err) {
      throw classify(err, 'cleanup');
    }
    return { removed: removed.sort(), kept };
  }
}

/** Resolves to undefined when the path vanished (or never existed): nothing to do there. */
async function ignoreMissing<T>(op: Promise<T>): Promise<T | undefined> {
  try {
    return await op;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function classify(err: unknown, op: string): AppError {
  if (err instanceof AppError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
  if (code === 'ENOENT' && op === 'write') {
    // Node's recursive mkdir says ENOENT for a directory a read-only file system refused: a write
    // that finds no directory it can make is storage that is not there, never an absent object.
    return new AppError(
      ErrorKind.transient,
      'storage.unavailable',
      'blob write failed: its directory could not be made (a read-only or missing file system)',
      { cause: err },
    );
  }
  if (code === 'ENOENT')
    return new AppError(ErrorKind.permanent, 'storage.not_found', `blob ${op}: not found`);
  const kind = TRANSIENT_FS_CODES.has(code) ? ErrorKind.transient : ErrorKind.unclassified;
  return new AppError(kind, 'storage.unavailable', `blob ${op} failed: ${code}`, { cause: err });
}
