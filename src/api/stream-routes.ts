import type { FastifyInstance } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { asSystem, readAsTenant } from '../db/tenant.ts';
import { readStream, type StreamEvent } from '../meetings/stream-store.ts';
import { meetingViewIn } from './meeting-routes.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { stillAuthenticated } from './authorize.ts';
import { StreamHub } from './stream-hub.ts';
import { ERRORS, ID_PARAMS, refusal, type RouteSchema } from './contract.ts';

const EVENTS_SCHEMA: RouteSchema = {
  summary:
    'L22/L23: the meeting live, as Server-Sent Events: `draft` (a chunk’s provisional words), `window` (a window’s final words, or `superseded`: drop them), `meeting` (the meeting as GET shows it, closing every batch), `deleted`. Event ids are positions in the meeting’s stream: reconnect with `Last-Event-ID` (or `?lastEventId=`) to get exactly what came after; without one the whole meeting so far comes first. A comment line every 15 s keeps the connection alive. A stream ends after VERBATIM_STREAM_MAX_SECONDS (30 minutes by default): open it again with the last id.',
  params: ID_PARAMS,
  headers: { type: 'object', properties: { 'last-event-id': { type: 'string', pattern: '^[0-9]+$' } } },
  querystring: { type: 'object', properties: { lastEventId: { type: 'string', pattern: '^[0-9]+$' } } },
  response: {
    200: {
      description: 'text/event-stream',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    ...ERRORS,
    400: refusal('Last-Event-ID is not an id this stream sent (stream.bad_last_event_id)'),
  },
};

/** A comment line this often keeps proxies and clients from taking a quiet meeting for a dead line. */
const KEEP_ALIVE_MS = 15_000;
/** A stream looks for changes this often even without a notification (one lost)… */
const POLL_MS = 5_000;
/** …and this often while notifications are not arriving (no LISTEN connection, or it is down). */
const POLL_UNHEARD_MS = 1_000;
/** Unsent bytes a stream may hold for a client that does not read, before it is cut. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** What a client's EventSource waits before it reconnects, sent as the stream's `retry:`. */
const RETRY_MS = 2_000;

/**
 * L23: GET /v1/meetings/{id}/events, the meeting's changes as Server-Sent Events.
 *
 *   event: window   a window settled, was added or was superseded: its index, span, status and
 *                   current segments (`superseded`: drop its words, a repair replaced them)
 *   event: meeting  the meeting as GET /v1/meetings/{id} shows it; closes every batch
 *   event: deleted  the meeting is gone; the stream ends
 *
 * Each event's `id` is its position in the meeting's stream; a client that reconnects with
 * `Last-Event-ID` (or `?lastEventId=`) gets what came after it and nothing twice. Without one it
 * gets the whole meeting so far, then its changes as they happen.
 */
export function registerStreamRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;
  const hub = api.connectionString ? new StreamHub(api.connectionString, api.log) : null;
  // Open streams end when the server closes: before it waits for its connections to finish (a
  // stream never would), so a shutdown is not held up by a browser tab left open.
  const open = new Set<() => void>();
  app.addHook('preClose', (done) => {
    for (const end of open) end();
    done();
  });
  app.addHook('onClose', async () => hub?.close());

  app.get<{ Params: { id: string }; Querystring: { lastEventId?: string } }>(
    '/v1/meetings/:id/events',
    { schema: EVENTS_SCHEMA },
    async (req, reply) => {
      const workspaceId = workspaceOf(req);
      let cursor = lastEventId(req.headers['last-event-id'] ?? req.query.lastEventId);
      // Unknown or foreign meetings get their 404 as JSON, before the stream starts.
      const found = await readAsTenant(deps.db, workspaceId, (trx) =>
        deps.meetings.get(workspaceId, req.params.id, trx),
      );
      const meetingId = found.id;
      const principal = principalOf(req);

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.write(`retry: ${RETRY_MS}\n\n`);

      let closed = false;
      let wake: (() => void) | null = null;
      let woken = false;
      const poke = () => {
        woken = true;
        wake?.();
      };
      const end = () => {
        closed = true;
        poke();
      };
      open.add(end);
      const unsubscribe = hub?.subscribe(meetingId, poke) ?? (() => undefined);
      req.raw.on('close', end);
      // A client that stops reading is cut off rather than buffered without end.
      const send = (text: string) => {
        if (closed) return;
        res.write(text);
        if (res.writableLength > MAX_BUFFERED_BYTES) end();
      };
      const keepAlive = setInterval(() => send(': keep-alive\n\n'), KEEP_ALIVE_MS);
      let checkedAt = Date.now();
      // F3: a stream lives so long, then ends; its client comes back with its Last-Event-ID.
      const endsAt = Date.now() + deps.config.requestLimits.streamMaxMs;
      let first = true;
      try {
        while (!closed) {
          woken = false;
          // S9/U3: a key or session revoked, expired or demoted while its stream is open stops it
          // within a keep-alive.
          if (Date.now() - checkedAt >= KEEP_ALIVE_MS) {
            checkedAt = Date.now();
            // As the request's own authentication ran: on the system path, before any tenant.
            if (!(await asSystem(() => stillAuthenticated(api, req, principal)))) break;
          }
          const batch = await readStream(
            deps.db,
            workspaceId,
            meetingId,
            cursor,
            (trx, m) => meetingViewIn(deps, trx, m),
            (trx) => deps.meetings.get(workspaceId, meetingId, trx),
            first,
          );
          first = false;
          for (const e of batch.events) send(frame(e));
          cursor = batch.last;
          if (Date.now() >= endsAt) break;
          if (batch.more || woken) continue;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(
              resolve,
              Math.min(
                KEEP_ALIVE_MS,
                hub?.listening ? POLL_MS : POLL_UNHEARD_MS,
                Math.max(0, endsAt - Date.now()),
              ),
            );
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = null;
        }
      } catch (err) {
        if (err instanceof AppError && err.kind === ErrorKind.notFound) {
          send(`event: deleted\ndata: ${JSON.stringify({ id: meetingId })}\n\n`);
        } else if (!closed) {
          // The client reconnects with its Last-Event-ID and misses nothing.
          req.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'meeting stream cut');
        }
      } finally {
        open.delete(end);
        clearInterval(keepAlive);
        unsubscribe();
        res.end();
      }
    },
  );
}

function frame(e: StreamEvent): string {
  const id = e.id === null ? '' : `id: ${e.id}\n`;
  return `${id}event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

function lastEventId(value: string | string[] | undefined): number {
  if (value === undefined || value === '') return 0;
  const text = Array.isArray(value) ? value[0]! : value;
  if (!/^\d{1,15}$/.test(text)) {
    throw new AppError(
      ErrorKind.invalidInput,
      'stream.bad_last_event_id',
      `Last-Event-ID must be an event id this stream sent (a whole number), got "${text.slice(0, 40)}"`,
    );
  }
  return Number(text);
}
