import { createHash, randomUUID } from 'node:crypto';
import os from 'node:os';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestLimits } from '../config.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { asSystem, readAsTenant } from '../db/tenant.ts';
import { readStream, type StreamEvent } from '../meetings/stream-store.ts';
import { meetingViewIn } from './meeting-routes.ts';
import type { Principal } from '../workspaces/sign-in.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { stillAuthenticated } from './authorize.ts';
import { StreamHub } from './stream-hub.ts';
import { forgetStreamCounts, saveStreamCounts } from '../ops/stream-count-store.ts';
import { empty, ERRORS, ID_PARAMS, refusal, type RouteSchema } from './contract.ts';

const EVENTS_SCHEMA: RouteSchema = {
  summary:
    'L22/L23: the meeting live, as Server-Sent Events: `draft` (a chunk’s provisional words), `window` (a window’s final words, or `superseded`: drop them), `meeting` (the meeting as GET shows it, closing every batch), `deleted`. Event ids are positions in the meeting’s stream: reconnect with `Last-Event-ID` (or `?lastEventId=`) to get exactly what came after; without one the whole meeting so far comes first. A comment line every 15 s keeps the connection alive. A stream ends after VERBATIM_STREAM_MAX_SECONDS (30 minutes by default): open it again with the last id. Once the meeting is settled the stream sends `end` and closes.',
  params: ID_PARAMS,
  headers: { type: 'object', properties: { 'last-event-id': { type: 'string', pattern: '^[0-9]+$' } } },
  querystring: { type: 'object', properties: { lastEventId: { type: 'string', pattern: '^[0-9]+$' } } },
  response: {
    200: {
      description: 'text/event-stream',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
    204: empty(
      'F3: the meeting is settled (complete or failed, minutes and late audio done) and nothing came after the Last-Event-ID: stop reconnecting',
    ),
    ...ERRORS,
    400: refusal('Last-Event-ID is not an id this stream sent (stream.bad_last_event_id)'),
    429: refusal(
      'F2: too many streams open for this key or session, this workspace or this server (stream.too_many, with Retry-After)',
    ),
  },
};

/** A comment line this often keeps proxies and clients from taking a quiet meeting for a dead line. */
const KEEP_ALIVE_MS = 15_000;
/** A stream of a process with no shared poll (no connection string to LISTEN on) looks this often. */
const POLL_ALONE_MS = 1_000;
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
  const hub = api.connectionString ? new StreamHub(api.connectionString, deps.db, api.log) : null;
  const stillAllowed = sharedAuthCheck(api);
  const sharedRead = sharedReads<Awaited<ReturnType<typeof readStream>>>();
  const counts = new StreamCounts(deps.config.requestLimits);
  const usage = reportStreamCounts(api, counts);
  // Open streams end when the server closes: before it waits for its connections to finish (a
  // stream never would), so a shutdown is not held up by a browser tab left open.
  const open = new Set<() => void>();
  app.addHook('preClose', (done) => {
    for (const end of open) end();
    done();
  });
  app.addHook('onClose', async () => {
    await usage.stop();
    await hub?.close();
  });

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
      // F2: streams per key (or session), per workspace and per process; the count is let go in
      // the stream's finally, or below if it never opens.
      const release = counts.take(principal.keyId ?? principal.sessionId ?? '', workspaceId);
      // Shared only by the streams of one credential: what a read may show depends on who reads
      // (a private meeting, a share, a role), and that is fixed by the credential.
      const reader = credentialOf(req, principal);
      const read = (first: boolean) =>
        sharedRead(`${reader}\0${workspaceId}\0${meetingId}\0${cursor}\0${first}`, () =>
          readStream(
            deps.db,
            workspaceId,
            meetingId,
            cursor,
            (trx, m) => meetingViewIn(deps, trx, m),
            (trx) => deps.meetings.get(workspaceId, meetingId, trx),
            first,
          ),
        );
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
      // Followed before the first read, so no change after it is missed.
      const unsubscribe = hub?.subscribe(meetingId, poke) ?? (() => undefined);
      let opening: Awaited<ReturnType<typeof read>>;
      try {
        opening = await read(true);
      } catch (err) {
        unsubscribe();
        release();
        throw err;
      }
      // F3: a client back for a settled meeting with nothing new is told so: 204 ends an
      // EventSource's reconnecting for good.
      if (cursor > 0 && opening.events.every((e) => e.id === null) && settled(opening.events)) {
        unsubscribe();
        release();
        return reply.code(204).send();
      }

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.write(`retry: ${RETRY_MS}\n\n`);

      open.add(end);
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
      let batch = opening;
      try {
        for (;;) {
          for (const e of batch.events) send(frame(e));
          cursor = batch.last;
          if (closed || Date.now() >= endsAt) break;
          // F3: a meeting that is settled (complete or failed, its minutes and late audio done)
          // changes no more: its stream says so and ends.
          if (!batch.more && settled(batch.events)) {
            send(`event: end\ndata: ${JSON.stringify({ id: meetingId, reason: 'settled' })}\n\n`);
            break;
          }
          if (!batch.more && !woken) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(
                resolve,
                Math.min(
                  // The shared poll wakes this stream when its meeting moved; alone, it looks itself.
                  hub ? KEEP_ALIVE_MS : POLL_ALONE_MS,
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
          // With the shared poll a stream reads only when woken: an idle stream costs nothing.
          const look = batch.more || woken || hub === null;
          woken = false;
          if (closed) break;
          // S9/U3: a key or session revoked, expired or demoted while its stream is open stops it
          // within a keep-alive. F3: one check per credential and keep-alive, shared by its streams.
          if (Date.now() - checkedAt >= KEEP_ALIVE_MS) {
            checkedAt = Date.now();
            if (!(await stillAllowed(req, principal))) break;
          }
          batch = look ? await read(false) : { events: [], last: cursor, more: false };
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
        release();
        res.end();
      }
    },
  );
}

/** F7: how often an api process looks whether its streams per workspace changed, and writes them if so. */
const STREAM_COUNTS_CHECK_MS = 5_000;
/** F7: how often it writes them all the same, so that readers know it is alive (well inside STREAM_COUNTS_FRESH_SECONDS). */
const STREAM_COUNTS_REFRESH_MS = 20_000;

/**
 * F7: this process's open streams per workspace, written to the database (stream_counts) for
 * `verbatim status` and the operator page: within a few seconds of a change, refreshed while any
 * are open, removed when the server stops. A process with none open writes nothing. Written on
 * the system path, whatever request last changed the counts.
 */
function reportStreamCounts(api: ApiDeps, counts: StreamCounts): { stop: () => Promise<void> } {
  const processId = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  let written = '';
  let writtenAt = 0;
  let running: Promise<void> | null = null;
  const tick = () => {
    if (running) return;
    const now = counts.perWorkspace();
    const key = JSON.stringify([...now].sort());
    if (key === written && (now.size === 0 || Date.now() - writtenAt < STREAM_COUNTS_REFRESH_MS)) return;
    if (key === '[]' && written === '') return;
    running = asSystem(() => saveStreamCounts(api.deps.db, processId, now))
      .then(
        () => {
          written = key;
          writtenAt = Date.now();
        },
        (err: unknown) =>
          api.log.warn({ err: String(err) }, 'open event streams not recorded; next check retries'),
      )
      .finally(() => (running = null));
  };
  const timer = setInterval(tick, STREAM_COUNTS_CHECK_MS);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
      if (written === '' || written === '[]') return;
      await asSystem(() => forgetStreamCounts(api.deps.db, processId)).catch((err: unknown) =>
        api.log.warn({ err: String(err) }, 'open event streams not cleared; they age out in a minute'),
      );
    },
  };
}

