import type { Readable } from 'node:stream';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { sql } from 'kysely';
import { TEMP_PREFIX } from '../src/adapters/local-blob-store.ts';
import { Checkpoints } from '../src/checkpoints.ts';
import { AppError, ErrorKind } from '../src/domain/errors.ts';
import type { BlobStore } from '../src/ports.ts';
import {
  cleanupPass,
  compensate,
  handOffMeetingObjects,
  referenceStaged,
  stageAndPut,
  storedBytes,
  type StagedObject,
  type StorageDeps,
} from '../src/storage/objects.ts';
import {
  METRICS_AUTH,
  SPEECH,
  speechWav,
  spawnVerbatim,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
  freePort,
} from './support/harness.ts';

/** Where a suite run keeps its objects: the local store's folder, or a bucket on s3rver. */
interface StoreUnderTest {
  kind: 'local' | 's3';
  env: Record<string, string>;
  list(h: Harness): Promise<Map<string, number>>;
  close(): Promise<void>;
}

function localStore(): StoreUnderTest {
  return {
    kind: 'local',
    env: {},
    list: (h) => {
      const root = path.join(h.dataDir, 'blobs');
      const out = new Map<string, number>();
      const walk = (dir: string): void => {
        if (!fs.existsSync(dir)) return;
        for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
          const full = path.join(dir, entry.name);
          if (entry.isDirectory()) walk(full);
          else if (!entry.name.startsWith(TEMP_PREFIX))
            out.set(path.relative(root, full), fs.statSync(full).size);
        }
      };
      walk(root);
      return Promise.resolve(out);
    },
    close: () => Promise.resolve(),
  };
}

