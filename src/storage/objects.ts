import { systemInTx } from '../db/tenant.ts';
import { createHash, randomUUID } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import type { Checkpoints } from '../checkpoints.ts';
import type { Config } from '../config.ts';
import type { Db, Tx } from '../db/schema.ts';
import { AppError, ErrorKind, toErrorRecord } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import type { BlobStore } from '../ports.ts';
import { ClientCode } from '../domain/client-codes.ts';
import {
  backOffCleanup,
  claimDueCleanups,
  fenceObject,
  insertStagedRow,
  markCompensated,
  releaseCleanupLeases,
  releaseStrayCleanupLeases,
  removeCleanupRow,
  reservationOf,
  reservedBytes,
  setReservation,
  spendReservation,
  stagedInFlight,
  storedBytes,
  takeGuards,
  updateStagedRow,
  type StagedObject,
} from './object-rows.ts';

export {
  handOffMeetingObjects,
  referenceStaged,
  releaseReservation,
  storedBytes,
  type StagedObject,
} from './object-rows.ts';

/**
 * The life of a stored object, from the first byte written to the last byte deleted (B1–B6).
 *
 *  stage      a cleanup row (key, bytes, deadline) is committed before the first byte is written;
 *             uploads are admitted against the quotas here (B2, B6)
 *  write      the bytes go to the store under a key the server generated (B1)
 *  reference  the transaction that uses the object inserts its `blobs` row and retires the cleanup
 *             row, under the quota guards, and refuses an object already claimed for deletion (B4)
 *  hand-off   deleting marks the blob deleted and adds a pending cleanup row in one transaction
 *  delete     under the guards the cleanup is fenced (`delete_fenced_at`), then the object deleted,
 *             then the row removed; a failed delete retries for ever with capped backoff (B5)
 *
 * A workspace's stored bytes are its live blobs plus its cleanup rows, so an object counts against
 * the quotas from staging until it is really gone, whatever crashed in between (B6).
 *
 * Guards: one row for the installation and one per workspace, always locked global first.
 * Admission takes them FOR NO KEY UPDATE (admissions are serialized); reference creators and the
 * fencing delete take them FOR KEY SHARE, which excludes neither admissions nor each other. What
 * makes a reference and a fence exclude each other is the object's own cleanup row: the creator
 * needs it `staged` and locks it, the fence needs it `pending` and locks it, and an object key
 * has one row. So a deleter stopped inside its fence holds up that one object, not every upload
 * of its workspace (were the fence to hold the workspace's guard exclusively, a worker paused
 * inside one would stall every chunk of the tenant for as long as it stayed paused).
 */

export interface StorageDeps {
  db: Db;
  /**
   * Where staged rows are committed: their own small pool, because a derived object (a window, a
   * decoded chunk) is staged while the request's transaction holds a connection of the main pool;
   * with one pool, enough such requests at once would wait on each other for good.
   */
  stagingDb?: Db;
  blobs: BlobStore;
  config: Config;
  log: Logger;
  checkpoints: Checkpoints;
}

const CLEANUP_LEASE_MS = 60_000;

/**
 * B1, B2, B6: generates the object's identity, commits its staged cleanup row (admitting it against
 * the quotas when `admit`), then writes the bytes. A failed write is compensated before this throws.
 */
export async function stageAndPut(
  deps: StorageDeps,
  /** admit: against the quotas (true), or spending the meeting's reservation (F1, a split's window). */
  spec: { workspaceId: string; meetingId: string; kind: string; data: Buffer; admit: boolean | Reservation },
): Promise<StagedObject> {
  const sha256 = createHash('sha256').update(spec.data).digest('hex');
  const staged: StagedObject = {
    workspaceId: spec.workspaceId,
    meetingId: spec.meetingId,
    key: `${spec.workspaceId}/${spec.meetingId}/${spec.kind}-${sha256}-${randomUUID()}`,
    sha256,
    bytes: spec.data.length,
  };
  await stage(deps, staged, spec.admit);
  try {
    await deps.checkpoints.hit('storage.staged', { kind: spec.kind });
    await deps.blobs.put(staged.key, spec.data);
    await deps.checkpoints.hit('storage.written', { kind: spec.kind });
  } catch (err) {
    await compensate(deps, [staged], err);
    throw err;
  }
  return staged;
}

