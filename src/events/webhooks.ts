import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config.ts';
import type { Db, Tx } from '../db/schema.ts';
import { secretBoxOf } from '../secrets/secret-box.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import { startLeaseLoop, type LeaseLoop } from '../worker/lease-loop.ts';
import { egressFailureText, egressGuardOf, httpStatusCategory } from '../net/egress.ts';
import { insertAudit } from '../workspaces/audit-store.ts';
import type { OutboxEvent } from './dispatcher.ts';
import {
  deliveryRows,
  disableEndpointRows,
  disableFailingEndpoints,
  endpointsOf,
  insertEndpoint,
  leaseDueDeliveries,
  queueDeliveries,
  recordDeliveryAttempt,
  rotateSecretRow,
  type DisabledEndpoint,
  type DueDelivery,
} from './webhook-store.ts';

/**
 * O3: customer webhooks, in the Standard Webhooks style. Each event is an outbox row (written in
 * the transaction that produced it, O1) whose `webhooks` consumer creates one delivery per
 * subscribed endpoint. A delivery's body and id are fixed at creation; each attempt is signed:
 *
 *   webhook-id:        the delivery's event id (the same on every retry: receivers dedupe on it)
 *   webhook-timestamp: seconds since the epoch, at this attempt
 *   webhook-signature: "v1," + base64(HMAC-SHA256(secret, id + "." + timestamp + "." + body))
 *
 * where the secret is the bytes of the base64 text after "whsec_". Attempts back off from
 * `webhookRetryMs`, doubling, capped at an hour, and stop after `webhookMaxAttempts` with the
 * delivery failed: visible in its log and in the metrics for an operator.
 */

export const WEBHOOK_EVENTS = [
  'meeting.transcribed',
  'meeting.transcript_revised',
  'meeting.completed',
  'meeting.failed',
  'minutes.ready',
];
const SECRET_PREFIX = 'whsec_';
const TOLERANCE_S = 300;

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString('base64');
}