/** F2: the event streams open on this process, by credential, by workspace and in all. */
class StreamCounts {
  private readonly byCredential = new Map<string, number>();
  private readonly byWorkspace = new Map<string, number>();
  private all = 0;

  /** F7: a copy of the open streams per workspace (only workspaces with some open). */
  perWorkspace(): Map<string, number> {
    return new Map(this.byWorkspace);
  }

  constructor(private readonly limits: RequestLimits) {}

  /** Counts one more stream, or throws 429 naming the limit it would pass; returns its release. */
  take(credential: string, workspaceId: string): () => void {
    const refuse = (what: string, limit: number, setting: string) =>
      new AppError(
        ErrorKind.quotaExhausted,
        'stream.too_many',
        `${what} already has ${limit} event streams open here (${setting}); close one, or try again in ${STREAM_RETRY_S} s`,
        { retryAfterSeconds: STREAM_RETRY_S },
      );
    if ((this.byCredential.get(credential) ?? 0) >= this.limits.streamsPerKey)
      throw refuse('this API key or session', this.limits.streamsPerKey, 'VERBATIM_STREAMS_PER_KEY');
    if ((this.byWorkspace.get(workspaceId) ?? 0) >= this.limits.streamsPerWorkspace)
      throw refuse('this workspace', this.limits.streamsPerWorkspace, 'VERBATIM_STREAMS_PER_WORKSPACE');
    if (this.all >= this.limits.streamsPerProcess)
      throw refuse('this server', this.limits.streamsPerProcess, 'VERBATIM_STREAMS_PER_PROCESS');
    const bump = (map: Map<string, number>, key: string, by: number) => {
      const n = (map.get(key) ?? 0) + by;
      if (n > 0) map.set(key, n);
      else map.delete(key);
    };
    bump(this.byCredential, credential, 1);
    bump(this.byWorkspace, workspaceId, 1);
    this.all++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      bump(this.byCredential, credential, -1);
      bump(this.byWorkspace, workspaceId, -1);
      this.all--;
    };
  }
}