/** B10: what a body of unknown length reserves at first, and at least what each growth adds. */
export const STREAM_RESERVE_STEP = 64 * 1024 * 1024;

/**
 * B10: stageAndPut for a body that arrives as a stream (an upload, a bot's download), never held
 * whole. The object is admitted against the quotas with the size announced; a body of unknown
 * length reserves `STREAM_RESERVE_STEP` (or `maxBytes`, if less) and grows its reservation,
 * admitted again each time, as it passes it, so it neither blocks other uploads with a reservation
 * of the whole limit nor stores past a quota. The reservation is also extended in time while the
 * body keeps arriving. Its SHA-256 and size are computed on the way; a body past `maxBytes` is cut
 * off with 413 (`tooLarge`), an empty one refused with `empty`. A body cut off midway, or any
 * failed write, leaves no object: the store writes nothing visible, and the staged row is
 * compensated before this throws. The error thrown is the body's own (cut off, too large, over
 * quota) when the body failed, else the store's.
 */
export async function stageAndPutStream(
  deps: StorageDeps,
  spec: {
    workspaceId: string;
    meetingId: string;
    kind: string;
    source: Readable;
    /** Content-Length, when the client sent one. */
    declaredBytes: number | null;
    maxBytes: number;
    admit: boolean;
    /** The error for a body with no bytes, and for one past `maxBytes`. */
    empty: () => AppError;
    tooLarge: () => AppError;
    /**
     * E5, F1: judges the body's first `bytes` (all of a shorter body) before any of it is written:
     * an error refuses it there.
     */
    head?: { bytes: number; check: (head: Buffer) => AppError | null | Promise<AppError | null> };
    /**
     * F2: at most `max` bodies of this kind streaming in at once for the workspace, across api
     * processes (its staged rows count them); over it, `refused` is thrown before any byte is kept.
     */
    inFlight?: { max: number; refused: () => AppError };
  },
): Promise<StagedObject> {
  let reserved = spec.declaredBytes ?? Math.min(spec.maxBytes, STREAM_RESERVE_STEP);
  const staged: StagedObject = {
    workspaceId: spec.workspaceId,
    meetingId: spec.meetingId,
    key: `${spec.workspaceId}/${spec.meetingId}/${spec.kind}-${randomUUID()}`,
    sha256: '',
    bytes: reserved,
  };
  await stage(deps, staged, spec.admit, spec.inFlight && { ...spec.inFlight, kind: spec.kind });
  const db = deps.stagingDb ?? deps.db;
  const hash = createHash('sha256');
  let bytes = 0;
  // The body's own failure, kept apart from the store's: it is what the caller is told.
  const body: { failure: Error | null } = { failure: null };
  const fail = (err: Error) => {
    body.failure ??= err;
    return body.failure;
  };
  // A body that keeps arriving keeps its reservation: the deadline moves on while bytes come, so
  // an upload may take as long as its request may, and an orphan of a process that died midway
  // is found one stage deadline after its last byte.
  const extendEveryMs = Math.max(100, deps.config.stageDeadlineMs / 3);
  let extendedAt = Date.now();
  const extend = () => {
    extendedAt = Date.now();
    updateStagedRow(db, staged.key, { stageDeadlineMs: deps.config.stageDeadlineMs }).catch((err: unknown) =>
      deps.log.warn({ err: toErrorRecord(err).code }, "could not extend an upload's reservation"),
    );
  };
  // A body past what it reserved reserves more (at least doubling), admitted against the quotas.
  const grow = async (needed: number) => {
    const next = Math.min(spec.maxBytes, Math.max(needed, reserved * 2, reserved + STREAM_RESERVE_STEP));
    await db.transaction().execute(async (trx) => {
      if (spec.admit) await admit(deps.config, trx, spec.workspaceId, next - reserved);
      const updated = await updateStagedRow(trx, staged.key, {
        bytes: next,
        stageDeadlineMs: deps.config.stageDeadlineMs,
      });
      if (!updated) {
        throw new AppError(
          ErrorKind.transient,
          'storage.fenced',
          'the upload was reclaimed before it ended; send it again',
        );
      }
    });
    reserved = next;
    staged.bytes = next;
    extendedAt = Date.now();
  };
  // E5, F1: the body's first bytes are held back until they are judged, so a refused body has
  // written nothing.
  let head: Buffer | null = spec.head ? Buffer.alloc(0) : null;
  const judgeHead = async (): Promise<AppError | null> => {
    if (!head || !spec.head) return null;
    const judged = head;
    head = null;
    return spec.head.check(judged);
  };
  const failed = (err: unknown) => fail(err instanceof Error ? err : new Error(String(err)));
  const measure = new Transform({
    transform(piece: Buffer, _encoding, done) {
      bytes += piece.length;
      if (bytes > spec.maxBytes) {
        done(fail(spec.tooLarge()));
        return;
      }
      if (head && spec.head) {
        head = Buffer.concat([head, piece]);
        if (head.length < spec.head.bytes) {
          done();
          return;
        }
        const held = head;
        judgeHead().then(
          (refused) => (refused ? done(fail(refused)) : pass(held, done)),
          (err: unknown) => done(failed(err)),
        );
        return;
      }
      pass(piece, done);
    },
    flush(done) {
      // A body shorter than the head is judged on what there is, then written.
      if (!head || head.length === 0) {
        done(null);
        return;
      }
      const held = head;
      judgeHead().then(
        (refused) =>
          refused
            ? done(fail(refused))
            : pass(held, (err, data) => {
                if (!err && data) this.push(data);
                done(err ?? null);
              }),
        (err: unknown) => done(failed(err)),
      );
    },
  });
  function pass(piece: Buffer, done: (err?: Error | null, data?: Buffer) => void): void {
    hash.update(piece);
    if (bytes > reserved) {
      grow(bytes).then(
        () => done(null, piece),
        (err: unknown) => done(failed(err)),
      );
      return;
    }
    if (Date.now() - extendedAt >= extendEveryMs) extend();
    done(null, piece);
  }
  const cutOff = () =>
    new AppError(ErrorKind.invalidInput, 'request.aborted', 'the body was cut off before its end');
  // A source that failed or closed before it was read fails at once, with its own error.
  if (spec.source.destroyed && !spec.source.readableEnded) {
    measure.destroy(fail(spec.source.errored ?? cutOff()));
  }
  spec.source.once('error', (err) => measure.destroy(fail(err)));
  // A client that goes away midway: the request stream closes without its end.
  spec.source.once('close', () => {
    if (!spec.source.readableEnded) measure.destroy(fail(cutOff()));
  });
  spec.source.pipe(measure);
  try {
    await deps.checkpoints.hit('storage.staged', { kind: spec.kind });
    await deps.blobs.putStream(staged.key, measure);
    if (bytes === 0) throw spec.empty();
    staged.sha256 = hash.digest('hex');
    staged.bytes = bytes;
    if (bytes !== reserved) await updateStagedRow(db, staged.key, { bytes });
    await deps.checkpoints.hit('storage.written', { kind: spec.kind });
  } catch (err) {
    spec.source.unpipe(measure);
    // Destroyed so that it can no longer fail unheard.
    measure.on('error', () => undefined).destroy();
    await compensate(deps, [staged], err);
    throw body.failure ?? err;
  }
  return staged;
}

