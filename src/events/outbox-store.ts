import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';
import { CONSUMERS_OF, type EventType } from '../domain/status.ts';

export const OUTBOX_MAX_ATTEMPTS = 20;

/** The transport task that runs the dispatcher at once; the sweep timer is its backstop. */
export const DISPATCH_TASK = 'dispatch-outbox';

/** O1: one outbox row per consumer, written in the producing transaction. */
export async function emitEvent(
  trx: Tx,
  event: { workspaceId: string; type: EventType; subjectId: string; payload: Record<string, unknown> },
): Promise<string> {
  const eventId = randomUUID();
  const consumers = CONSUMERS_OF[event.type];
  await trx
    .insertInto('outbox')
    .values(
      consumers.map((consumer) => ({
        id: randomUUID(),
        workspace_id: event.workspaceId,
        event_type: event.type,
        consumer,
        subject_id: event.subjectId,
        payload: JSON.stringify({ ...event.payload, eventId }),
        status: 'pending',
        max_attempts: OUTBOX_MAX_ATTEMPTS,
      })),
    )
    .execute();
  // Wake a dispatcher now rather than at the next sweep. One queued wake-up is enough (job key);
  // if it cannot be added, the sweep still delivers the event.
  await sql`savepoint wake_dispatcher`.execute(trx);
  try {
    await sql`select verbatim_enqueue(${DISPATCH_TASK}::text, '{}'::json, null, 1, ${DISPATCH_TASK}::text)`.execute(
      trx,
    );
    await sql`release savepoint wake_dispatcher`.execute(trx);
  } catch {
    await sql`rollback to savepoint wake_dispatcher`.execute(trx);
  }
  return eventId;
}

/**
 * O1: events whose leases used up their attempts (their delivery kept killing its dispatcher, so
 * the error path never ran) end failed, for an operator. Returns them.
 */
export async function failExhaustedEvents(db: Db): Promise<Array<{ id: string; consumer: string }>> {
  return db
    .updateTable('outbox')
    .set({ status: 'failed', failed_at: sql<Date>`now()`, last_error: 'delivery attempts exhausted' })
    .where('status', '=', 'pending')
    .where(sql<boolean>`attempt_count >= max_attempts`)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', sql<Date>`now()`)]))
    .returning(['id', 'consumer'])
    .execute();
}

/** O1: up to `limit` due events leased to `owner` for `leaseMs`, each attempt counted; none two owners share. */
export async function leaseDueEvents(db: Db, owner: string, leaseMs: number, limit: number) {
  return db
    .updateTable('outbox')
    .set({
      lease_owner: owner,
      lease_expires_at: sql<Date>`now() + ${leaseMs} * interval '1 millisecond'`,
      attempt_count: sql<number>`attempt_count + 1`,
    })
    .where(
      'id',
      'in',
      db
        .selectFrom('outbox')
        .select('id')
        .where('status', '=', 'pending')
        .where(sql<boolean>`attempt_count < max_attempts`)
        .where('next_attempt_at', '<=', sql<Date>`now()`)
        .where((eb) =>
          eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', sql<Date>`now()`)]),
        )
        .orderBy('next_attempt_at')
        .limit(limit)
        .forUpdate()
        .skipLocked(),
    )
    .returningAll()
    .execute();
}

/** The consumer returned: delivered, if `owner` still holds the lease. */
export async function markEventDelivered(db: Db, id: string, owner: string): Promise<void> {
  await db
    .updateTable('outbox')
    .set({ status: 'delivered', delivered_at: sql<Date>`now()`, lease_owner: null, lease_expires_at: null })
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .execute();
}

/** The consumer failed: retried after `retryInMs`, or failed for good when `terminal`; if `owner` still holds the lease. */
export async function markEventUndelivered(
  db: Db,
  id: string,
  owner: string,
  outcome: { terminal: boolean; error: string; retryInMs: number },
): Promise<void> {
  await db
    .updateTable('outbox')
    .set({
      status: outcome.terminal ? 'failed' : 'pending',
      failed_at: outcome.terminal ? sql<Date>`now()` : null,
      last_error: outcome.error,
      lease_owner: null,
      lease_expires_at: null,
      next_attempt_at: sql<Date>`now() + ${outcome.retryInMs} * interval '1 millisecond'`,
    })
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .execute();
}

/** Events about a deleted subject carry its content (minutes): they go with it. */
export async function dropEventsAbout(trx: Tx, subjectId: string): Promise<void> {
  await trx.deleteFrom('outbox').where('subject_id', '=', subjectId).execute();
}
