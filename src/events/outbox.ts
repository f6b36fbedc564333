import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { CONSUMERS_OF, type EventType } from '../domain/status.ts';

export const OUTBOX_MAX_ATTEMPTS = 20;

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
  return eventId;
}