/** B2, B6: commits the object's staged cleanup row, admitting its bytes against the quotas when `admit`. */
async function stage(
  deps: StorageDeps,
  staged: StagedObject,
  admitIt: boolean | Reservation,
  inFlight?: { max: number; kind: string; refused: () => AppError },
): Promise<void> {
  await (deps.stagingDb ?? deps.db).transaction().execute(async (trx) => {
    if (inFlight) {
      // Serialized with every other admission of the workspace by its guard, so two api
      // processes cannot both take the last place.
      await takeGuards(trx, staged.workspaceId, 'admit');
      if ((await stagedInFlight(trx, staged.workspaceId, inFlight.kind)) >= inFlight.max)
        throw inFlight.refused();
    }
    if (admitIt)
      await admit(
        deps.config,
        trx,
        staged.workspaceId,
        staged.bytes,
        undefined,
        admitIt === true ? undefined : admitIt,
      );
    await insertStagedRow(trx, staged, deps.config.stageDeadlineMs);
  });
}

/**
 * F1: throws `storage.quota_exceeded` (saying `what`) unless `bytes` more fit the quotas now; stores
 * and reserves nothing. For audio an object will become (a recording's windows) before it is kept.
 */
export async function assertRoom(
  deps: StorageDeps,
  workspaceId: string,
  bytes: number,
  what: string,
): Promise<void> {
  await (deps.stagingDb ?? deps.db)
    .transaction()
    .execute((trx) => admit(deps.config, trx, workspaceId, bytes, what));
}