async function s3Store(): Promise<StoreUnderTest> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-storage-s3-'));
  const bucket = 'verbatim-storage-test';
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  return {
    kind: 's3',
    env: {
      VERBATIM_STORAGE: 's3',
      VERBATIM_S3_BUCKET: bucket,
      VERBATIM_S3_ENDPOINT: endpoint,
      VERBATIM_S3_ACCESS_KEY_ID: 'S3RVER',
      VERBATIM_S3_SECRET_ACCESS_KEY: 'S3RVER',
    },
    list: async () => {
      const out = new Map<string, number>();
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }),
        );
        for (const o of page.Contents ?? []) out.set(o.Key!, o.Size ?? 0);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return out;
    },
    close: async () => {
      client.destroy();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * B6: the ledger accounts for every byte in the store. Every stored object is either a live blob
 * or a cleanup row; once nothing is staged or pending, the ledger's sum equals the store's.
 */
async function assertLedger(
  under: StoreUnderTest,
  h: Harness,
  workspaceId: string,
): Promise<{ ledger: number; files: number }> {
  const db = h.app.database.db;
  const live = await db
    .selectFrom('blobs')
    .select(['object_key', 'size_bytes'])
    .where('workspace_id', '=', workspaceId)
    .where('deleted_at', 'is', null)
    .execute();
  const cleanups = await db
    .selectFrom('object_cleanups')
    .select(['object_key', 'bytes'])
    .where('workspace_id', '=', workspaceId)
    .execute();
  const accounted = new Map<string, number>();
  for (const b of live) accounted.set(b.object_key, Number(b.size_bytes));
  for (const c of cleanups) accounted.set(c.object_key, Number(c.bytes));
  const files = await under.list(h);
  for (const [key, size] of files) {
    if (!key.startsWith(workspaceId)) continue;
    assert.equal(accounted.get(key), size, `object ${key} (${size} bytes) is not in the ledger`);
  }
  const ledger = await storedBytes(db, workspaceId);
  assert.equal(
    ledger,
    [...accounted.values()].reduce((a, b) => a + b, 0),
    'the quota sum is live blobs plus cleanup rows',
  );
  let onDisk = 0;
  for (const [key, size] of files) if (key.startsWith(workspaceId)) onDisk += size;
  return { ledger, files: onDisk };
}

/** A store whose deletes can be held at a gate or made to fail, in front of the real local store. */
class ControlledStore implements BlobStore {
  failing = false;
  deletes = 0;
  private gate: Promise<void> | null = null;
  private open: (() => void) | null = null;
  reachedGate: Promise<void> = Promise.resolve();
  private reached: (() => void) | null = null;

  constructor(private readonly inner: BlobStore) {}

  holdDeletes(): void {
    this.gate = new Promise((r) => (this.open = r));
    this.reachedGate = new Promise((r) => (this.reached = r));
  }

  releaseDeletes(): void {
    this.open?.();
    this.gate = null;
  }

  private putGate: Promise<void> | null = null;
  private openPuts: (() => void) | null = null;

  holdPuts(): void {
    this.putGate = new Promise((r) => (this.openPuts = r));
  }

  releasePuts(): void {
    this.openPuts?.();
    this.putGate = null;
  }

  async put(key: string, data: Buffer): Promise<void> {
    if (this.putGate) await this.putGate;
    return this.inner.put(key, data);
  }

  async putStream(key: string, source: Readable): Promise<void> {
    if (this.putGate) await this.putGate;
    return this.inner.putStream(key, source);
  }

  get(key: string): Promise<Buffer> {
    return this.inner.get(key);
  }

  getStream(key: string): Promise<Readable> {
    return this.inner.getStream(key);
  }

  async delete(key: string): Promise<void> {
    this.deletes++;
    if (this.gate) {
      this.reached?.();
      await this.gate;
    }
    if (this.failing) {
      throw new AppError(ErrorKind.transient, 'storage.unavailable', 'blob delete failed: ECONNREFUSED');
    }
    return this.inner.delete(key);
  }
}

for (const make of [localStore, s3Store]) storageSuite(make);

function storageSuite(make: () => StoreUnderTest | Promise<StoreUnderTest>): void {
  void describe(`storage lifecycle (${make === localStore ? 'local' : 's3'} store)`, () => {
    let h: Harness;
    let under: StoreUnderTest;
    const wav = speechWav(SPEECH);
    before(async () => {
      under = await make();
      h = await startHarness({
        // F1: a recording counts with its windows (as much again for a 16 kHz WAV) until it is done.
        env: { ...under.env, VERBATIM_WORKSPACE_QUOTA_BYTES: String(Math.round(wav.length * 6.5)) },
      });
    });
    after(async () => {
      await h?.close();
      await under?.close();
    });

    function controlled(overrides: Partial<StorageDeps['config']> = {}): {
      deps: StorageDeps;
      store: ControlledStore;
    } {
      const store = new ControlledStore(h.app.deps.blobs);
      const deps: StorageDeps = {
        ...h.app.deps,
        blobs: store,
        config: { ...h.app.deps.config, ...overrides },
      };
      return { deps, store };
    }

    /** Waits until `n` staged objects of the meeting are past their reservation deadline. */
    async function pastStageDeadlines(meetingId: string, n: number): Promise<void> {
      await waitFor('the deadlines', async () => {
        const r = await h.app.database.db
          .selectFrom('object_cleanups')
          .select('id')
          .where('meeting_id', '=', meetingId)
          .where('reserve_until', '<', new Date())
          .execute();
        return r.length === n;
      });
    }

    async function newWorkspace(): Promise<string> {
      return h.app.workspaces.createWorkspace(`w-${randomUUID()}`);
    }

    void it('B1/B6: an upload over the workspace quota gets a clear 413 and stores nothing', async () => {
      const id = await uploadMeeting(h, wav);
      // A recording and its windows (about twice the recording) are held while it is processed:
      // a second fits the quota of 6.5 recordings, and a third five times as long would pass it.
      const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'too much' });
      const second = await h.request('PUT', `/v1/meetings/${created.json.id}/recording`, wav, {
        'content-type': 'audio/wav',
      });
      assert.equal(second.status, 202, second.text);
      const third = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'over' });
      const res = await h.request(
        'PUT',
        `/v1/meetings/${third.json.id}/recording`,
        Buffer.concat([wav, wav, wav, wav, wav]),
        {
          'content-type': 'audio/wav',
        },
      );
      assert.equal(res.status, 413, res.text);
      assert.equal(res.json.error.code, 'storage.quota_exceeded');
      assert.match(res.json.error.message, /storage quota of the workspace/);
      const rows = await h.app.database.db
        .selectFrom('object_cleanups')
        .select('id')
        .where('meeting_id', '=', third.json.id)
        .execute();
      assert.equal(rows.length, 0, 'nothing staged for the refused upload');
      assert.equal((await h.request('GET', `/v1/meetings/${third.json.id}`)).json.status, 'created');
      const after = await under.list(h);
      assert.ok(
        [...after.keys()].every((k) => !k.includes(third.json.id)),
        'no object written',
      );

      // Identity is server-generated: the same bytes twice are two objects (B1).
      const keys = await h.app.database.db
        .selectFrom('blobs')
        .select(['object_key', 'sha256'])
        .where('kind', '=', 'recording')
        .where('meeting_id', 'in', [id, created.json.id])
        .execute();
      assert.equal(keys.length, 2);
      assert.equal(keys[0]!.sha256, keys[1]!.sha256);
      assert.notEqual(keys[0]!.object_key, keys[1]!.object_key);
      // An upload streams to the store (B10), so its digest is known only at the end: it is
      // recorded on the blob row, and the key ends in the server's uuid.
      for (const k of keys) assert.match(k.object_key, /\/recording-[0-9a-f-]{36}$/);
      assert.match(keys[0]!.sha256, /^[0-9a-f]{64}$/);
      await assertLedger(under, h, h.workspaceId);
    });

    void it('B3/B6: the quota ledger agrees with the store after uploads, completed meetings and a failed write', async () => {
      const worker = h.spawnWorker();
      const ws = h.workspaceId;
      const meetings = await h.app.database.db
        .selectFrom('meetings')
        .select('id')
        .where('workspace_id', '=', ws)
        .where('status', '=', 'processing')
        .execute();
      for (const m of meetings) await waitForMeeting(h, m.id);
      await waitFor('every handed-off object deleted', async () => {
        const pending = await h.app.database.db.selectFrom('object_cleanups').select('id').execute();
        return pending.length === 0;
      });
      const settled = await assertLedger(under, h, ws);
      assert.equal(settled.ledger, settled.files, 'with nothing pending, ledger and store agree');
      assert.equal(settled.ledger, 0, 'completed meetings hold no audio');
      await worker.stop();

      // A failed store write is compensated at once, and the staged bytes released (B3).
      const { deps, store } = controlled();
      const failingPut: BlobStore = {
        put: () => Promise.reject(new AppError(ErrorKind.transient, 'storage.unavailable', 'disk full')),
        putStream: () =>
          Promise.reject(new AppError(ErrorKind.transient, 'storage.unavailable', 'disk full')),
        get: (k) => store.get(k),
        getStream: (k) => store.getStream(k),
        delete: (k) => store.delete(k),
      };
      await assert.rejects(
        stageAndPut(
          { ...deps, blobs: failingPut },
          { workspaceId: ws, meetingId: randomUUID(), kind: 'recording', data: wav, admit: true },
        ),
        /disk full/,
      );
      const left = await assertLedger(under, h, ws);
      assert.equal(left.ledger, 0, 'the failed write holds no quota');
    });

    void it('B2: a writer killed at each step between staging, write, processing and reference leaves no orphan after the deadline and one cleanup pass', async () => {
      const ws = h.workspaceId;
      const steps = [
        { at: 'storage.staged', match: { kind: 'recording' } },
        { at: 'storage.written', match: { kind: 'recording' } },
        { at: 'recording.processing' },
        { at: 'recording.referenced' },
      ];
      for (const step of steps) {
        const port = await freePort();
        const api = spawnVerbatim(
          ['api'],
          h.env({
            VERBATIM_PORT: String(port),
            VERBATIM_STAGE_DEADLINE_SECONDS: '0.5',
            VERBATIM_FAULTS: JSON.stringify([{ ...step, action: 'kill' }]),
          }),
        );
        await waitFor(`api on ${port}`, async () => {
          const res = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null);
          return res?.ok ?? false;
        });
        const base = `http://127.0.0.1:${port}`;
        const headers = { authorization: `Bearer ${h.apiKey}` };
        const created = await fetch(`${base}/v1/meetings`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ source: 'upload', title: step.at }),
        });
        const meetingId = ((await created.json()) as { id: string }).id;
        const put = await fetch(`${base}/v1/meetings/${meetingId}/recording`, {
          method: 'PUT',
          headers: { ...headers, 'content-type': 'audio/wav' },
          body: wav,
        }).catch((err: unknown) => err);
        assert.ok(put instanceof Error, `the api was killed at ${step.at}`);
        await api.exited;

        const staged = await h.app.database.db
          .selectFrom('object_cleanups')
          .selectAll()
          .where('meeting_id', '=', meetingId)
          .execute();
        assert.equal(staged.length, 1, `a staged row survives the kill at ${step.at}`);
        assert.equal(staged[0]!.state, 'staged');
        const onDisk = (await under.list(h)).has(staged[0]!.object_key);
        assert.equal(onDisk, step.at !== 'storage.staged', `object written before the kill at ${step.at}`);
        await assertLedger(under, h, ws);

        await waitFor('the reservation deadline', async () => {
          const r = await h.app.database.db
            .selectFrom('object_cleanups')
            .select('id')
            .where('meeting_id', '=', meetingId)
            .where('reserve_until', '<', new Date())
            .execute();
          return r.length === 1;
        });
        const outcome = await cleanupPass(h.app.deps, 'test-cleanup');
        assert.equal(outcome.deleted, 1, JSON.stringify(outcome));
        assert.equal((await under.list(h)).has(staged[0]!.object_key), false, 'the orphan is gone');
        const leftRows = await h.app.database.db
          .selectFrom('object_cleanups')
          .select('id')
          .where('meeting_id', '=', meetingId)
          .execute();
        assert.equal(leftRows.length, 0);
        const blobs = await h.app.database.db
          .selectFrom('blobs')
          .select('id')
          .where('meeting_id', '=', meetingId)
          .execute();
        assert.equal(blobs.length, 0, 'no reference was committed');
        const conserved = await assertLedger(under, h, ws);
        assert.equal(conserved.ledger, conserved.files);
      }
    });

    void it('B5/V3: a cleanup pass cut short hands back the rows it had not reached (found by the simulation: heals waited out a one-minute lease)', async () => {
      const ws = await newWorkspace();
      const { deps } = controlled({ stageDeadlineMs: 100, cleanupBackoffMs: 300 });
      const meetingId = randomUUID();
      const stage = (n: number) =>
        stageAndPut(deps, { workspaceId: ws, meetingId, kind: `window-${n}`, data: wav, admit: false });
      const orphans = [await stage(1), await stage(2)];
      const held = await stage(3);
      const db = h.app.database.db;
      await pastStageDeadlines(meetingId, 3);
      // A reference creator holds the workspace's guard, so the pass waits on it, and its connection
      // is cut while it waits.
      let commit!: () => void;
      const gate = new Promise<void>((r) => (commit = r));
      let holding!: () => void;
      const isHolding = new Promise<void>((r) => (holding = r));
      const creator = db.transaction().execute(async (trx) => {
        await referenceStaged(trx, held, { kind: 'window', contentType: 'audio/wav' });
        holding();
        await gate;
      });
      await isHolding;
      const pass = cleanupPass(deps, 'cut-short');
      // Other sessions' waits, and ending one, are the owner's to see and do (the app's role may not).
      const owner = h.db.owner();
      const waiting = await waitFor('the pass to wait on the guard', async () => {
        const r = await sql<{ pid: number }>`select pid from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`.execute(
          owner,
        );
        return r.rows[0]?.pid ?? null;
      });
      await sql`select pg_terminate_backend(${waiting})`.execute(owner);
      await assert.rejects(pass);
      commit();
      await creator;
      const leased = await db
        .selectFrom('object_cleanups')
        .select('object_key')
        .where('lease_owner', '=', 'cut-short')
        .execute();
      assert.deepEqual(leased, [], 'nothing is left leased to the pass that was cut short');
      // The object it failed on is backed off like any failed try; the one it never reached is not.
      const rows = await db
        .selectFrom('object_cleanups')
        .select(['object_key', 'attempts', sql<boolean>`next_attempt_at > now()`.as('later')])
        .where(
          'object_key',
          'in',
          orphans.map((o) => o.key),
        )
        .orderBy('attempts')
        .execute();
      assert.deepEqual(
        rows.map((r) => [r.attempts, r.later]),
        [
          [0, false],
          [1, true],
        ],
      );
      // The one not reached goes in the next pass, whenever it runs (the backed-off one may go with
      // it when the machine is slow enough for its backoff to have passed: that is not the point).
      const notReached = rows.find((r) => r.attempts === 0)!.object_key;
      assert.ok((await cleanupPass(deps, 'next')).deleted >= 1);
      assert.equal((await under.list(h)).has(notReached), false, 'the one not reached goes at once');
      const backedOff = orphans.find((o) => o.key !== notReached)!.key;
      await waitFor('the backed-off object to be deleted', async () => {
        await cleanupPass(deps, 'next');
        return !(await under.list(h)).has(backedOff);
      });
      for (const o of orphans) assert.equal((await under.list(h)).has(o.key), false);
    });

    void it('B5/V3: a row left leased to a worker by a pass whose hand-back failed too is taken back by that worker’s next pass, not after the lease; another worker’s lease is left alone (found by the simulation)', async () => {
      const ws = await newWorkspace();
      const { deps } = controlled({ stageDeadlineMs: 100 });
      const meetingId = randomUUID();
      const stage = (n: number) =>
        stageAndPut(deps, { workspaceId: ws, meetingId, kind: `window-${n}`, data: wav, admit: false });
      const [left, others] = [await stage(1), await stage(2)];
      const db = h.app.database.db;
      await pastStageDeadlines(meetingId, 2);
      // What a pass cut by a database restart leaves: its rows pending, due, and leased for a minute.
      const leaseTo = async (key: string, owner: string) =>
        sql`update object_cleanups set state = 'pending', next_attempt_at = now(), lease_owner = ${owner},
              lease_expires_at = now() + interval '1 minute' where object_key = ${key}`.execute(db);
      await leaseTo(left.key, 'worker-a');
      await leaseTo(others.key, 'worker-b');
      const pass = await cleanupPass(deps, 'worker-a');
      assert.equal(pass.deleted, 1, 'worker-a’s next pass deletes the row it had left leased');
      assert.equal((await under.list(h)).has(left.key), false);
      assert.equal((await under.list(h)).has(others.key), true, 'a lease of another worker is kept');
      const held = await db
        .selectFrom('object_cleanups')
        .select('lease_owner')
        .where('object_key', '=', others.key)
        .executeTakeFirstOrThrow();
      assert.equal(held.lease_owner, 'worker-b');
    });

    void it('B4: a reference racing a fenced delete is rejected; a delete never removes a referenced object', async () => {
      const ws = await newWorkspace();
      const { deps, store } = controlled({ stageDeadlineMs: 100 });
      const meetingId = randomUUID();
      const stage = () =>
        stageAndPut(deps, { workspaceId: ws, meetingId, kind: 'window-0', data: wav, admit: false });
      const pastDeadline = (o: StagedObject) =>
        waitFor('deadline', async () => {
          const r = await h.app.database.db
            .selectFrom('object_cleanups')
            .select('id')
            .where('object_key', '=', o.key)
            .where('reserve_until', '<', new Date())
            .execute();
          return r.length === 1;
        });

      // The deleter first: its fence is committed and the delete is in flight; the reference loses.
      const late = await stage();
      await pastDeadline(late);
      store.holdDeletes();
      const pass = cleanupPass(deps, 'fencer');
      await store.reachedGate;
      const fencedRow = await h.app.database.db
        .selectFrom('object_cleanups')
        .select(['delete_fenced_at', 'state'])
        .where('object_key', '=', late.key)
        .executeTakeFirstOrThrow();
      assert.ok(fencedRow.delete_fenced_at, 'the fence is committed before the physical delete');
      await assert.rejects(
        h.app.database.db
          .transaction()
          .execute((trx) => referenceStaged(trx, late, { kind: 'window', contentType: 'audio/wav' })),
        (err: unknown) => err instanceof AppError && err.code === 'storage.fenced',
      );
      store.releaseDeletes();
      assert.equal((await pass).deleted, 1);
      assert.equal((await under.list(h)).has(late.key), false);

      // The creator first: it holds the guards and the row; the pass skips the row, and once the
      // reference is committed nothing deletes the object.
      const kept = await stage();
      await pastDeadline(kept);
      let commitReference!: () => void;
      const committed = new Promise<void>((r) => (commitReference = r));
      let referenced!: () => void;
      const hasReference = new Promise<void>((r) => (referenced = r));
      const creator = h.app.database.db.transaction().execute(async (trx) => {
        await referenceStaged(trx, kept, { kind: 'window', contentType: 'audio/wav' });
        referenced();
        await committed;
      });
      await hasReference;
      const during = await cleanupPass(deps, 'racer');
      assert.equal(during.deleted + during.retry, 0, 'the row being referenced is not claimed');
      commitReference();
      await creator;
      const afterPass = await cleanupPass(deps, 'racer');
      assert.equal(afterPass.deleted, 0);
      assert.equal((await under.list(h)).has(kept.key), true, 'the referenced object is kept');

      // A compensation that comes after a commit whose answer was lost does not touch the object, and
      // a cleanup row for a live object retires without deleting it.
      await compensate(deps, [kept], new Error('lost commit answer'));
      assert.equal((await under.list(h)).has(kept.key), true);
      await h.app.database.db
        .insertInto('object_cleanups')
        .values({
          id: randomUUID(),
          workspace_id: ws,
          meeting_id: meetingId,
          object_key: kept.key,
          bytes: kept.bytes,
          state: 'pending',
          reason: 'duplicate hand-off',
        })
        .execute();
      const retired = await cleanupPass(deps, 'racer');
      assert.equal(retired.referenced, 1);
      assert.equal((await under.list(h)).has(kept.key), true, 'a delete never removes a referenced object');
      await assertLedger(under, h, ws);
    });

    void it('B4/V3: a deleter paused inside its fence holds up that one object, not the other uploads of its workspace (found by the simulation)', async () => {
      const ws = await newWorkspace();
      const { deps: base } = controlled({ stageDeadlineMs: 100 });
      // The deleter stops inside its fence transaction, as a SIGSTOPped worker would.
      let paused!: () => void;
      const inFence = new Promise<void>((r) => (paused = r));
      let resume!: () => void;
      const resumed = new Promise<void>((r) => (resume = r));
      const checkpoints = Object.assign(Object.create(Checkpoints.prototype) as Checkpoints, {
        hit: async (name: string) => {
          if (name !== 'storage.fencing') return;
          paused();
          await resumed;
        },
      });
      const deps: StorageDeps = { ...base, checkpoints };
      const meetingId = randomUUID();
      const stage = (kind: string) =>
        stageAndPut(base, { workspaceId: ws, meetingId, kind, data: wav, admit: false });
      // The workspace has stored something before (so its guard row exists).
      const earlier = await stage('window-9');
      await h.app.database.db
        .transaction()
        .execute((trx) => referenceStaged(trx, earlier, { kind: 'window', contentType: 'audio/wav' }));
      const doomed = await stage('window-0');
      await pastStageDeadlines(meetingId, 1);
      const pass = cleanupPass(deps, 'paused-deleter');
      await inFence;

      // Meanwhile another object of the same workspace is staged and referenced, with a lock
      // timeout so that a wait on the paused fence fails the test instead of hanging it.
      const fresh = await stage('window-1');
      const blobId = await h.app.database.db.transaction().execute(async (trx) => {
        await sql`set local lock_timeout = '3s'`.execute(trx);
        return referenceStaged(trx, fresh, { kind: 'window', contentType: 'audio/wav' });
      });
      assert.ok(blobId);
      // The paused fence's own object stays refused to a reference all the while.
      await assert.rejects(
        h.app.database.db.transaction().execute(async (trx) => {
          await sql`set local lock_timeout = '1s'`.execute(trx);
          return referenceStaged(trx, doomed, { kind: 'window', contentType: 'audio/wav' });
        }),
        (err: unknown) =>
          (err instanceof AppError && err.code === 'storage.fenced') || /lock timeout/.test(String(err)),
      );
      resume();
      assert.equal((await pass).deleted, 1);
      assert.equal((await under.list(h)).has(doomed.key), false);
      assert.equal((await under.list(h)).has(fresh.key), true);
      await assertLedger(under, h, ws);
    });

    void it('B2/B3: a write that outlives its deadline is reclaimed, refused and its late bytes deleted', async () => {
      const ws = await newWorkspace();
      const { deps, store } = controlled({ stageDeadlineMs: 100 });
      const meetingId = randomUUID();
      store.holdPuts();
      const writing = stageAndPut(deps, {
        workspaceId: ws,
        meetingId,
        kind: 'recording',
        data: wav,
        admit: true,
      });
      await waitFor('the slow write to pass its deadline', async () => {
        const r = await h.app.database.db
          .selectFrom('object_cleanups')
          .select('id')
          .where('meeting_id', '=', meetingId)
          .where('reserve_until', '<', new Date())
          .execute();
        return r.length === 1;
      });
      const reclaimed = await cleanupPass(deps, 'orphans');
      assert.equal(reclaimed.deleted, 1, 'the orphan (not yet written) is claimed and its row removed');
      store.releasePuts();
      const late = await writing;
      assert.equal((await under.list(h)).has(late.key), true, 'the late bytes landed');
      await assert.rejects(
        h.app.database.db
          .transaction()
          .execute((trx) => referenceStaged(trx, late, { kind: 'recording', contentType: 'audio/wav' })),
        (err: unknown) => err instanceof AppError && err.code === 'storage.fenced',
      );
      await compensate(deps, [late], new Error('reference refused'));
      assert.equal((await under.list(h)).has(late.key), false, 'the late object is deleted, not orphaned');
      const ledger = await assertLedger(under, h, ws);
      assert.equal(ledger.ledger, 0);
      assert.equal(ledger.files, 0);
    });

    void it('B5/B9: with the store failing for a while, deletion retries with growing capped backoff and completes; its bytes count until then', async () => {
      const ws = await newWorkspace();
      const { deps, store } = controlled({ cleanupBackoffMs: 40, cleanupBackoffCapMs: 300 });
      const meetingId = randomUUID();
      const obj = await stageAndPut(deps, {
        workspaceId: ws,
        meetingId,
        kind: 'recording',
        data: wav,
        admit: true,
      });
      await h.app.database.db
        .transaction()
        .execute((trx) => referenceStaged(trx, obj, { kind: 'recording', contentType: 'audio/wav' }));
      assert.equal(await storedBytes(h.app.database.db, ws), wav.length);

      store.failing = true;
      await h.app.database.db.transaction().execute((trx) => handOffMeetingObjects(trx, meetingId, 'test'));
      const delays: number[] = [];
      let lastAttempts = 0;
      while (delays.length < 6) {
        await waitFor('the next attempt to be due', async () => {
          const r = await h.app.database.db
            .selectFrom('object_cleanups')
            .select('id')
            .where('object_key', '=', obj.key)
            .where('next_attempt_at', '<=', new Date())
            .execute();
          return r.length === 1;
        });
        const outcome = await cleanupPass(deps, 'retrier');
        if (outcome.retry === 0) continue;
        const row = await h.app.database.db
          .selectFrom('object_cleanups')
          .selectAll()
          .where('object_key', '=', obj.key)
          .executeTakeFirstOrThrow();
        assert.ok(row.attempts > lastAttempts, 'the attempt count only grows');
        lastAttempts = row.attempts;
        assert.equal(row.state, 'pending', 'object deletion never becomes terminal');
        assert.match(row.last_error ?? '', /storage.unavailable/);
        delays.push(row.next_attempt_at.getTime() - row.updated_at.getTime());
        assert.equal(await storedBytes(h.app.database.db, ws), wav.length, 'bytes count until deleted');
      }
      assert.deepEqual(
        delays.map((d) => Math.round(d)),
        [40, 80, 160, 300, 300, 300],
        'exponential backoff, capped',
      );
      assert.equal((await under.list(h)).has(obj.key), true);
      // B9: the failing deletion and the bytes it holds are visible to an operator.
      const metrics = (await h.request('GET', '/metrics', undefined, METRICS_AUTH)).text;
      assert.match(metrics, /^verbatim_cleanup_failed_objects [1-9]/m);
      assert.match(metrics, /^verbatim_cleanup_oldest_pending_age_seconds (?!0\b)[0-9.]+/m);
      // S9: the bytes without the workspace id (`verbatim status` names the workspace).
      const largest = /^verbatim_stored_bytes_largest_workspace (\d+)$/m.exec(metrics)?.[1];
      assert.ok(Number(largest) >= wav.length, metrics);
      assert.ok(!metrics.includes(ws), 'no workspace id in the metrics');

      store.failing = false;
      await waitFor('the retry after the store came back', async () => {
        await cleanupPass(deps, 'retrier');
        const r = await h.app.database.db
          .selectFrom('object_cleanups')
          .select('id')
          .where('object_key', '=', obj.key)
          .execute();
        return r.length === 0;
      });
      assert.equal((await under.list(h)).has(obj.key), false);
      assert.equal(await storedBytes(h.app.database.db, ws), 0);
    });
  });
}
