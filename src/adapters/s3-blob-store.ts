import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
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
  /** B10: the part size of a streamed upload (default 8 MiB; S3's minimum is 5 MiB). */
  partBytes?: number;
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
  private readonly partBytes: number;

  constructor(options: S3BlobStoreOptions) {
    this.bucket = options.bucket;
    this.partBytes = options.partBytes ?? 8 * 1024 * 1024;
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

  /**
   * B10: a multipart upload with at most two parts (2 × `partBytes`) held at once; a body smaller
   * than one part is put whole. The object appears only when the upload completes; any failure
   * aborts the upload, so no object and no parts stay behind.
   */
  async putStream(key: string, source: Readable): Promise<void> {
    const upload: { error: Error | null } = { error: null };
    let uploadId: string | undefined;
    const parts: Array<{ PartNumber: number; ETag: string | undefined }> = [];
    const inFlight = new Set<Promise<void>>();
    const state: { failed: Error | null } = { failed: null };
    const send = (body: Buffer, partNumber: number) => {
      const p = (async () => {
        const out = await this.client.send(
          new UploadPartCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: partNumber,
            Body: body,
          }),
        );
        parts.push({ PartNumber: partNumber, ETag: out.ETag });
      })().catch((err: unknown) => {
        state.failed ??= err instanceof Error ? err : new Error(String(err));
      });
      const tracked = p.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    };
    try {
      let pending: Buffer[] = [];
      let size = 0;
      let partNumber = 0;
      try {
        for await (const piece of source as AsyncIterable<Buffer>) {
          pending.push(piece);
          size += piece.length;
          while (size >= this.partBytes) {
            const whole = Buffer.concat(pending);
            const body = whole.subarray(0, this.partBytes);
            const rest = whole.subarray(this.partBytes);
            pending = rest.length > 0 ? [Buffer.from(rest)] : [];
            size = rest.length;
            if (uploadId === undefined) {
              // The store's failure, not the body's: classified below like any other.
              const created = await this.client
                .send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key }))
                .catch((err: unknown) => {
                  state.failed ??= err instanceof Error ? err : new Error(String(err));
                  throw err;
                });
              uploadId = created.UploadId;
            }
            if (inFlight.size >= 2) await Promise.race(inFlight);
            if (state.failed !== null) throw state.failed;
            send(body, ++partNumber);
          }
        }
      } catch (err) {
        if (state.failed === null) upload.error = err instanceof Error ? err : new Error(String(err));
        throw err;
      }
      const rest = Buffer.concat(pending);
      if (uploadId === undefined) {
        await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: rest }));
        return;
      }
      if (rest.length > 0) send(rest, ++partNumber);
      await Promise.all(inFlight);
      if (state.failed !== null) throw state.failed;
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          UploadId: uploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
    } catch (err) {
      await Promise.all(inFlight);
      if (uploadId !== undefined) {
        await this.client
          .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }))
          .catch(() => undefined);
      }
      if (upload.error !== null) throw upload.error;
      throw classify(err, 'write');
    }
  }

  async getStream(key: string): Promise<Readable> {
    try {
      const result = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if (!result.Body) return Readable.from([]);
      return result.Body as Readable;
    } catch (err) {
      throw classify(err, 'read');
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