/**
 * F1: how an admission touches a meeting's reservation: `reserve` sets aside `bytes` for the
 * windows its split will store (admitted as if stored); `spend` stores a window of it, taken from
 * what it holds in reserve (a window within the reservation always fits).
 */
export type Reservation = { meetingId: string; mode: 'reserve' | 'spend' };

async function admit(
  config: Config,
  trx: Tx,
  workspaceId: string,
  bytes: number,
  what = `storing ${bytes} bytes`,
  reservation?: Reservation,
): Promise<void> {
  if (config.workspaceQuotaBytes === 0 && config.globalQuotaBytes === 0) return;
  await takeGuards(trx, workspaceId, 'admit');
  const meetingId = reservation?.meetingId ?? null;
  const own =
    reservation?.mode === 'spend'
      ? await systemInTx(trx, () => reservationOf(trx, reservation.meetingId))
      : 0;
  // What stays reserved after this admission, beside what it stores.
  const left = reservation?.mode === 'spend' ? Math.max(own - bytes, 0) : 0;
  const checks: Array<[number, string | null, string]> = [
    [config.workspaceQuotaBytes, workspaceId, 'the workspace'],
    [config.globalQuotaBytes, null, 'this installation'],
  ];
  for (const [quota, scope, where] of checks) {
    if (quota === 0) continue;
    // The installation's total is read as the system role (S10): a tenant sees only its own bytes.
    // Reservations are read as the system role in both scopes: a member's view of meetings hides
    // other people's private ones, whose reservations count all the same.
    const stored =
      scope === null ? await systemInTx(trx, () => storedBytes(trx, null)) : await storedBytes(trx, scope);
    const reserved = await systemInTx(trx, () => reservedBytes(trx, scope, meetingId));
    if (stored + reserved + bytes + left > quota) {
      throw new AppError(
        ErrorKind.tooLarge,
        ClientCode.storageQuotaExceeded,
        `${what} would exceed the storage quota of ${where}: ${stored} of ${quota} bytes are in use` +
          (reserved > 0 ? ` and ${reserved} more are reserved for recordings being split` : ''),
      );
    }
  }
  if (reservation?.mode === 'reserve') await setReservation(trx, workspaceId, reservation.meetingId, bytes);
  else if (reservation && own > 0) await spendReservation(trx, reservation.meetingId, bytes);
}

/**
 * F1: inside the transaction that accepts a recording whose windows come to `bytes`: admits them
 * against the quotas and reserves them for the meeting (its split spends the reservation).
 */
export async function reserveRoom(
  config: Config,
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  bytes: number,
  what: string,
): Promise<void> {
  await admit(config, trx, workspaceId, bytes, what, { meetingId, mode: 'reserve' });
}

/**
 * B3: after a failure past staging, each object not referenced is moved from staged to pending
 * deletion (the durable record) and deleted at once; what cannot be deleted now stays for the
 * cleanup pass. Never throws: the caller is already handling the original failure.
 */
export async function compensate(deps: StorageDeps, staged: StagedObject[], cause: unknown): Promise<void> {
  if (staged.length === 0) return;
  const reason = `compensated: ${toErrorRecord(cause).code}`;
  try {
    // Upserted, not only updated: the staged row may be gone already (a write that outlived its
    // deadline was reclaimed as an orphan before its bytes landed). An object that a committed
    // reference holds is safe all the same: the fenced delete checks for live references and keeps it.
    await markCompensated(deps.stagingDb ?? deps.db, staged, reason);
    await deleteNow(
      deps,
      staged.map((s) => s.key),
    );
  } catch (err) {
    deps.log.warn({ err: String(err), objects: staged.length }, 'compensation deferred to the cleanup pass');
  }
}

/** Deletes handed-off objects now, each through the fenced path; failures stay for the cleanup pass. */
export async function deleteNow(deps: StorageDeps, keys: string[]): Promise<number> {
  let deleted = 0;
  for (const key of keys) {
    if ((await deleteObject(deps, key, null)) === 'deleted') deleted++;
  }
  return deleted;
}

