import path from 'node:path';
import type { Config } from '../config.ts';
import { assertNever } from '../domain/errors.ts';
import type { BlobStore } from '../ports.ts';
import { LocalBlobStore } from './local-blob-store.ts';
import { S3BlobStore } from './s3-blob-store.ts';

/** The blob store the settings pick: files under the data dir, or an S3(-compatible) bucket. */
export function createBlobStore(config: Config): BlobStore {
  const storage = config.storage;
  switch (storage.kind) {
    case 'local':
      return new LocalBlobStore(path.join(config.dataDir, 'blobs'));
    case 's3':
      return new S3BlobStore({
        bucket: storage.bucket,
        endpoint: storage.endpoint || undefined,
        region: storage.region,
        accessKeyId: storage.accessKeyId || undefined,
        secretAccessKey: storage.secretAccessKey || undefined,
        forcePathStyle: storage.forcePathStyle,
      });
    default:
      return assertNever(storage.kind, 'storage kind');
  }
}
