import { AppError, ErrorKind, networkErrorCode, redactSecrets } from '../domain/errors.ts';

export type ProviderService = 'asr' | 'llm';

export interface ClassifyOptions {
  /** Exact strings (API keys) scrubbed from messages in addition to `redactSecrets`. */
  secrets?: readonly (string | null | undefined)[];
}

const SERVICE_LABEL: Record<ProviderService, string> = {
  asr: 'speech-to-text provider',
  llm: 'language model provider',
};

const QUOTA_WORDS = /insufficient_quota|quota|billing|credit/i;

/** Classifies a non-2xx provider response (J6/L8/L9). Quota/billing exhaustion is checked first. */
export function classifyHttpFailure(
  service: ProviderService,
  status: number,
  bodyText: string,
  retryAfterHeader: string | null,
  opts: ClassifyOptions = {},
): AppError {
  const snippet = providerMessage(bodyText, opts);
  const message = `${SERVICE_LABEL[service]} returned HTTP ${status}${snippet ? `: ${snippet}` : ''}`;
  const retryAfterSeconds = parseRetryAfter(retryAfterHeader);
  const retry = retryAfterSeconds === undefined ? {} : { retryAfterSeconds };

  if (status === 402 || ((status === 429 || status === 403) && QUOTA_WORDS.test(bodyText))) {
    return new AppError(ErrorKind.quotaExhausted, `${service}.quota_exhausted`, message);
  }
  if (status === 429) return new AppError(ErrorKind.transient, `${service}.rate_limited`, message, retry);
  if (status === 408) return new AppError(ErrorKind.transient, `${service}.timeout`, message, retry);
  if (status === 503 || status === 529) {
    return new AppError(ErrorKind.transient, `${service}.overloaded`, message, retry);
  }
  if (status >= 500) return new AppError(ErrorKind.transient, `${service}.server_error`, message, retry);
  if (status === 401 || status === 403) {
    return new AppError(ErrorKind.permanent, `${service}.unauthorized`, message);
  }
  if (status >= 400) return new AppError(ErrorKind.permanent, `${service}.bad_request`, message);
  return new AppError(ErrorKind.permanent, `${service}.unexpected_status`, message);
}

/**
 * Classifies an error thrown by fetch or while reading the body. Callers must rethrow their own
 * signal's abort untouched before calling this (see `providerFetch`).
 */
export function classifyFetchError(
  service: ProviderService,
  err: unknown,
  opts: ClassifyOptions = {},
): AppError {
  if (err instanceof AppError) return err;
  const label = SERVICE_LABEL[service];
  const name = (err as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError') {
    return new AppError(ErrorKind.transient, `${service}.timeout`, `${label} did not answer in time`, {
      cause: err,
    });
  }
  const net = networkErrorCode(err);
  if (net === 'ETIMEDOUT' || net === 'UND_ERR_HEADERS_TIMEOUT' || net === 'UND_ERR_BODY_TIMEOUT') {
    return new AppError(
      ErrorKind.transient,
      `${service}.timeout`,
      `${label} did not answer in time (${net})`,
      {
        cause: err,
      },
    );
  }
  if (net) {
    return new AppError(ErrorKind.transient, `${service}.unreachable`, `${label} is unreachable (${net})`, {
      cause: err,
    });
  }
  const text = scrub(errorText(err), opts).slice(0, 200);
  if (/invalid url|failed to parse url|ERR_INVALID_URL/i.test(text)) {
    return new AppError(ErrorKind.permanent, `${service}.bad_config`, `${label} URL is invalid`, {
      cause: err,
    });
  }
  // Unknown transport failures are retried: treating an outage as permanent would lose work.
  return new AppError(ErrorKind.transient, `${service}.unreachable`, `${label} request failed: ${text}`, {
    cause: err,
  });
}

/** Parses `Retry-After` as delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value));
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

export interface ProviderFetchRequest {
  service: ProviderService;
  url: string;
  method?: 'POST' | 'GET';
  headers?: Record<string, string>;
  body?: string | FormData;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  apiKey?: string | null | undefined;
  /** The adapter's Retry-After holds (V6); without them every request is sent. */
  holds?: RetryAfterHolds | undefined;
}

/**
 * Sends a request with a deadline and returns the body text of a 2xx response. Everything else
 * becomes a classified `AppError`, except an abort by the caller's own signal, which is rethrown.
 */