export type CleanupOutcome = 'deleted' | 'referenced' | 'gone' | 'retry' | 'busy';

const LOCK_NOT_AVAILABLE = '55P03';

/**
 * B4, B5: one fenced deletion. Under the guards, the cleanup row and every blob row of the key are
 * locked; if a live reference exists the object is kept and the row retired; otherwise the fence is
 * committed, then the object deleted, then the row removed (which is when its bytes stop counting).
 * A failed delete counts an attempt and backs off exponentially, capped; it is never given up.
 */
export async function deleteObject(
  deps: StorageDeps,
  key: string,
  owner: string | null,
): Promise<CleanupOutcome> {
  let fenced: 'gone' | 'referenced' | 'fenced';
  try {
    fenced = await fenceObject(deps.db, key, owner, () => deps.checkpoints.hit('storage.fencing', {}));
  } catch (err) {
    if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
    if (owner !== null) await releaseCleanupLeases(deps.db, owner, [key]);
    deps.log.info({ objectKey: key }, 'deletion waited too long for the quota guard; the next pass retries');
    return 'busy';
  }
  if (fenced === 'referenced') {
    deps.log.warn({ objectKey: key }, 'cleanup found a live reference; the object is kept');
    return 'referenced';
  }
  if (fenced === 'gone') return 'gone';
  return removeFenced(deps, key);
}

/** The physical delete of a fenced object; the row goes only once it succeeded (B5). */
async function removeFenced(deps: StorageDeps, key: string): Promise<CleanupOutcome> {
  try {
    await deps.checkpoints.hit('storage.before-delete', {});
    await deps.blobs.delete(key);
  } catch (err) {
    await backOff(deps, key, err);
    deps.log.warn(
      { objectKey: key, code: toErrorRecord(err).code },
      'object deletion failed; it will be retried',
    );
    return 'retry';
  }
  await removeCleanupRow(deps.db, key);
  return 'deleted';
}

/** A failed try at one object: counted, and the next one backed off exponentially (capped). */
async function backOff(deps: StorageDeps, key: string, err: unknown): Promise<void> {
  const error = toErrorRecord(err);
  await backOffCleanup(deps.db, key, `${error.code}: ${error.message}`, {
    baseMs: deps.config.cleanupBackoffMs,
    capMs: deps.config.cleanupBackoffCapMs,
  });
}

/**
 * The cleanup pass (run by every worker's sweep): staged rows past their deadline become orphans
 * to delete (B2), and pending rows whose next attempt is due are retried (B5). Rows are leased so
 * two workers do not delete the same object at once; a lease that expires is simply taken again,
 * and the fence it left stays set.
 */
export async function cleanupPass(
  deps: StorageDeps,
  owner: string,
  limit = 50,
): Promise<Record<CleanupOutcome, number>> {
  const mine = inFlight.get(owner) ?? new Set<string>();
  inFlight.set(owner, mine);
  // A row leased to this owner that none of its passes is working on was left by a pass cut short
  // whose hand-back failed too (the database was restarting): it is taken back now, not after the
  // lease. Found by the simulation: a heal waited most of a minute on one such row.
  await releaseStrayCleanupLeases(deps.db, owner, [...mine]);
  const keys = await claimDueCleanups(deps.db, owner, CLEANUP_LEASE_MS, limit);
  const outcomes: Record<CleanupOutcome, number> = { deleted: 0, referenced: 0, gone: 0, retry: 0, busy: 0 };
  for (const key of keys) mine.add(key);
  let done = 0;
  try {
    for (const key of keys) {
      outcomes[await deleteObject(deps, key, owner)]++;
      done++;
    }
  } catch (err) {
    // A pass cut short (its connection lost, say) hands back what it had not reached, so the next
    // pass takes them now rather than after the lease; the object it failed on is backed off like
    // any failed try, so one that keeps failing does not hold up the others. If this fails too,
    // the leases still end.
    await backOff(deps, keys[done]!, err).catch(() => undefined);
    const rest = keys.slice(done + 1);
    await releaseCleanupLeases(deps.db, owner, rest).catch(() => undefined);
    throw err;
  } finally {
    for (const key of keys) mine.delete(key);
  }
  return outcomes;
}

/** The cleanup rows each owner's passes in this process are working on now. */
const inFlight = new Map<string, Set<string>>();
