import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readlink, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import S3rver from 's3rver';
import { createBlobStore } from '../src/adapters/blob-store-factory.ts';
import { LocalBlobStore, TEMP_PREFIX } from '../src/adapters/local-blob-store.ts';
import { S3BlobStore } from '../src/adapters/s3-blob-store.ts';
import type { S3Client } from '@aws-sdk/client-s3';
import { loadConfig } from '../src/config.ts';
import { AppError, ErrorKind } from '../src/domain/errors.ts';
import type { BlobStore } from '../src/ports.ts';

const BUCKET = 'verbatim-test';
const SECRET = 'S3RVER-do-not-leak-7f3a9c';

let dir = '';
let s3rver: S3rver | undefined;
let endpoint = '';
const s3Stores: S3BlobStore[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'verbatim-blob-stores-test-'));
  s3rver = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: join(dir, 's3rver'),
    configureBuckets: [{ name: BUCKET, configs: [] }],
  });
  const address = await s3rver.run();
  endpoint = `http://127.0.0.1:${address.port}`;
});

after(async () => {
  for (const store of s3Stores) store.close();
  await s3rver?.close();
  await rm(dir, { recursive: true, force: true });
});

function s3Store(overrides: Partial<ConstructorParameters<typeof S3BlobStore>[0]> = {}): S3BlobStore {
  const store = new S3BlobStore({
    bucket: BUCKET,
    endpoint,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
    ...overrides,
  });
  s3Stores.push(store);
  return store;
}

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof AppError, `expected AppError, got ${inspect(err)}`);
    return err;
  }
  assert.fail('expected a rejection');
}

/** A port nothing listens on: bound by us, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  return port;
}

function assertNoSecret(err: AppError): void {
  for (const text of [
    err.message,
    JSON.stringify(err),
    JSON.stringify(err.toRecord()),
    inspect(err, { depth: 8, showHidden: true }),
  ]) {
    assert.ok(!text.includes(SECRET), `the secret leaked into: ${text.slice(0, 200)}`);
  }
}

const contract: Array<[string, () => BlobStore]> = [
  ['local', () => new LocalBlobStore(join(dir, 'local-blobs'))],
  // Parts of 5 MiB, the smallest S3 allows, so a streamed put of ~20 MB is a real multipart upload.
  ['s3', () => s3Store({ partBytes: 5 * 1024 * 1024 })],
];

/** `total` bytes of a seeded pattern in pieces of 64 KiB, failing after `failAfter` bytes if given. */
function patterned(total: number, failAfter?: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (failAfter !== undefined && sent >= failAfter) {
        this.destroy(new Error('the client went away'));
        return;
      }
      if (sent >= total) {
        this.push(null);
        return;
      }
      const n = Math.min(64 * 1024, total - sent);
      const piece = Buffer.alloc(n);
      for (let i = 0; i < n; i++) piece[i] = ((sent + i) * 2654435761) >>> 24;
      sent += n;
      this.push(piece);
    },
  });
}

async function digestOf(stream: Readable): Promise<{ sha: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const piece of stream as AsyncIterable<Buffer>) {
    hash.update(piece);
    bytes += piece.length;
  }
  return { sha: hash.digest('hex'), bytes };
}

