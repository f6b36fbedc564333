import { sql } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { Db } from '../db/schema.ts';
import { redactSecrets } from '../domain/errors.ts';
import { exponentialBackoffMs } from '../domain/retry-policy.ts';
import type { Logger } from '../log.ts';

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
    const exhausted = await this.db
      .updateTable('outbox')
      .set({ status: 'failed', failed_at: sql<Date>`now()`, last_error: 'delivery attempts exhausted' })
      .where('status', '=', 'pending')
      .where(sql<boolean>`attempt_count >= max_attempts`)
      .where((eb) =>
        eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', sql<Date>`now()`)]),
      )
      .returning(['id', 'consumer'])
      .execute();
    for (const row of exhausted) {
      this.deps.log.error({ outboxId: row.id, consumer: row.consumer }, 'event delivery failed for good');
    }
    const rows = await this.db
      .updateTable('outbox')
      .set({
        lease_owner: this.deps.owner,
        lease_expires_at: sql<Date>`now() + ${this.deps.leaseMs} * interval '1 millisecond'`,
        attempt_count: sql<number>`attempt_count + 1`,
      })
      .where(
        'id',
        'in',
        this.db
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
        await this.db
          .updateTable('outbox')
          .set({
            status: 'delivered',
            delivered_at: sql<Date>`now()`,
            lease_owner: null,
            lease_expires_at: null,
          })
          .where('id', '=', row.id)
          .where('lease_owner', '=', this.deps.owner)
          .execute();
      } catch (err) {
        const message = redactSecrets(err instanceof Error ? err.message : String(err));
        const terminal = row.attempt_count >= row.max_attempts;
        await this.db
          .updateTable('outbox')
          .set({
            status: terminal ? 'failed' : 'pending',
            failed_at: terminal ? sql<Date>`now()` : null,
            last_error: message,
            lease_owner: null,
            lease_expires_at: null,
            next_attempt_at: sql<Date>`now() + ${exponentialBackoffMs(this.deps.retryBaseMs, row.attempt_count, 5 * 60_000)} * interval '1 millisecond'`,
          })
          .where('id', '=', row.id)
          .where('lease_owner', '=', this.deps.owner)
          .execute();
        this.deps.log[terminal ? 'error' : 'warn'](
          { outboxId: row.id, consumer: row.consumer, attempts: row.attempt_count, err: message },
          terminal ? 'event delivery failed for good' : 'event delivery failed; will retry',
        );
      }
    }
    return rows.length;
  }
}
