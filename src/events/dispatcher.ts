import type { Checkpoints } from '../checkpoints.ts';
import type { Db } from '../db/schema.ts';
import { redactSecrets } from '../domain/errors.ts';
import { exponentialBackoffMs } from '../domain/retry-policy.ts';
import type { Logger } from '../log.ts';
import {
  failExhaustedEvents,
  leaseDueEvents,
  markEventDelivered,
  markEventUndelivered,
} from './outbox-store.ts';

export interface OutboxEvent {
  id: string;
  workspaceId: string;
  eventType: string;
  consumer: string;
  subjectId: string;
  payload: Record<string, unknown>;
}

export type ConsumerHandler = (event: OutboxEvent) => Promise<void>;

/**
 * O1: delivers outbox rows at least once. A row is leased before delivery and marked delivered only
 * after the consumer returned; a dispatcher that dies in between leaves the lease to expire, and the
 * row is delivered again — so consumers must be idempotent.
 */
export class OutboxDispatcher {
  constructor(
    private readonly db: Db,
    private readonly consumers: Record<string, ConsumerHandler>,
    private readonly deps: {
      owner: string;
      leaseMs: number;
      retryBaseMs: number;
      log: Logger;
      checkpoints: Checkpoints;
    },
  ) {}

  async dispatchDue(limit = 20): Promise<number> {
    // An event whose delivery keeps killing its dispatcher never reaches the error path below;
    // once its leases have used up its attempts it ends failed, for an operator (metric, CLI).
    const exhausted = await failExhaustedEvents(this.db);
    for (const row of exhausted) {
      this.deps.log.error({ outboxId: row.id, consumer: row.consumer }, 'event delivery failed for good');
    }
    const rows = await leaseDueEvents(this.db, this.deps.owner, this.deps.leaseMs, limit);
    for (const row of rows) {
      const event: OutboxEvent = {
        id: row.id,
        workspaceId: row.workspace_id,
        eventType: row.event_type,
        consumer: row.consumer,
        subjectId: row.subject_id,
        payload: row.payload,
      };
      const handler = this.consumers[row.consumer];
      try {
        if (!handler) throw new Error(`no consumer named ${row.consumer}`);
        await handler(event);
        await this.deps.checkpoints.hit('dispatcher.after-deliver', {
          eventType: row.event_type,
          consumer: row.consumer,
        });
        await markEventDelivered(this.db, row.id, this.deps.owner);
      } catch (err) {
        const message = redactSecrets(err instanceof Error ? err.message : String(err));
        const terminal = row.attempt_count >= row.max_attempts;
        await markEventUndelivered(this.db, row.id, this.deps.owner, {
          terminal,
          error: message,
          retryInMs: exponentialBackoffMs(this.deps.retryBaseMs, row.attempt_count, 5 * 60_000),
        });
        this.deps.log[terminal ? 'error' : 'warn'](
          { outboxId: row.id, consumer: row.consumer, attempts: row.attempt_count, err: message },
          terminal ? 'event delivery failed for good' : 'event delivery failed; will retry',
        );
      }
    }
    return rows.length;
  }
}