for (const [name, make] of contract) {
  void describe(`Object store: the storage contract holds for the ${name} store`, () => {
    let store: BlobStore;
    before(() => {
      store = make();
    });

    void it('Object store: put then get round-trips binary data, small, one byte and ~2 MB', async () => {
      for (const [key, data] of [
        ['contract/small', Buffer.from([0, 1, 2, 255, 254, 0, 10, 13])],
        ['contract/one-byte', Buffer.from([0])],
        ['contract/large', randomBytes(2 * 1024 * 1024 + 17)],
      ] as const) {
        await store.put(key, data);
        const back = await store.get(key);
        assert.ok(Buffer.isBuffer(back), 'get returns a Buffer');
        assert.equal(back.length, data.length);
        assert.ok(back.equals(data), `${key} round-trips`);
      }
    });

    void it('Object store: an empty object round-trips', async () => {
      await store.put('contract/empty', Buffer.alloc(0));
      const back = await store.get('contract/empty');
      assert.ok(Buffer.isBuffer(back));
      assert.equal(back.length, 0);
    });

    void it('Object store: a second put overwrites the first', async () => {
      await store.put('contract/overwrite', Buffer.from('first version, longer than the second'));
      await store.put('contract/overwrite', Buffer.from('second'));
      assert.equal((await store.get('contract/overwrite')).toString(), 'second');
    });

    void it('Object store: keys with slashes are stored and kept apart', async () => {
      await store.put('ws/meeting/recording-abc', Buffer.from('abc'));
      await store.put('ws/meeting/recording-abd', Buffer.from('abd'));
      await store.put('ws/other/recording-abc', Buffer.from('other'));
      assert.equal((await store.get('ws/meeting/recording-abc')).toString(), 'abc');
      assert.equal((await store.get('ws/meeting/recording-abd')).toString(), 'abd');
      assert.equal((await store.get('ws/other/recording-abc')).toString(), 'other');
    });

    void it('Object store: get of a missing key is a permanent storage.not_found', async () => {
      const err = await rejection(store.get('contract/never-written'));
      assert.equal(err.code, 'storage.not_found');
      assert.equal(err.kind, ErrorKind.permanent);
    });

    void it('B10: a streamed put of ~20 MB (four multipart parts on S3) reads back whole as a stream', async () => {
      const total = 20 * 1024 * 1024 + 12345;
      await store.putStream('contract/streamed', patterned(total));
      const expected = await digestOf(patterned(total));
      const back = await digestOf(await store.getStream('contract/streamed'));
      assert.deepEqual(back, expected);
      // A body smaller than one part is stored too (one plain put on S3).
      await store.putStream('contract/streamed-small', patterned(1000));
      assert.deepEqual(
        await digestOf(await store.getStream('contract/streamed-small')),
        await digestOf(patterned(1000)),
      );
    });

    void it('B10: a streamed put whose source fails leaves no object, and an earlier object under the key stays', async () => {
      for (const failAfter of [100 * 1024, 12 * 1024 * 1024]) {
        const key = `contract/cut-${failAfter}`;
        const err = await store.putStream(key, patterned(20 * 1024 * 1024, failAfter)).then(
          () => assert.fail('a cut source must fail the put'),
          (e: unknown) => e,
        );
        assert.match(String((err as Error).message), /went away/, 'the source’s own error is reported');
        const missing = await rejection(store.get(key));
        assert.equal(missing.code, 'storage.not_found', `nothing stored after a cut at ${failAfter} bytes`);
      }
      await store.put('contract/kept', Buffer.from('the first version'));
      await store
        .putStream('contract/kept', patterned(8 * 1024 * 1024, 6 * 1024 * 1024))
        .catch(() => undefined);
      assert.equal((await store.get('contract/kept')).toString(), 'the first version');
    });

    void it('Object store: delete is idempotent', async () => {
      await store.put('contract/doomed', Buffer.from('bye'));
      await store.delete('contract/doomed');
      await store.delete('contract/doomed');
      await store.delete('contract/never-written-either');
      await store.delete('ws/never/written');
      const err = await rejection(store.get('contract/doomed'));
      assert.equal(err.code, 'storage.not_found');
      assert.equal((await store.get('ws/meeting/recording-abc')).toString(), 'abc', 'neighbours stay');
    });
  });
}