export async function providerFetch(req: ProviderFetchRequest): Promise<string> {
  const { service, signal } = req;
  signal?.throwIfAborted();
  const endpoint = holdEndpointOf(req.url);
  if (req.holds) await holdOffIfAsked(req.holds, service, endpoint);
  signal?.throwIfAborted();
  const headers: Record<string, string> = { ...req.headers };
  if (req.apiKey) headers.Authorization = `Bearer ${req.apiKey}`;
  const deadline = AbortSignal.timeout(req.timeoutMs);
  const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
  const opts: ClassifyOptions = { secrets: [req.apiKey] };
  try {
    const init: RequestInit = { method: req.method ?? 'POST', headers, signal: combined };
    if (req.body !== undefined) init.body = req.body;
    const response = await fetch(req.url, init);
    const text = await response.text();
    if (!response.ok) {
      const failure = classifyHttpFailure(
        service,
        response.status,
        text,
        response.headers.get('retry-after'),
        opts,
      );
      if (failure.retryAfterSeconds !== undefined)
        await req.holds?.askedToWait(endpoint, failure.retryAfterSeconds);
      throw failure;
    }
    return text;
  } catch (err) {
    if (signal?.aborted) throw err;
    throw classifyFetchError(service, err, opts);
  }
}

/**
 * V6: a provider's Retry-After holds every request sent to that endpoint, not only the one it
 * answered: two jobs of one meeting (minutes for two revisions of the same text) sent the same
 * request 30 ms apart, the second one inside the Retry-After the first had been given. A held
 * request is not sent; it fails at once as rate-limited, with the time still to wait. The app
 * shares the holds between its processes through the database (provider-hold-store.ts): a window
 * retried on another worker must wait as long as the one that heard the 429.
 */
export interface RetryAfterHolds {
  /** How long (ms) requests to `endpoint` are still held; 0 when they may go. */
  heldForMs(endpoint: string): Promise<number>;
  askedToWait(endpoint: string, seconds: number): Promise<void>;
}

/** The endpoint a hold is kept for: origin and path, never credentials or a query. */
export function holdEndpointOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** Holds kept in this process only (an adapter made without the app's shared ones). */
export class ProviderHolds implements RetryAfterHolds {
  private readonly until = new Map<string, number>();

  askedToWait(endpoint: string, seconds: number): Promise<void> {
    if (seconds > 0)
      this.until.set(endpoint, Math.max(this.until.get(endpoint) ?? 0, Date.now() + seconds * 1000));
    return Promise.resolve();
  }

  heldForMs(endpoint: string): Promise<number> {
    const until = this.until.get(endpoint);
    if (until === undefined) return Promise.resolve(0);
    const leftMs = until - Date.now();
    if (leftMs <= 0) this.until.delete(endpoint);
    return Promise.resolve(Math.max(0, leftMs));
  }
}

async function holdOffIfAsked(holds: RetryAfterHolds, service: ProviderService, endpoint: string) {
  const leftMs = await holds.heldForMs(endpoint);
  if (leftMs <= 0) return;
  throw new AppError(
    ErrorKind.transient,
    `${service}.rate_limited`,
    'the provider asked us to wait before sending again; not sent',
    { retryAfterSeconds: Math.ceil(leftMs / 1000) },
  );
}

/** Joins a base URL and an API path, tolerating a trailing slash or `/v1` on the base. */
export function providerUrl(baseUrl: string, path: `/v1/${string}`): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '') + path;
}

function providerMessage(bodyText: string, opts: ClassifyOptions): string {
  let message = bodyText;
  try {
    const parsed = JSON.parse(bodyText) as unknown;
    message = extractMessage(parsed) ?? bodyText;
  } catch {
    // not JSON: use the text itself
  }
  return scrub(message.replace(/\s+/g, ' ').trim(), opts).slice(0, 200);
}

function extractMessage(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  for (const key of ['error', 'message', 'detail']) {
    const found = extractMessage(record[key]);
    if (found !== undefined) return found;
  }
  return undefined;
}

function scrub(text: string, opts: ClassifyOptions): string {
  let out = text;
  for (const secret of opts.secrets ?? []) {
    if (secret) out = out.split(secret).join('[redacted]');
  }
  return redactSecrets(out);
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
