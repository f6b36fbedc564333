import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestLimits } from '../config.ts';
import type { Db } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { takeWorkspaceTokens } from '../workspaces/workspace-budget-store.ts';
import { KeyRateLimiter } from './rate-limit.ts';

/**
 * S7: no request ties up the server. Every route takes a small body (`maxJsonBytes`) unless it
 * says otherwise; a body over its route's limit is refused with 413 and cut off unread; the
 * request line and headers, the body and every silence have deadlines; each API key has a budget
 * of calls. The reasoning behind each number is in docs/security.md, "Request limits".
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A recording or a chunk: the upload timeout instead of the request timeout (S7). */
    upload?: boolean;
    /** B10: the handler reads the body as it arrives, so the idle timeout stays on until it is in. */
    streamedBody?: boolean;
  }
}

/** Route config of the routes that take audio: big bodies, over slow links. */
export const UPLOAD_ROUTE = { upload: true } as const;

/** A recording: an upload route whose handler streams the body to storage (B10). */
export const STREAMED_UPLOAD_ROUTE = { upload: true, streamedBody: true } as const;

interface LimitError {
  status: number;
  kind: ErrorKind;
  code: string;
  message: string;
}

/** The options of `Fastify(...)` that carry the limits. */
export function serverLimitOptions(limits: RequestLimits) {
  return {
    bodyLimit: limits.maxJsonBytes,
    // Node's socket timeout: the longest silence. Suspended while a handler works (see below).
    connectionTimeout: limits.idleTimeoutMs,
    // Node's own deadline for a whole request, the longest one (uploads); shorter per route below.
    requestTimeout: limits.uploadTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.uploadTimeoutMs,
      // Node checks both deadlines on this timer (30 s by default, which would double a short one).
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    clientErrorHandler: clientErrorHandler(limits),
  };
}

/** The hooks that enforce the per-route body deadline, the idle timeout and the cut-off. */
export function registerRequestLimits(app: FastifyInstance, limits: RequestLimits): void {
  // A small body must arrive whole within `requestTimeoutMs` of its headers; an upload has Node's
  // longer deadline. The body passes through a stream the deadline can fail with a 408, so the
  // answer still goes out (failing the request itself would close the socket first).
  app.addHook('preParsing', (req, reply, payload, done) => {
    if (req.routeOptions.config.upload === true || !bodyStillArriving(req)) {
      done(null, payload);
      return;
    }
    const guarded = new PassThrough();
    const timer = setTimeout(() => {
      payload.unpipe(guarded);
      payload.pause();
      guarded.destroy(new BodyTimeoutError(limits.requestTimeoutMs));
    }, limits.requestTimeoutMs);
    const stop = () => clearTimeout(timer);
    guarded.once('close', stop);
    reply.raw.once('close', stop);
    payload.once('error', (err) => guarded.destroy(err));
    payload.pipe(guarded);
    done(null, guarded);
  });

  // The idle timeout is for a peer that stops sending or reading. Once the body is in, the time is
  // ours (a recording stored to S3 may take a while): no socket timeout until the answer is sent.
  app.addHook('preHandler', (req, _reply, done) => {
    const socket = socketOf(req);
    if (socket && req.routeOptions.config.streamedBody === true && bodyStillArriving(req)) {
      // The body is read by the handler: a client that stops sending midway still times out.
      req.raw.once('end', () => socket.setTimeout(0));
    } else {
      socket?.setTimeout(0);
    }
    done();
  });

  app.addHook('onSend', (req, reply, payload, done) => {
    socketOf(req)?.setTimeout(limits.idleTimeoutMs);
    // Answered before the body was in (401 before the body, 413, 404, 429, 408): close the
    // connection instead of letting Node read the rest to keep it alive.
    if (bodyStillArriving(req)) {
      void reply.header('connection', 'close');
      // A caller with a valid key (an upload a little over the limit, say) is read on for longer,
      // so its client sees the 413 naming the limit rather than a reset; a stranger is not.
      lingerThenClose(req.raw, req.workspaceId ? TRUSTED_LINGER : LINGER);
    }
    done(null, payload);
  });
}

/** After an early answer, what is still read (and dropped) so the answer is not lost. */
const LINGER = { ms: 2000, bytes: 1024 * 1024 };
const TRUSTED_LINGER = { ms: 10_000, bytes: 16 * 1024 * 1024 };