void describe('Object store: the s3 store classifies failures', () => {
  void it('S3: an unreachable server is a transient storage.unavailable and the secret stays out', async () => {
    const store = s3Store({
      endpoint: `http://127.0.0.1:${await closedPort()}`,
      secretAccessKey: SECRET,
    });
    for (const attempt of [
      () => store.get('ws/meeting/recording-abc'),
      () => store.put('ws/meeting/recording-abc', Buffer.from('x')),
      () => store.delete('ws/meeting/recording-abc'),
    ]) {
      const err = await rejection(attempt());
      assert.equal(err.code, 'storage.unavailable');
      assert.equal(err.kind, ErrorKind.transient);
      assert.match(err.message, /ECONNREFUSED/);
      assertNoSecret(err);
    }
  });

  // s3rver does not verify SigV4 signatures, but it does refuse an unknown access key.
  void it('S3: refused credentials are an unclassified storage.unavailable and the secret stays out', async () => {
    const store = s3Store({ accessKeyId: 'NOT-A-KNOWN-KEY', secretAccessKey: SECRET });
    const err = await rejection(store.put('ws/meeting/recording-abc', Buffer.from('x')));
    assert.equal(err.code, 'storage.unavailable');
    assert.equal(err.kind, ErrorKind.unclassified);
    assert.match(err.message, /InvalidAccessKeyId \(HTTP 403\)/);
    assertNoSecret(err);
  });

  void it('Object store: a missing bucket is not mistaken for a missing object', async () => {
    const err = await rejection(s3Store({ bucket: 'no-such-bucket' }).get('ws/meeting/recording-abc'));
    assert.equal(err.code, 'storage.unavailable');
    assert.equal(err.kind, ErrorKind.unclassified);
  });

  void it('B10: a streamed put is a multipart upload of bounded parts, completed when whole and aborted when cut', async () => {
    const store = s3Store({ partBytes: 5 * 1024 * 1024 });
    const sent: Array<{ name: string; bytes?: number }> = [];
    const client = (store as unknown as { client: S3Client }).client;
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { Body?: Buffer };
        sent.push({ name: context.commandName ?? '?', bytes: input.Body?.length });
        return next(args);
      },
      { step: 'initialize', name: 'b10-record-commands' },
    );
    await store.putStream('multipart/whole', patterned(17 * 1024 * 1024));
    const parts = sent.filter((c) => c.name === 'UploadPartCommand').map((c) => c.bytes);
    assert.deepEqual(
      parts,
      [5, 5, 5, 2].map((mib) => mib * 1024 * 1024),
    );
    assert.deepEqual(
      sent.filter((c) => c.name !== 'UploadPartCommand').map((c) => c.name),
      ['CreateMultipartUploadCommand', 'CompleteMultipartUploadCommand'],
    );
    sent.length = 0;
    await store
      .putStream('multipart/cut', patterned(17 * 1024 * 1024, 12 * 1024 * 1024))
      .catch(() => undefined);
    assert.deepEqual(
      sent.filter((c) => c.name !== 'UploadPartCommand').map((c) => c.name),
      ['CreateMultipartUploadCommand', 'AbortMultipartUploadCommand'],
      'a cut upload is aborted, so the server drops its parts',
    );
  });

  /** A stand-in S3 that answers every request with `status` and an S3 error document. */
  async function failingS3(
    status: number,
    code: string | null,
  ): Promise<{ server: Server; requests: () => number }> {
    let count = 0;
    const server = createHttpServer((req, res) => {
      count++;
      req.resume();
      if (code === null) return; // never answers
      res.writeHead(status, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>m</Message></Error>`,
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, requests: () => count };
  }

  async function stop(server: Server): Promise<void> {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  for (const [status, code] of [
    [503, 'SlowDown'],
    [503, 'ServiceUnavailable'],
    [500, 'InternalError'],
    [502, 'BadGateway'],
  ] as const) {
    void it(`Object store/S3: ${status} ${code} is a transient storage.unavailable after two attempts, and the secret stays out`, async () => {
      const fake = await failingS3(status, code);
      try {
        const port = (fake.server.address() as AddressInfo).port;
        const store = s3Store({ endpoint: `http://127.0.0.1:${port}`, secretAccessKey: SECRET });
        const err = await rejection(store.get('ws/meeting/recording-abc'));
        assert.equal(err.code, 'storage.unavailable');
        assert.equal(err.kind, ErrorKind.transient);
        assert.equal(fake.requests(), 2, 'maxAttempts is 2');
        assertNoSecret(err);
      } finally {
        await stop(fake.server);
      }
    });
  }

  void it('B10: a streamed put whose multipart upload cannot start is the store’s transient storage.unavailable, not the body’s failure', async () => {
    const fake = await failingS3(503, 'SlowDown');
    try {
      const port = (fake.server.address() as AddressInfo).port;
      const store = s3Store({
        endpoint: `http://127.0.0.1:${port}`,
        secretAccessKey: SECRET,
        partBytes: 5 * 1024 * 1024,
      });
      const err = await rejection(store.putStream('ws/meeting/recording-big', patterned(6 * 1024 * 1024)));
      assert.equal(err.code, 'storage.unavailable');
      assert.equal(err.kind, ErrorKind.transient);
      assertNoSecret(err);
    } finally {
      await stop(fake.server);
    }
  });

  void it('Object store: a server that never answers times out (idle socket) as a transient storage.unavailable', async () => {
    const fake = await failingS3(0, null);
    try {
      const port = (fake.server.address() as AddressInfo).port;
      const store = s3Store({ endpoint: `http://127.0.0.1:${port}`, idleTimeoutMs: 200 });
      const err = await rejection(store.get('ws/meeting/recording-abc'));
      assert.equal(err.code, 'storage.unavailable');
      assert.equal(err.kind, ErrorKind.transient);
      assert.match(err.message, /ETIMEDOUT/);
    } finally {
      await stop(fake.server);
    }
  });

  void it('Object store: the factory builds the store the settings pick', async () => {
    const local = createBlobStore(loadConfig({ VERBATIM_DATA_DIR: join(dir, 'factory') }));
    assert.ok(local instanceof LocalBlobStore);
    await local.put('ws/m/r', Buffer.from('local'));
    assert.equal((await stat(join(dir, 'factory', 'blobs', 'ws', 'm', 'r'))).size, 5);

    const remote = createBlobStore(
      loadConfig({
        VERBATIM_STORAGE: 's3',
        VERBATIM_S3_BUCKET: BUCKET,
        VERBATIM_S3_ENDPOINT: endpoint,
        VERBATIM_S3_ACCESS_KEY_ID: 'S3RVER',
        VERBATIM_S3_SECRET_ACCESS_KEY: 'S3RVER',
      }),
    );
    assert.ok(remote instanceof S3BlobStore);
    s3Stores.push(remote);
    await remote.put('factory/object', Buffer.from('remote'));
    assert.equal((await remote.get('factory/object')).toString(), 'remote');
  });
});

