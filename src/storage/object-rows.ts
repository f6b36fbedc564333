import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';

/**
 * The rows behind stored objects (src/storage/objects.ts has their life and its rules): the quota
 * guards, the cleanup rows that stage and delete objects, and the `blobs` rows that reference them.
 */

/** An object written under a staged cleanup row, waiting for the row that references it. */
export interface StagedObject {
  workspaceId: string;
  meetingId: string;
  key: string;
  sha256: string;
  bytes: number;
}

const GLOBAL = 'global';

export type GuardMode = 'share' | 'admit';

export async function takeGuards(trx: Tx, workspaceId: string, mode: GuardMode): Promise<void> {
  const strength = mode === 'share' ? sql`for key share` : sql`for no key update`;
  // Global first, then the workspace: one order everywhere, so guards never deadlock each other.
  await sql`select scope from storage_guards where scope = ${GLOBAL} ${strength}`.execute(trx);
  const lock = () =>
    sql`select scope from storage_guards where scope = ${workspaceId} ${strength}`.execute(trx);
  // The workspace's row is inserted only the first time: an insert, even one that finds the row,
  // would wait on any open transaction that had inserted it.
  if ((await lock()).rows.length > 0) return;
  await sql`insert into storage_guards (scope) values (${workspaceId}) on conflict do nothing`.execute(trx);
  await lock();
}

