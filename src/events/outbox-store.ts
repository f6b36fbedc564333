import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Tx } from '../db/schema.ts';
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