void describe('P4: a local store on a read-only file system', () => {
  void it('P4: a write to a read-only file system is a transient storage.unavailable (the work waits), never a missing object, and what was stored stays readable', async () => {
    const root = join(dir, 'read-only');
    const store = new LocalBlobStore(root);
    await store.put('kept/one', Buffer.from('stored before'));
    // A read-only remount, as a disk after errors: a read-only bind of the root over itself.
    execFileSync('mount', ['--bind', root, root]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', root]);
      const err = await store.put('meeting/window-7', Buffer.from('new')).then(
        () => assert.fail('a write to a read-only file system succeeded'),
        (e: unknown) => e as AppError,
      );
      assert.ok(err instanceof AppError);
      assert.deepEqual([err.kind, err.code], [ErrorKind.transient, 'storage.unavailable']);
      const into = await store.put('kept/two', Buffer.from('new')).then(
        () => assert.fail('a write into an existing folder of a read-only file system succeeded'),
        (e: unknown) => e as AppError,
      );
      assert.deepEqual([into.kind, into.code], [ErrorKind.transient, 'storage.unavailable']);
      assert.equal((await store.get('kept/one')).toString(), 'stored before');
    } finally {
      execFileSync('umount', [root]);
    }
  });
});

void describe('B7: stale temporaries of interrupted writes', () => {
  const HOUR = 3_600_000;

  async function age(path: string, ms: number): Promise<void> {
    const when = new Date(Date.now() - ms);
    await utimes(path, when, when);
  }

  async function exists(path: string): Promise<boolean> {
    try {
      await lstat(path);
      return true;
    } catch {
      return false;
    }
  }

  void it('B7: start-up removes only old temporaries; recent ones, symlinks, folders and canonical names remain', async () => {
    const root = join(dir, 'b7-root');
    const outside = join(dir, 'b7-outside');
    await mkdir(join(root, 'ws', 'meeting'), { recursive: true });
    await mkdir(outside, { recursive: true });

    const oldTemp = join(root, `${TEMP_PREFIX}old`);
    const recentTemp = join(root, `${TEMP_PREFIX}recent`);
    const nestedOldTemp = join(root, 'ws', 'meeting', `${TEMP_PREFIX}nested-old`);
    const nestedRecentTemp = join(root, 'ws', 'meeting', `${TEMP_PREFIX}nested-recent`);
    const canonical = join(root, 'ws', 'meeting', 'recording-abc');
    const canonicalAtRoot = join(root, 'old-canonical');
    const prefixedDir = join(root, `${TEMP_PREFIX}dir`);
    const insidePrefixedDir = join(prefixedDir, 'recording-kept');
    const oldTempInPrefixedDir = join(prefixedDir, `${TEMP_PREFIX}in-dir`);
    const outsideTarget = join(outside, `${TEMP_PREFIX}outside-target`);
    const linkToOutside = join(root, `${TEMP_PREFIX}link-outside`);
    const insideTarget = join(root, `${TEMP_PREFIX}link-target`);
    const linkToInside = join(root, `${TEMP_PREFIX}link-inside`);
    const linkedDir = join(root, 'linked-dir');
    const tempBehindLinkedDir = join(outside, `${TEMP_PREFIX}behind-linked-dir`);

    for (const file of [
      oldTemp,
      recentTemp,
      nestedOldTemp,
      nestedRecentTemp,
      canonical,
      canonicalAtRoot,
      outsideTarget,
      insideTarget,
      tempBehindLinkedDir,
    ]) {
      await writeFile(file, 'partial upload');
    }
    await mkdir(prefixedDir);
    await writeFile(insidePrefixedDir, 'kept');
    await writeFile(oldTempInPrefixedDir, 'partial upload');
    await symlink(outsideTarget, linkToOutside);
    await symlink(insideTarget, linkToInside);
    await symlink(outside, linkedDir, 'dir');

    for (const path of [
      oldTemp,
      nestedOldTemp,
      canonical,
      canonicalAtRoot,
      outsideTarget,
      insideTarget,
      tempBehindLinkedDir,
      insidePrefixedDir,
      oldTempInPrefixedDir,
      prefixedDir,
    ]) {
      await age(path, 2 * HOUR);
    }
    await age(recentTemp, 60_000);
    await age(nestedRecentTemp, 60_000);

    const store = new LocalBlobStore(root);
    const result = await store.removeStaleTemporaries();

    assert.deepEqual(result.removed.sort(), [
      `${TEMP_PREFIX}dir/${TEMP_PREFIX}in-dir`,
      `${TEMP_PREFIX}link-target`,
      `${TEMP_PREFIX}old`,
      `ws/meeting/${TEMP_PREFIX}nested-old`,
    ]);
    for (const gone of [oldTemp, nestedOldTemp, oldTempInPrefixedDir, insideTarget]) {
      assert.equal(await exists(gone), false, `${gone} is removed`);
    }
    for (const kept of [
      recentTemp,
      nestedRecentTemp,
      canonical,
      canonicalAtRoot,
      prefixedDir,
      insidePrefixedDir,
      outsideTarget,
      tempBehindLinkedDir,
    ]) {
      assert.equal(await exists(kept), true, `${kept} remains`);
    }
    // The symlinks themselves remain, still pointing where they did (one now dangles).
    assert.equal(await readlink(linkToOutside), outsideTarget);
    assert.equal(await readlink(linkToInside), insideTarget);
    assert.equal(await readlink(linkedDir), outside);
    assert.ok((await lstat(linkToOutside)).isSymbolicLink());
    // Kept prefixed entries: two recent temporaries, two symlinks, one directory.
    assert.equal(result.kept, 5);

    const again = await store.removeStaleTemporaries();
    assert.deepEqual(again.removed, [], 'a second pass finds nothing more');
  });

  void it('B7: the age limit is the caller’s and a recent temporary goes once it is older', async () => {
    const root = join(dir, 'b7-age');
    await mkdir(root, { recursive: true });
    const temp = join(root, `${TEMP_PREFIX}ten-minutes`);
    await writeFile(temp, 'partial');
    await age(temp, 10 * 60_000);
    const store = new LocalBlobStore(root);
    assert.deepEqual((await store.removeStaleTemporaries()).removed, [], 'younger than the default hour');
    assert.deepEqual((await store.removeStaleTemporaries(5 * 60_000)).removed, [`${TEMP_PREFIX}ten-minutes`]);
  });

  void it('B7: a missing root has nothing to remove', async () => {
    const store = new LocalBlobStore(join(dir, 'b7-never-created'));
    assert.deepEqual(await store.removeStaleTemporaries(), { removed: [], kept: 0 });
  });

  void it('B7: the store leaves no temporaries behind after its own writes', async () => {
    const root = join(dir, 'b7-own-writes');
    const store = new LocalBlobStore(root);
    await store.put('ws/meeting/recording-abc', Buffer.from('whole'));
    assert.deepEqual(await store.removeStaleTemporaries(0), { removed: [], kept: 0 });
    assert.equal((await store.get('ws/meeting/recording-abc')).toString(), 'whole');
  });
});