/** F2: what a refused stream is told to wait. */
const STREAM_RETRY_S = 5;

/** F3: whether the batch's meeting is settled: it will change no more (a rename aside). */
function settled(events: StreamEvent[]): boolean {
  const view = events.findLast((e) => e.event === 'meeting')?.data as
    | {
        status?: string;
        minutes?: { status?: string };
        lateAudio?: { lateChunks?: number; repairing?: boolean };
        missingChunks?: unknown[];
      }
    | undefined;
  if (!view) return false;
  // A meeting still missing chunks may get them late (L19): its stream stays, for the repair.
  return (
    (view.status === 'complete' || view.status === 'failed') &&
    view.minutes?.status !== 'pending' &&
    (view.missingChunks?.length ?? 0) === 0 &&
    view.lateAudio?.repairing !== true &&
    (view.lateAudio?.lateChunks ?? 0) === 0
  );
}

/**
 * S9/U3/F3: whether a stream's credential still holds, asked at most once per keep-alive for all
 * the streams one credential has open in this process (a browser with ten tabs asks once).
 */
/** The credential a request came with, and what it was resolved to, as one opaque key. */
function credentialOf(req: FastifyRequest, principal: Principal): string {
  return createHash('sha256')
    .update(`${String(req.headers.authorization ?? '')}\0${String(req.headers.cookie ?? '')}`)
    .update(`\0${principal.workspaceId}\0${principal.role}\0${principal.userId ?? ''}`)
    .digest('hex');
}

function sharedAuthCheck(api: ApiDeps): (req: FastifyRequest, principal: Principal) => Promise<boolean> {
  const checks = new Map<string, { at: number; ok: Promise<boolean> }>();
  return (req, principal) => {
    const key = credentialOf(req, principal);
    const now = Date.now();
    const hit = checks.get(key);
    if (hit && now - hit.at < KEEP_ALIVE_MS) return hit.ok;
    for (const [k, v] of checks) if (now - v.at >= KEEP_ALIVE_MS) checks.delete(k);
    // As the request's own authentication ran: on the system path, before any tenant.
    const ok = asSystem(() => stillAuthenticated(api, req, principal));
    checks.set(key, { at: now, ok });
    ok.catch(() => checks.delete(key));
    return ok;
  };
}

/**
 * F3: reads of the same meeting from the same place by the same credential, in flight at once,
 * are one read. The shared poll wakes every stream of a meeting that moved at the same moment,
 * each at the cursor the others have: a meeting followed by a hundred streams (of one key, one
 * person's tabs, a team's shared screen) is read once per change, not a hundred times. Nothing is
 * kept once the read has answered; a read that fails fails for each stream that shared it (each
 * then ends, and its client comes back with its Last-Event-ID).
 */
function sharedReads<T>(): (key: string, read: () => Promise<T>) => Promise<T> {
  const inFlight = new Map<string, Promise<T>>();
  return (key, read) => {
    const running = inFlight.get(key);
    if (running) return running;
    const started = read().finally(() => inFlight.delete(key));
    inFlight.set(key, started);
    return started;
  };
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