/**
 * Closing a socket that still has unread input makes the kernel send a reset, which can destroy
 * the answer before a client that is still sending reads it. So, like nginx's lingering close,
 * the answer is followed by our FIN, and what the client sends on is dropped until it stops, at
 * most `linger.bytes` or `linger.ms`; then the connection is cut. Node calls `destroySoon` once the
 * `Connection: close` answer is written; this replaces it for this one socket.
 */
function lingerThenClose(req: IncomingMessage, linger: { ms: number; bytes: number }): void {
  const socket = req.socket as Socket | null;
  if (typeof socket?.destroySoon !== 'function') return; // inject: no socket
  const readAtAnswer = socket.bytesRead;
  // Read on (and drop) from the answer on, counting: left unread, Node would "dump" the body once
  // the answer is written, reading it all without a 'data' event to count it by, as fast as the
  // client had filled the kernel's buffers while the answer was being decided (megabytes, under
  // load). Away from the body deadline's stream, if any, which nobody reads any more.
  req.unpipe();
  req.on('data', () => {
    if (socket.bytesRead - readAtAnswer > linger.bytes) socket.destroy();
  });
  req.resume();
  socket.destroySoon = () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), linger.ms);
    socket.once('close', () => clearTimeout(timer));
  };
}

/** 413 naming the route's limit, and 408 for a body past its deadline; null for other errors. */
export function requestLimitError(err: unknown, req: FastifyRequest): LimitError | null {
  if (err instanceof BodyTimeoutError) {
    return {
      status: 408,
      kind: ErrorKind.transient,
      code: 'request.timeout',
      message: err.message,
    };
  }
  if ((err as { code?: unknown } | null)?.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    const limit = req.routeOptions.bodyLimit;
    return {
      status: 413,
      kind: ErrorKind.tooLarge,
      code: 'request.too_large',
      message: `the request body is larger than this route's limit of ${formatBytes(limit)}`,
    };
  }
  return null;
}

/** S7: each API key's budgets, one for live chunks and one for every other call. */
export class ApiRateLimits {
  private readonly calls: KeyRateLimiter;
  private readonly chunks: KeyRateLimiter;

  constructor(private readonly limits: RequestLimits) {
    this.calls = new KeyRateLimiter(limits.rateLimitRequests, limits.rateWindowMs);
    this.chunks = new KeyRateLimiter(limits.rateLimitChunks, limits.rateWindowMs);
  }

  /** Counts one call of an authenticated key; throws 429 (with Retry-After) when over budget. */
  check(apiKey: string, req: FastifyRequest): void {
    // Chunks are counted apart: a recording must never wait behind its own tab's polling.
    const chunk = isChunk(req);
    const limiter = chunk ? this.chunks : this.calls;
    // Keyed by a digest, so no key is kept in memory past its request.
    const retryAfter = limiter.take(createHash('sha256').update(apiKey).digest('base64url'));
    if (retryAfter === null) return;
    const limit = chunk ? this.limits.rateLimitChunks : this.limits.rateLimitRequests;
    throw new AppError(
      ErrorKind.quotaExhausted,
      'request.rate_limited',
      `this API key made more than ${limit} ${chunk ? 'chunk uploads' : 'calls'} in ${seconds(this.limits.rateWindowMs)}; try again in ${retryAfter} s`,
      { retryAfterSeconds: retryAfter },
    );
  }
}

/**
 * F2: each workspace's budget of calls a window, all its keys, people and api processes together.
 * The budget is a token bucket in Postgres (takeWorkspaceTokens); a process takes tokens in small
 * blocks and spends them locally for a few seconds, so most calls cost no round trip and the limit
 * holds across processes to within a block each. Live chunks are not counted: a recording is held
 * to its key's chunk budget only.
 */
export class WorkspaceRateLimits {
  private readonly held = new Map<string, { tokens: number; until: number }>();
  /**
   * One refill at a time per workspace: calls that find no token wait for it and share what it
   * brings. Without this a burst of concurrent calls each took a block from the budget and each
   * overwrote the last one's, spending the budget 25 times over (1,000 event streams opened at
   * once, well inside 6,000 calls a minute, got 429 for more than half).
   */
  private readonly refilling = new Map<string, Promise<{ granted: number; retryAfterSeconds: number }>>();
  private readonly block: number;