void describe('Object store: the whole pipeline on the s3 store', () => {
  void it('L16/S3: an upload is stored, transcribed and its audio deleted on an S3-compatible server, and its secret never reaches a log', async () => {
    const { SPEECH, speechWav, startHarness, uploadMeeting, waitFor, waitForMeeting } =
      await import('./support/harness.ts');
    const env = {
      VERBATIM_STORAGE: 's3',
      VERBATIM_S3_BUCKET: BUCKET,
      VERBATIM_S3_ENDPOINT: endpoint,
      VERBATIM_S3_ACCESS_KEY_ID: 'S3RVER',
      // s3rver does not check signatures; a distinctive secret shows it never reaches a log.
      VERBATIM_S3_SECRET_ACCESS_KEY: SECRET,
    };
    const h = await startHarness({ env });
    const probe = s3Store();
    try {
      h.spawnWorker();
      const id = await uploadMeeting(h, speechWav(SPEECH));
      const windowKeys = await waitFor('windows stored in the bucket', async () => {
        const rows = await h.app.database.db
          .selectFrom('blobs')
          .select('object_key')
          .where('meeting_id', '=', id)
          .execute();
        return rows.length > 1 ? rows.map((r) => r.object_key) : null;
      });
      const meeting = await waitForMeeting(h, id);
      assert.equal(meeting.windows.done, meeting.windows.total);
      const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
      assert.ok(text.includes('budget'), text);
      await waitFor('every object deleted from the bucket', async () => {
        const pending = await h.app.database.db.selectFrom('object_cleanups').select('id').execute();
        return pending.length === 0;
      });
      for (const key of windowKeys) {
        await assert.rejects(
          probe.get(key),
          (err: unknown) => err instanceof AppError && err.code === 'storage.not_found',
        );
      }
      assert.ok(h.logs().length > 0 && !h.logs().includes(SECRET), 'the S3 secret never reaches a log');
    } finally {
      await h.close();
    }
  });
});
