import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { AppError, ErrorKind, networkErrorCode } from '../domain/errors.ts';
import type { BlobStore } from '../ports.ts';

export interface S3BlobStoreOptions {
  bucket: string;
  /** An S3-compatible endpoint (MinIO, s3rver); omit for AWS itself. */
  endpoint?: string;
  region: string;
  /** Both or neither; with neither, the SDK's default credential chain applies. */
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** Longest a connection may take to open (default 5 s). */
  connectionTimeoutMs?: number;
  /**
   * Longest a request's socket may sit idle (default 30 s). Deliberately no cap on a whole request:
   * a 500 MB recording on a slow link may take long, but it must keep moving.
   */
  idleTimeoutMs?: number;
}

/** S3 error names that mean "slow down or try again shortly". */
const TRANSIENT_S3_NAMES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'RequestTimeout',
  'RequestTimeoutException',
  'InternalError',
  'ServiceUnavailable',
  'TimeoutError',
]);

/** Blobs as objects in one bucket; a put is atomic on the server side, so no temporaries. */
export class S3BlobStore implements BlobStore {
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(options: S3BlobStoreOptions) {
    this.bucket = options.bucket;
    const { accessKeyId, secretAccessKey } = options;
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint || undefined,
      forcePathStyle: options.forcePathStyle,
      credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
      maxAttempts: 2,
      requestHandler: {
        connectionTimeout: options.connectionTimeoutMs ?? 5_000,
        socketTimeout: options.idleTimeoutMs ?? 30_000,
      },
      // Many S3-compatible servers reject the newer default checksum headers/trailers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, data: Buffer): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: data }));
    } catch (err) {
      throw classify(err, 'write');
    }
  }

  async get(key: string): Promise<Buffer> {
    try {
      const result = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!result.Body) return Buffer.alloc(0);
      const bytes = await result.Body.transformToByteArray();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (err) {
      throw classify(err, 'read');
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      // S3 answers 204 for a missing key; some compatible servers say NoSuchKey instead.
      if (errorName(err) === 'NoSuchKey') return;
      throw classify(err, 'delete');
    }
  }

  /** Closes the client's sockets; the store is unusable afterwards. */
  close(): void {
    this.client.destroy();
  }
}

function errorName(err: unknown): string | undefined {
  const name = (err as { name?: unknown } | null)?.name;
  return typeof name === 'string' ? name : undefined;
}

function httpStatus(err: unknown): number | undefined {
  const status = (err as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * Only the error name, network code and HTTP status reach the message: server-supplied text and
 * anything the SDK might attach stay out of what is persisted or logged (the secret never gets in).
 */
function classify(err: unknown, op: string): AppError {
  if (err instanceof AppError) return err;
  const name = errorName(err) ?? 'unknown';
  const status = httpStatus(err);
  if (name === 'NoSuchKey' && op === 'read') {
    return new AppError(ErrorKind.permanent, 'storage.not_found', `blob ${op}: not found`);
  }
  const net = networkErrorCode(err);
  const what = net ?? (status === undefined ? name : `${name} (HTTP ${status})`);
  const transient =
    net !== undefined ||
    TRANSIENT_S3_NAMES.has(name) ||
    (status !== undefined && (status >= 500 || status === 429));
  const kind = transient ? ErrorKind.transient : ErrorKind.unclassified;
  return new AppError(kind, 'storage.unavailable', `blob ${op} failed: ${what}`, { cause: err });
}