/** F2: the workspace's objects of `kind` being written now (staged, their reservation not yet run out). */
export async function stagedInFlight(trx: Tx, workspaceId: string, kind: string): Promise<number> {
  const row = await trx
    .selectFrom('object_cleanups')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('workspace_id', '=', workspaceId)
    .where('state', '=', 'staged')
    .where('object_key', 'like', `${workspaceId}/%/${kind}-%`)
    .where(sql<boolean>`reserve_until > now()`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Bytes held for a workspace (or, with null, the whole installation): live blobs plus pending cleanups. */
export async function storedBytes(db: Db | Tx, workspaceId: string | null): Promise<number> {
  const row = await sql<{ bytes: string }>`
    select
      (select coalesce(sum(size_bytes), 0) from blobs
        where deleted_at is null and (${workspaceId}::uuid is null or workspace_id = ${workspaceId}::uuid))
      + (select coalesce(sum(bytes), 0) from object_cleanups
        where (${workspaceId}::uuid is null or workspace_id = ${workspaceId}::uuid)) as bytes`.execute(db);
  return Number(row.rows[0]!.bytes);
}

/**
 * F1: the bytes reserved for windows not yet stored (a workspace's, or with null every workspace's),
 * less `exceptMeeting`'s own. Only a meeting being processed holds a reservation: one that ended,
 * however, holds none, so a reservation never outlives its split. Read as the system role by the
 * caller: a tenant's view of meetings hides other people's private ones, whose reservations count.
 */
export async function reservedBytes(
  db: Db | Tx,
  workspaceId: string | null,
  exceptMeeting: string | null = null,
): Promise<number> {
  const row = await sql<{ bytes: string }>`
    select coalesce(sum(r.bytes), 0) as bytes from quota_reservations r
      join meetings m on m.id = r.meeting_id and m.status = 'processing'
     where (${workspaceId}::uuid is null or r.workspace_id = ${workspaceId}::uuid)
       and (${exceptMeeting}::uuid is null or r.meeting_id <> ${exceptMeeting}::uuid)`.execute(db);
  return Number(row.rows[0]!.bytes);
}

/** F1: the meeting's reservation, when it is being processed (0 otherwise). */
export async function reservationOf(trx: Tx, meetingId: string): Promise<number> {
  const row = await sql<{ bytes: string }>`
    select r.bytes::text as bytes from quota_reservations r
      join meetings m on m.id = r.meeting_id and m.status = 'processing'
     where r.meeting_id = ${meetingId}::uuid`.execute(trx);
  return Number(row.rows[0]?.bytes ?? 0);
}

/** F1: sets aside `bytes` for the meeting's windows (replacing what it held). */
export async function setReservation(
  trx: Tx,
  workspaceId: string,
  meetingId: string,
  bytes: number,
): Promise<void> {
  await sql`insert into quota_reservations (meeting_id, workspace_id, bytes)
            values (${meetingId}::uuid, ${workspaceId}::uuid, ${Math.max(0, Math.round(bytes))})
            on conflict (meeting_id) do update set bytes = excluded.bytes`.execute(trx);
}

/**
 * F1: a window of `bytes` stored from the meeting's reservation. Only ever decreases it, so an old
 * split attempt that read it before it ended cannot put it back.
 */
export async function spendReservation(trx: Tx, meetingId: string, bytes: number): Promise<void> {
  await sql`update quota_reservations set bytes = greatest(bytes - ${Math.round(bytes)}, 0)
             where meeting_id = ${meetingId}::uuid and bytes > 0`.execute(trx);
}

/** F1: the split has cut its last window: what is left of its estimate is given back. */
export async function releaseReservation(trx: Tx, meetingId: string): Promise<void> {
  await sql`delete from quota_reservations where meeting_id = ${meetingId}::uuid`.execute(trx);
}

/**
 * B2, B4: inside the transaction that uses a staged object: takes the guards, refuses an object
 * already claimed for deletion, inserts its `blobs` row and retires the staged cleanup row.
 * Returns the blob's id.
 */
export async function referenceStaged(
  trx: Tx,
  staged: StagedObject,
  row: { kind: string; contentType: string },
): Promise<string> {
  await takeGuards(trx, staged.workspaceId, 'share');
  const cleanup = await trx
    .selectFrom('object_cleanups')
    .select(['id', 'state', 'delete_fenced_at'])
    .where('object_key', '=', staged.key)
    .forUpdate()
    .executeTakeFirst();
  if (!cleanup || cleanup.state !== 'staged' || cleanup.delete_fenced_at !== null) {
    throw new AppError(
      ErrorKind.transient,
      'storage.fenced',
      'the stored object was claimed for deletion before it was used; send it again',
    );
  }
  const blobId = randomUUID();
  await trx
    .insertInto('blobs')
    .values({
      id: blobId,
      workspace_id: staged.workspaceId,
      meeting_id: staged.meetingId,
      kind: row.kind,
      object_key: staged.key,
      sha256: staged.sha256,
      size_bytes: staged.bytes,
      content_type: row.contentType,
    })
    .execute();
  await trx.deleteFrom('object_cleanups').where('id', '=', cleanup.id).execute();
  return blobId;
}

/**
 * B8, L16: hands every live object of a meeting (but those in `keep`) to the cleanup outbox, in the caller's
 * transaction: the blobs are marked deleted and a pending cleanup row carries each object's bytes.
 * Returns the keys, for `deleteNow` after the commit.
 */
export async function handOffMeetingObjects(
  trx: Tx,
  meetingId: string,
  reason: string,
  keep: readonly string[] = [],
): Promise<string[]> {
  let q = trx
    .updateTable('blobs')
    .set({ deleted_at: sql<Date>`now()` })
    .where('meeting_id', '=', meetingId)
    .where('deleted_at', 'is', null);
  if (keep.length > 0) q = q.where('id', 'not in', keep);
  const blobs = await q.returning(['workspace_id', 'meeting_id', 'object_key', 'size_bytes']).execute();
  if (blobs.length === 0) return [];
  await trx
    .insertInto('object_cleanups')
    .values(
      blobs.map((b) => ({
        id: randomUUID(),
        workspace_id: b.workspace_id,
        meeting_id: b.meeting_id,
        object_key: b.object_key,
        bytes: b.size_bytes,
        state: 'pending' as const,
        reason,
      })),
    )
    .onConflict((oc) => oc.column('object_key').doNothing())
    .execute();
  return blobs.map((b) => b.object_key);
}

/** Commits the fence (B4) under the guards, or finds the object referenced or already handled. */
export function fenceObject(
  db: Db,
  key: string,
  owner: string | null,
  onFenced: () => Promise<void>,
): Promise<'gone' | 'referenced' | 'fenced'> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('object_cleanups')
      .select(['id', 'workspace_id', 'state', 'lease_owner', 'lease_expires_at'])
      .where('object_key', '=', key)
      .executeTakeFirst();
    if (!row || row.state !== 'pending') return 'gone' as const;
    // A reference creator holds the object's row for the length of its transaction; rather than
    // queue behind one that is slow or paused, give up after a while and let the next pass try again.
    await sql`set local lock_timeout = '2s'`.execute(trx);
    await takeGuards(trx, row.workspace_id, 'share');
    const locked = await trx
      .selectFrom('object_cleanups')
      .select(['id', 'state', 'lease_owner', 'lease_expires_at'])
      .where('id', '=', row.id)
      .forUpdate()
      .executeTakeFirst();
    if (!locked || locked.state !== 'pending') return 'gone' as const;
    const leasedByOther =
      locked.lease_owner !== null &&
      locked.lease_owner !== owner &&
      locked.lease_expires_at !== null &&
      locked.lease_expires_at.getTime() > Date.now();
    if (leasedByOther) return 'gone' as const;
    const refs = await trx
      .selectFrom('blobs')
      .select(['id', 'deleted_at'])
      .where('object_key', '=', key)
      .forUpdate()
      .execute();
    if (refs.some((r) => r.deleted_at === null)) {
      await trx.deleteFrom('object_cleanups').where('id', '=', row.id).execute();
      return 'referenced' as const;
    }
    await trx
      .updateTable('object_cleanups')
      .set({ delete_fenced_at: sql<Date>`coalesce(delete_fenced_at, now())`, updated_at: sql<Date>`now()` })
      .where('id', '=', row.id)
      .execute();
    await trx
      .updateTable('blobs')
      .set({ delete_fenced_at: sql<Date>`coalesce(delete_fenced_at, now())` })
      .where('object_key', '=', key)
      .execute();
    await onFenced();
    return 'fenced' as const;
  });
}

