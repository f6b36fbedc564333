import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { BlobStore } from '../ports.ts';

/** Temporaries of an interrupted atomic write carry this prefix (B7 removes old ones at start-up). */
export const TEMP_PREFIX = '.verbatim-upload-';

const TRANSIENT_FS_CODES = new Set(['EIO', 'EMFILE', 'ENFILE', 'EAGAIN', 'EBUSY', 'ETIMEDOUT', 'ENOSPC']);

/** Blobs as files under one root; writes go to a temporary and are renamed into place. */
export class LocalBlobStore implements BlobStore {
  constructor(private readonly root: string) {}

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
      await fs.mkdir(path.dirname(target), { recursive: true });
      await fs.writeFile(temp, data);
      await fs.rename(temp, target);
    } catch (err) {
      await fs.rm(temp, { force: true });
      throw classify(err, 'write');
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
}

function classify(err: unknown, op: string): AppError {
  if (err instanceof AppError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
  if (code === 'ENOENT')
    return new AppError(ErrorKind.permanent, 'storage.not_found', `blob ${op}: not found`);
  const kind = TRANSIENT_FS_CODES.has(code) ? ErrorKind.transient : ErrorKind.unclassified;
  return new AppError(kind, 'storage.unavailable', `blob ${op} failed: ${code}`, { cause: err });
}