  constructor(
    private readonly db: Db,
    private readonly limits: RequestLimits,
  ) {
    this.block = Math.max(1, Math.min(25, Math.floor(limits.workspaceRateLimitRequests / 100)));
  }

  /** Counts one call of the workspace; throws 429 (with Retry-After) when over its budget. */
  async check(workspaceId: string, req: FastifyRequest): Promise<void> {
    const limit = this.limits.workspaceRateLimitRequests;
    if (limit === 0 || isChunk(req)) return;
    for (;;) {
      const local = this.held.get(workspaceId);
      if (local && local.tokens >= 1 && Date.now() < local.until) {
        local.tokens -= 1;
        return;
      }
      let refill = this.refilling.get(workspaceId);
      if (!refill) {
        refill = this.refill(workspaceId, limit).finally(() => this.refilling.delete(workspaceId));
        this.refilling.set(workspaceId, refill);
      }
      const { granted, retryAfterSeconds } = await refill;
      // Granted: the tokens are in the pool, taken at the top (by this call or one beside it).
      if (granted > 0) continue;
      throw this.refused(limit, retryAfterSeconds);
    }
  }

  /** Takes a block from the workspace's budget and adds it to what this process holds. */
  private async refill(
    workspaceId: string,
    limit: number,
  ): Promise<{ granted: number; retryAfterSeconds: number }> {
    const now = Date.now();
    if (this.held.size > 10_000) for (const [k, v] of this.held) if (v.until <= now) this.held.delete(k);
    const taken = await takeWorkspaceTokens(
      this.db,
      workspaceId,
      'requests',
      limit,
      this.limits.rateWindowMs,
      this.block,
    );
    if (taken.granted > 0) {
      const local = this.held.get(workspaceId);
      const left = local && Date.now() < local.until ? local.tokens : 0;
      this.held.set(workspaceId, { tokens: left + taken.granted, until: Date.now() + HELD_TOKENS_MS });
    }
    return taken;
  }

  private refused(limit: number, retryAfterSeconds: number): AppError {
    return new AppError(
      ErrorKind.quotaExhausted,
      'request.workspace_rate_limited',
      `this workspace made more than ${limit} calls in ${seconds(this.limits.rateWindowMs)} (all its keys and people together, VERBATIM_WORKSPACE_RATE_LIMIT_REQUESTS); try again in ${retryAfterSeconds} s`,
      { retryAfterSeconds },
    );
  }
}

/** F2: tokens a process took from a workspace's budget are spent within this, or given up. */
const HELD_TOKENS_MS = 5_000;

function isChunk(req: FastifyRequest): boolean {
  return req.method === 'PUT' && req.routeOptions.url === '/v1/meetings/:id/chunks/:seq';
}

class BodyTimeoutError extends Error {
  readonly statusCode = 408;
  constructor(ms: number) {
    super(`the request body did not arrive within ${seconds(ms)} of its headers`);
  }
}

/** A body is announced and not all of it has been received. False for inject (no socket). */
function bodyStillArriving(req: FastifyRequest): boolean {
  const announced =
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  return announced && (req.raw as { complete?: boolean }).complete === false;
}

function socketOf(req: FastifyRequest): Socket | null {
  const socket = req.raw.socket as Socket | undefined;
  return typeof socket?.setTimeout === 'function' ? socket : null;
}

/**
 * Node's own refusals before a request reaches Fastify: the headers or the whole request too slow
 * (408), headers too large (431), anything unparsable (400). In our error shape, then closed.
 */
function clientErrorHandler(limits: RequestLimits) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, reason, code, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [
            408,
            'Request Timeout',
            'request.timeout',
            `the request did not arrive in time: headers within ${seconds(limits.headersTimeoutMs)}, the whole request within ${seconds(limits.uploadTimeoutMs)}`,
          ]
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request Header Fields Too Large', 'request.headers_too_large', 'the headers are too large']
          : [400, 'Bad Request', 'request.malformed', 'the request is not valid HTTP'];
    const kind = status === 408 ? ErrorKind.transient : ErrorKind.invalidInput;
    const body = JSON.stringify({ error: { kind, code, message } });
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}

export function formatBytes(n: number): string {
  const unit = n % 1048576 === 0 ? `${n / 1048576} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : null;
  return unit ? `${unit} (${n} bytes)` : `${n} bytes`;
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}