/** B2: a staged object's cleanup row, committed before its first byte is written. */
export async function insertStagedRow(trx: Tx, staged: StagedObject, stageDeadlineMs: number): Promise<void> {
  await trx
    .insertInto('object_cleanups')
    .values({
      id: randomUUID(),
      workspace_id: staged.workspaceId,
      meeting_id: staged.meetingId,
      object_key: staged.key,
      bytes: staged.bytes,
      state: 'staged',
      reason: 'staged write',
      reserve_until: sql<Date>`now() + ${stageDeadlineMs} * interval '1 millisecond'`,
    })
    .execute();
}

/**
 * B10: a streamed object's staged row, while it is still staged and not fenced: its reservation
 * held `stageDeadlineMs` longer, and its reserved bytes changed when `bytes` is given. False when
 * the row was reclaimed meanwhile.
 */
export async function updateStagedRow(
  db: Db,
  key: string,
  change: { bytes?: number; stageDeadlineMs?: number },
): Promise<boolean> {
  const updated = await db
    .updateTable('object_cleanups')
    .set({
      ...(change.bytes !== undefined ? { bytes: change.bytes } : {}),
      ...(change.stageDeadlineMs !== undefined
        ? { reserve_until: sql<Date>`now() + ${change.stageDeadlineMs} * interval '1 millisecond'` }
        : {}),
    })
    .where('object_key', '=', key)
    .where('state', '=', 'staged')
    .where('delete_fenced_at', 'is', null)
    .executeTakeFirst();
  return updated.numUpdatedRows > 0n;
}

/**
 * B3: objects not referenced after a failure become pending deletions. Upserted: the staged row may
 * be gone already (reclaimed as an orphan before its bytes landed); a row still staged turns
 * pending, due now.
 */
export async function markCompensated(db: Db, staged: StagedObject[], reason: string): Promise<void> {
  await db
    .insertInto('object_cleanups')
    .values(
      staged.map((s) => ({
        id: randomUUID(),
        workspace_id: s.workspaceId,
        meeting_id: s.meetingId,
        object_key: s.key,
        bytes: s.bytes,
        state: 'pending' as const,
        reason,
      })),
    )
    .onConflict((oc) =>
      oc
        .column('object_key')
        .doUpdateSet({
          state: 'pending',
          reason,
          next_attempt_at: sql<Date>`now()`,
          updated_at: sql<Date>`now()`,
        })
        .where('object_cleanups.state', '=', 'staged'),
    )
    .execute();
}

/** The cleanup rows of these keys that `owner` leases are handed back (the next pass takes them). */
export async function releaseCleanupLeases(db: Db, owner: string, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await db
    .updateTable('object_cleanups')
    .set({ lease_owner: null, lease_expires_at: null })
    .where('object_key', 'in', keys)
    .where('lease_owner', '=', owner)
    .execute();
}

/** B5: the object is gone from the store: its row goes, and its bytes stop counting. */
export async function removeCleanupRow(db: Db, key: string): Promise<void> {
  await db.deleteFrom('object_cleanups').where('object_key', '=', key).execute();
}

/** B5: a failed try at one object: counted, the next one backed off exponentially (capped), its lease released. */
export async function backOffCleanup(
  db: Db,
  key: string,
  error: string,
  backoff: { baseMs: number; capMs: number },
): Promise<void> {
  await sql`
    update object_cleanups
       set attempts = attempts + 1,
           next_attempt_at = now() + least(${backoff.capMs}::float8, ${backoff.baseMs}::float8 * power(2, least(attempts, 40))) * interval '1 millisecond',
           last_error = ${error.slice(0, 500)},
           lease_owner = null, lease_expires_at = null, updated_at = now()
     where object_key = ${key}`.execute(db);
}

/** Leases `owner` holds on rows none of its passes works on (`working`), released now. */
export async function releaseStrayCleanupLeases(db: Db, owner: string, working: string[]): Promise<void> {
  await sql`
    update object_cleanups
       set lease_owner = null, lease_expires_at = null
     where lease_owner = ${owner}
       and lease_expires_at > now()
       and not (object_key = any(${working}::text[]))`.execute(db);
}

/**
 * B2, B5: up to `limit` due cleanup rows leased to `owner` for `leaseMs`: staged rows past their
 * deadline (orphans, now pending) and pending rows whose next attempt is due. Returns their keys.
 */
export async function claimDueCleanups(
  db: Db,
  owner: string,
  leaseMs: number,
  limit: number,
): Promise<string[]> {
  const claimed = await sql<{ object_key: string }>`
    update object_cleanups c
       set state = 'pending',
           reason = case when c.state = 'staged' then 'orphan: staged write never referenced' else c.reason end,
           lease_owner = ${owner},
           lease_expires_at = now() + ${leaseMs} * interval '1 millisecond',
           updated_at = now()
     where c.id in (
       select id from object_cleanups
        where ((state = 'staged' and reserve_until < now()) or (state = 'pending' and next_attempt_at <= now()))
          and (lease_expires_at is null or lease_expires_at < now())
        order by next_attempt_at
        limit ${limit}
        for update skip locked)
    returning c.object_key`.execute(db);
  return claimed.rows.map((r) => r.object_key);
}
