import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { Executor } from '../db/schema.ts';
import type { Logger } from '../log.ts';

/** What graphile-worker carries: only the pointer to our row. The row is the truth. */
export interface DeliveryPayload {
  jobId: string;
  deliveryId: string;
}

/** graphile-worker retries a delivery whose handler threw (a bug or a lost database); our row keeps its own count. */
const TRANSPORT_MAX_ATTEMPTS = 5;

/**
 * Adds the graphile-worker job that delivers our job row, inside the caller's transaction but behind
 * a savepoint: when the enqueue fails the state change still commits (J10) and the rescue sweep
 * re-drives the row later (J9). Returns whether the delivery was added.
 */
export async function enqueueDelivery(
  trx: Executor,
  job: { id: string; kind: string; delivery_id: string; run_after: Date },
  deps: { checkpoints: Checkpoints; log: Logger },
): Promise<boolean> {
  await sql`savepoint enqueue_delivery`.execute(trx);
  try {
    await deps.checkpoints.hit('enqueue', { kind: job.kind });
    const payload: DeliveryPayload = { jobId: job.id, deliveryId: job.delivery_id };
    // graphile_worker.add_job through its wrapper, which a tenant may call; the message's priority
    // is the job's fair round in its workspace's lane (F5, migration 0053).
    await sql`select verbatim_enqueue(
        ${job.kind}::text,
        ${JSON.stringify(payload)}::json,
        ${job.run_after}::timestamptz,
        ${TRANSPORT_MAX_ATTEMPTS}::int,
        ${job.delivery_id}::text,
        ${job.id}::uuid
      )`.execute(trx);
    await trx
      .updateTable('jobs')
      .set({ delivered_at: sql<Date>`now()` })
      .where('id', '=', job.id)
      .execute();
    await sql`release savepoint enqueue_delivery`.execute(trx);
    return true;
  } catch (err) {
    await sql`rollback to savepoint enqueue_delivery`.execute(trx);
    deps.log.warn(
      { jobId: job.id, kind: job.kind, err: err instanceof Error ? err.message : String(err) },
      'job committed but its delivery could not be enqueued; the rescue sweep will re-drive it',
    );
    return false;
  }
}

export function newDeliveryId(): string {
  return randomUUID();
}