export function signWebhook(secret: string, id: string, timestamp: number | string, body: string): string {
  const key = Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The receiver's check, as documented in docs/webhooks.md: recompute the signature over the id,
 * the timestamp and the raw body exactly as received, compare in constant time against each
 * "v1," signature in the header, and refuse timestamps more than five minutes away.
 */
/**
 * S7: what can be checked before the body is read, so a receiver can refuse a request that cannot
 * verify without reading it: all three headers there and the timestamp within tolerance.
 */
export function webhookHeadersFresh(
  headers: { 'webhook-id'?: string; 'webhook-timestamp'?: string; 'webhook-signature'?: string },
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  const stamp = headers['webhook-timestamp'] ?? '';
  if (!headers['webhook-id'] || !headers['webhook-signature'] || !/^\d{1,12}$/.test(stamp)) return false;
  return Math.abs(nowSeconds - Number(stamp)) <= TOLERANCE_S;
}

export function verifyWebhook(
  secret: string,
  headers: { 'webhook-id'?: string; 'webhook-timestamp'?: string; 'webhook-signature'?: string },
  body: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): boolean {
  const id = headers['webhook-id'];
  const stamp = headers['webhook-timestamp'] ?? '';
  const signatures = headers['webhook-signature'];
  if (!id || !signatures || !webhookHeadersFresh(headers, nowSeconds)) return false;
  // Signed over the header exactly as sent.
  const expected = Buffer.from(signWebhook(secret, id, stamp, body));
  return signatures.split(' ').some((candidate) => {
    const given = Buffer.from(candidate);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface WebhookDeps {
  db: Db;
  config: Config;
  log: Logger;
}

export async function createEndpoint(deps: WebhookDeps, workspaceId: string, input: unknown) {
  const body = (input ?? {}) as Record<string, unknown>;
  const url = body.url;
  let parsed: URL | null = null;
  try {
    parsed = typeof url === 'string' ? new URL(url) : null;
  } catch {
    parsed = null;
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new AppError(ErrorKind.invalidInput, 'webhook.url', 'url must be an http or https URL');
  }
  if (parsed.username || parsed.password) {
    // They would travel in every request and show in the delivery log; the signature authenticates.
    throw new AppError(ErrorKind.invalidInput, 'webhook.url', 'url must not carry a user name or password');
  }
  const internal = egressGuardOf(deps.config).literalRefusal(parsed);
  if (internal !== null) {
    throw new AppError(
      ErrorKind.invalidInput,
      'webhook.url',
      `url must point at a public address: ${internal} (an operator may allow it with VERBATIM_EGRESS_ALLOW)`,
    );
  }
  const events = body.events ?? [];
  if (!Array.isArray(events) || events.some((e) => typeof e !== 'string' || !WEBHOOK_EVENTS.includes(e))) {
    throw new AppError(
      ErrorKind.invalidInput,
      'webhook.events',
      `events must be a list drawn from ${WEBHOOK_EVENTS.join(', ')} (empty: all of them)`,
    );
  }
  // F2: a workspace's endpoints are bounded: each one costs every worker deliveries.
  const limit = deps.config.requestLimits.webhookEndpointsPerWorkspace;
  const enabled = (await endpointsOf(deps.db, workspaceId)).filter((e) => e.disabled_at === null).length;
  if (enabled >= limit) {
    throw new AppError(
      ErrorKind.quotaExhausted,
      'webhook.too_many',
      `this workspace already has ${limit} webhook endpoints (VERBATIM_WEBHOOK_ENDPOINTS_PER_WORKSPACE); delete one first`,
      { retryAfterSeconds: 3600 },
    );
  }
  const secret = newWebhookSecret();
  const row = await insertEndpoint(deps.db, {
    workspaceId,
    url: parsed.toString(),
    secret: secretBoxOf(deps.config).seal(secret),
    events: events as string[],
  });
  // The only time the secret leaves the server (U7: the database holds it sealed).
  return { ...endpointView(row), secret };
}

export function endpointView(row: {
  id: string;
  url: string;
  events: string[];
  created_at: Date;
  disabled_at: Date | null;
}) {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
  };
}

/** The outbox consumer: one delivery per endpoint of the workspace that takes this event. */
export async function fanOutWebhook(deps: WebhookDeps, event: OutboxEvent): Promise<void> {
  const eventId = typeof event.payload.eventId === 'string' ? event.payload.eventId : event.id;
  const body = JSON.stringify({
    type: event.eventType,
    timestamp: new Date().toISOString(),
    data: { ...event.payload, eventId: undefined, meetingId: event.subjectId },
  });
  await queueDeliveries(deps.db, {
    workspaceId: event.workspaceId,
    eventId,
    eventType: event.eventType,
    body,
  });
}

/** F6: the audit entries of endpoints the system disabled, in the transaction that disables them. */
async function auditDisabled(trx: Tx, disabled: DisabledEndpoint[], reason: string): Promise<void> {
  await insertAudit(
    trx,
    disabled.map((e) => ({
      workspaceId: e.workspaceId,
      action: 'webhook.disabled',
      actor: { kind: 'service', label: 'webhook delivery' },
      subject: { type: 'webhook', id: e.id },
      detail: { reason, failingSince: e.failingSince.toISOString() },
    })),
  );
}

/** F6: how often a worker looks for endpoints to disable. */
const DISABLE_CHECK_MS = 5_000;

/**
 * F6: webhook delivery in a loop of its own, beside the recovery sweeps (startLeaseLoop), so a
 * receiver that never answers holds a delivery slot for its timeout and nothing else. Up to
 * `VERBATIM_WEBHOOK_CONCURRENCY` deliveries in flight per process, up to
 * `VERBATIM_WEBHOOK_WORKSPACE_CONCURRENCY` of one workspace across processes, leased round-robin
 * across workspaces (leaseDueDeliveries). Every few seconds, endpoints that failed for
 * `VERBATIM_WEBHOOK_DISABLE_AFTER_DAYS` with no success are disabled, with an audit entry
 * (`webhook.disabled`).
 */
export function startWebhookLoop(deps: WebhookDeps, owner: string, options: { tickMs: number }): LeaseLoop {
  // A worker that dies holding deliveries delays them by no more than their lease (they go again
  // under the same id): twice the timeout and five seconds.
  const leaseMs = 2 * deps.config.webhookTimeoutMs + 5_000;
  let lastDisableCheck = 0;
  return startLeaseLoop<DueDelivery>({
    name: 'webhooks',
    tickMs: options.tickMs,
    concurrency: deps.config.webhookConcurrency,
    log: deps.log,
    lease: (free) =>
      leaseDueDeliveries(deps.db, owner, leaseMs, free, deps.config.webhookWorkspaceConcurrency),
    run: (d) =>
      attempt(deps, owner, d).catch((err: unknown) =>
        deps.log.warn(
          { deliveryId: d.id, err: String(err) },
          'webhook attempt not recorded; its lease will expire',
        ),
      ),
    afterLease: async () => {
      if (Date.now() - lastDisableCheck < DISABLE_CHECK_MS) return;
      lastDisableCheck = Date.now();
      const disabled = await disableFailingEndpoints(
        deps.db,
        deps.config.webhookDisableAfterMs,
        auditDisabled,
      );
      for (const e of disabled) {
        deps.log.warn(
          { endpointId: e.id, failingSince: e.failingSince },
          'webhook endpoint disabled: its deliveries failed for days with no success',
        );
      }
    },
  });
}

/**
 * U7: the delivery's signatures: by the endpoint's secret, and while a rotation's overlap lasts
 * by the one before it too (space-separated, as Standard Webhooks reads them): a receiver still
 * holding the old secret verifies either.
 */
function signatures(deps: WebhookDeps, d: DueDelivery, timestamp: number): string {
  const box = secretBoxOf(deps.config);
  const all = [signWebhook(box.open(d.secret), d.event_id, timestamp, d.body)];
  if (d.previous_secret && d.previous_valid)
    all.push(signWebhook(box.open(d.previous_secret), d.event_id, timestamp, d.body));
  return all.join(' ');
}

/**
 * U7: a new signing secret for the endpoint, shown once; the one before stays valid for
 * `overlapHours` (deliveries carry both signatures), so receivers can switch without a gap.
 */
export async function rotateEndpointSecret(
  deps: WebhookDeps,
  workspaceId: string,
  endpointId: string,
  input: unknown,
): Promise<{ secret: string; previousValidUntil: Date | null }> {
  const given = (input as { overlapHours?: unknown } | undefined)?.overlapHours;
  const overlapHours = given === undefined ? 24 : given;
  if (
    typeof overlapHours !== 'number' ||
    !Number.isFinite(overlapHours) ||
    overlapHours < 0 ||
    overlapHours > 720
  ) {
    throw new AppError(
      ErrorKind.invalidInput,
      'webhook.overlap_hours',
      'overlapHours must be a number of hours from 0 to 720',
    );
  }
  const secret = newWebhookSecret();
  const until = await rotateSecretRow(
    deps.db,
    workspaceId,
    endpointId,
    secretBoxOf(deps.config).seal(secret),
    Math.round(overlapHours * 3_600_000),
  );
  if (until === undefined)
    throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no enabled webhook endpoint ${endpointId}`);
  return { secret, previousValidUntil: until };
}

async function attempt(deps: WebhookDeps, owner: string, d: DueDelivery): Promise<void> {
  const timestamp = Math.floor(Date.now() / 1000);
  const started = performance.now();
  let statusCode: number | null = null;
  let error: string | null = null;
  try {
    // S5: through the egress guard (the receiver's name checked and pinned; no redirects), and
    // what is kept of the answer is its status: a category, never its body.
    const res = await egressGuardOf(deps.config).request(d.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'verbatim-webhooks',
        'webhook-id': d.event_id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatures(deps, d, timestamp),
      },
      body: d.body,
      timeoutMs: deps.config.webhookTimeoutMs,
      maxBytes: 64 * 1024,
      maxRedirects: 0,
    });
    statusCode = res.status;
    if (res.status < 200 || res.status >= 300) {
      error = `${httpStatusCategory(res.status)}: the receiver answered HTTP ${res.status}`;
    }
  } catch (err) {
    error = egressFailureText(err);
  }
  const durationMs = Math.round(performance.now() - started);
  const attemptNo = d.attempts + 1;
  await recordDeliveryAttempt(deps.db, owner, {
    deliveryId: d.id,
    attempt: attemptNo,
    statusCode,
    error,
    durationMs,
    exhausted: attemptNo >= deps.config.webhookMaxAttempts,
    retryInMs: Math.min(deps.config.webhookRetryCapMs, deps.config.webhookRetryMs * 2 ** (attemptNo - 1)),
  });
  if (error !== null) {
    deps.log.warn({ deliveryId: d.id, attempt: attemptNo, error }, 'webhook delivery failed');
  }
}

/** O3: a workspace's endpoints, oldest first, without their secrets. */
export async function listEndpoints(deps: WebhookDeps, workspaceId: string) {
  const rows = await endpointsOf(deps.db, workspaceId);
  return rows.map(endpointView);
}

/**
 * O3: disables an endpoint of the workspace; what was still to be sent to it will not be, and stays
 * in its log as failed. False when the workspace has no such enabled endpoint.
 */
export async function disableEndpoint(
  deps: WebhookDeps,
  workspaceId: string,
  endpointId: string,
): Promise<boolean> {
  return disableEndpointRows(deps.db, workspaceId, endpointId);
}

/** The delivery log of an endpoint, newest first, with every attempt. */
export async function deliveryLog(deps: WebhookDeps, workspaceId: string, endpointId: string) {
  const rows = await deliveryRows(deps.db, workspaceId, endpointId);
  if (!rows) throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${endpointId}`);
  const { deliveries, attempts } = rows;
  return deliveries.map((d) => ({
    id: d.id,
    eventId: d.event_id,
    eventType: d.event_type,
    status: d.status,
    attempts: d.attempts,
    nextAttemptAt: d.status === 'pending' ? d.next_attempt_at : null,
    lastError: d.last_error,
    createdAt: d.created_at,
    deliveredAt: d.delivered_at,
    failedAt: d.failed_at,
    log: attempts
      .filter((a) => a.delivery_id === d.id)
      .map((a) => ({
        attempt: a.attempt,
        statusCode: a.status_code,
        error: a.error,
        durationMs: a.duration_ms,
        at: a.created_at,
      })),
  }));
}
