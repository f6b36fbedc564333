import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/schema.ts';

/**
 * O3: the webhook tables: endpoints, the deliveries queued for them (one per endpoint and event)
 * and every attempt. src/events/webhooks.ts validates, signs and sends.
 */

export async function insertEndpoint(
  db: Db,
  endpoint: { workspaceId: string; url: string; secret: string; events: string[] },
) {
  return db
    .insertInto('webhook_endpoints')
    .values({
      id: randomUUID(),
      workspace_id: endpoint.workspaceId,
      url: endpoint.url,
      secret: endpoint.secret,
      events: endpoint.events,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** One pending delivery per enabled endpoint of the workspace that takes this event type; once per event. */
export async function queueDeliveries(
  db: Db,
  event: { workspaceId: string; eventId: string; eventType: string; body: string },
): Promise<void> {
  await sql`
    insert into webhook_deliveries (id, workspace_id, endpoint_id, event_id, event_type, body, status)
    select gen_random_uuid(), e.workspace_id, e.id, ${event.eventId}::uuid, ${event.eventType}, ${event.body}, 'pending'
      from webhook_endpoints e
     where e.workspace_id = ${event.workspaceId}::uuid and e.disabled_at is null
       and (cardinality(e.events) = 0 or ${event.eventType} = any(e.events))
    on conflict (endpoint_id, event_id) do nothing`.execute(db);
}

export interface DueDelivery {
  id: string;
  endpoint_id: string;
  event_id: string;
  body: string;
  attempts: number;
  url: string;
  /** Sealed (src/secrets/secret-box.ts). */
  secret: string;
  /** U7: the secret before a rotation, and whether its overlap still lasts. */
  previous_secret: string | null;
  previous_valid: boolean;
}

/** Up to `limit` due deliveries of enabled endpoints, leased to `owner` for `leaseMs`, with what sending needs. */
export async function leaseDueDeliveries(
  db: Db,
  owner: string,
  leaseMs: number,
  limit: number,
  perWorkspace: number,
): Promise<DueDelivery[]> {
  // F6: round-robin across workspaces: each workspace's due deliveries ranked oldest first, the
  // first of every workspace before the second of any; a workspace with `perWorkspace` already in
  // flight (on any worker) gets none this time. The candidates are read without locks (a window
  // function cannot lock); the update takes each row only while it is still free, so two workers
  // never lease one delivery.
  const due = await sql<DueDelivery>`
    with candidates as (
      select c.id, c.next_attempt_at,
             row_number() over (partition by c.workspace_id order by c.next_attempt_at, c.id) as rank,
             (select count(*) from webhook_deliveries f
               where f.workspace_id = c.workspace_id and f.status = 'pending'
                 and f.lease_expires_at is not null and f.lease_expires_at > now()) as busy
        from webhook_deliveries c
        join webhook_endpoints ce on ce.id = c.endpoint_id and ce.disabled_at is null
       where c.status = 'pending' and c.next_attempt_at <= now()
         and (c.lease_expires_at is null or c.lease_expires_at < now())
    ), chosen as (
      select id from candidates where rank + busy <= ${perWorkspace}
       order by rank, next_attempt_at limit ${limit}
    )
    update webhook_deliveries d
       set lease_owner = ${owner}, lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
      from webhook_endpoints e, chosen
     where d.id = chosen.id and e.id = d.endpoint_id and e.disabled_at is null
       and d.status = 'pending' and (d.lease_expires_at is null or d.lease_expires_at < now())
    returning d.id, d.endpoint_id, d.event_id, d.body, d.attempts, e.url, e.secret, e.previous_secret,
              coalesce(e.previous_secret_until > now(), false) as previous_valid`.execute(db);
  return due.rows;
}

export interface DisabledEndpoint {
  id: string;
  workspaceId: string;
  failingSince: Date;
}

/**
 * F6: disables every endpoint whose deliveries have failed for `afterMs` with no success between,
 * fails what was still to be sent to it, and writes an audit entry for its workspace. Returns the
 * endpoints disabled.
 */
export async function disableFailingEndpoints(
  db: Db,
  afterMs: number,
  /** Writes the audit entries, in the same transaction. */
  audit: (trx: Tx, disabled: DisabledEndpoint[], reason: string) => Promise<void>,
): Promise<DisabledEndpoint[]> {
  return db.transaction().execute(async (trx) => {
    const reason = `every delivery failed for ${Math.round((afterMs / 86_400_000) * 100) / 100} days with no success`;
    const disabled = await trx
      .updateTable('webhook_endpoints')
      .set({ disabled_at: sql<Date>`now()`, disabled_reason: reason })
      .where('disabled_at', 'is', null)
      .where('failing_since', 'is not', null)
      .where(sql<boolean>`failing_since < now() - ${afterMs} * interval '1 millisecond'`)
      .returning(['id', 'workspace_id', 'failing_since'])
      .execute();
    for (const e of disabled) {
      await trx
        .updateTable('webhook_deliveries')
        .set({ status: 'failed', failed_at: sql<Date>`now()`, last_error: `endpoint disabled: ${reason}` })
        .where('endpoint_id', '=', e.id)
        .where('status', '=', 'pending')
        .execute();
    }
    const rows = disabled.map((e) => ({
      id: e.id,
      workspaceId: e.workspace_id,
      failingSince: e.failing_since!,
    }));
    await audit(trx, rows, reason);
    return rows;
  });
}

/**
 * One attempt, logged, and the delivery settled with it: delivered, or retried after `retryInMs`,
 * or failed when `exhausted`. Only the holder of the lease settles it: a late answer never undoes
 * another's.
 */
export async function recordDeliveryAttempt(
  db: Db,
  owner: string,
  a: {
    deliveryId: string;
    attempt: number;
    statusCode: number | null;
    error: string | null;
    durationMs: number;
    exhausted: boolean;
    retryInMs: number;
  },
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('webhook_attempts')
      .values({
        delivery_id: a.deliveryId,
        attempt: a.attempt,
        status_code: a.statusCode,
        error: a.error,
        duration_ms: a.durationMs,
      })
      .execute();
    const update = trx
      .updateTable('webhook_deliveries')
      .where('id', '=', a.deliveryId)
      .where('lease_owner', '=', owner)
      .where('status', '=', 'pending');
    // F6: the endpoint's run of failures: begun by a failure, ended by a success.
    await trx
      .updateTable('webhook_endpoints')
      .set(
        a.error === null
          ? { failing_since: null }
          : { failing_since: sql<Date>`coalesce(failing_since, now())` },
      )
      .where(
        'id',
        '=',
        sql<string>`(select endpoint_id from webhook_deliveries where id = ${a.deliveryId}::uuid)`,
      )
      .execute();
    if (a.error === null) {
      await update
        .set({
          status: 'delivered',
          attempts: a.attempt,
          delivered_at: sql<Date>`now()`,
          last_error: null,
          lease_owner: null,
          lease_expires_at: null,
        })
        .execute();
      return;
    }
    await update
      .set({
        status: a.exhausted ? 'failed' : 'pending',
        attempts: a.attempt,
        last_error: a.error,
        next_attempt_at: sql<Date>`now() + ${a.retryInMs} * interval '1 millisecond'`,
        failed_at: a.exhausted ? sql<Date>`now()` : null,
        lease_owner: null,
        lease_expires_at: null,
      })
      .execute();
  });
}

/** A workspace's endpoints, oldest first. */
export async function endpointsOf(db: Db, workspaceId: string) {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('created_at')
    .execute();
}

/** Disables the endpoint and fails what was still to be sent to it; false when there is no such enabled endpoint. */
export async function disableEndpointRows(db: Db, workspaceId: string, endpointId: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('webhook_endpoints')
      .set({ disabled_at: new Date() })
      .where('id', '=', endpointId)
      .where('workspace_id', '=', workspaceId)
      .where('disabled_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!row) return false;
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', failed_at: new Date(), last_error: 'endpoint disabled' })
      .where('endpoint_id', '=', row.id)
      .where('status', '=', 'pending')
      .execute();
    return true;
  });
}

/** The endpoint's newest 100 deliveries with their attempts; null when the workspace has no such endpoint. */
export async function deliveryRows(db: Db, workspaceId: string, endpointId: string) {
  const endpoint = await db
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('id', '=', endpointId)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
  if (!endpoint) return null;
  const deliveries = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .orderBy('created_at', 'desc')
    .limit(100)
    .execute();
  const attempts = deliveries.length
    ? await db
        .selectFrom('webhook_attempts')
        .selectAll()
        .where(
          'delivery_id',
          'in',
          deliveries.map((d) => d.id),
        )
        .orderBy('id')
        .execute()
    : [];
  return { deliveries, attempts };
}

/**
 * A deleted meeting's webhook deliveries lose their bodies; those not yet sent are closed as
 * failed. What was sent stays in the log.
 */
export async function forgetDeliveriesAbout(trx: Tx, workspaceId: string, meetingId: string): Promise<void> {
  await sql`
    update webhook_deliveries
       set body = '{}',
           status = case when status = 'pending' then 'failed' else status end,
           failed_at = case when status = 'pending' then now() else failed_at end,
           last_error = case when status = 'pending' then 'meeting deleted' else last_error end
     where workspace_id = ${workspaceId}::uuid
       and body::jsonb -> 'data' ->> 'meetingId' = ${meetingId}`.execute(trx);
}

/**
 * U7: the endpoint's new (sealed) secret; the current one becomes the previous, valid for
 * `overlapMs` more. Returns until when (null: no overlap), or undefined when the workspace has no
 * such enabled endpoint.
 */
export async function rotateSecretRow(
  db: Db,
  workspaceId: string,
  endpointId: string,
  sealed: string,
  overlapMs: number,
): Promise<Date | null | undefined> {
  const row = await db
    .updateTable('webhook_endpoints')
    .set({
      previous_secret: sql<string | null>`case when ${overlapMs} > 0 then secret else null end`,
      previous_secret_until: sql<Date | null>`case when ${overlapMs} > 0 then now() + ${overlapMs} * interval '1 millisecond' else null end`,
      secret: sealed,
    })
    .where('id', '=', endpointId)
    .where('workspace_id', '=', workspaceId)
    .where('disabled_at', 'is', null)
    .returning('previous_secret_until')
    .executeTakeFirst();
  return row ? row.previous_secret_until : undefined;
}
