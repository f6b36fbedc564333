/**
 * A small closed set of error kinds that say what the caller should do, and an open set of dotted
 * codes that say what happened (`asr.timeout`, `llm.quota_exhausted`). Vendor and driver errors are
 * classified where they are caught; everything persisted is `{kind, code, message}`.
 */
export const ErrorKind = {
  invalidInput: 'invalid_input',
  unauthorized: 'unauthorized',
  /** Known, but this role or key may not do it (U1/U6, HTTP 403). */
  forbidden: 'forbidden',
  notFound: 'not_found',
  conflict: 'conflict',
  /** The thing existed but can no longer be changed this way (HTTP 410). */
  gone: 'gone',
  tooLarge: 'too_large',
  unsupportedMedia: 'unsupported_media',
  transient: 'transient',
  quotaExhausted: 'quota_exhausted',
  permanent: 'permanent',
  unclassified: 'unclassified',
} as const;
export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind];

export interface ErrorRecord {
  kind: ErrorKind;
  code: string;
  message: string;
}

export class AppError extends Error {
  readonly kind: ErrorKind;
  readonly code: string;
  /** Seconds a provider asked us to wait (Retry-After), when it said. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    kind: ErrorKind,
    code: string,
    message: string,
    opts?: { cause?: unknown; retryAfterSeconds?: number },
  ) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.kind = kind;
    this.code = code;
    this.retryAfterSeconds = opts?.retryAfterSeconds;
  }

  toRecord(): ErrorRecord {
    return { kind: this.kind, code: this.code, message: redactSecrets(this.message) };
  }
}

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}

/** Strips anything that looks like a credential from text that may be persisted or logged. */
export function redactSecrets(text: string): string {
  return text
    .replace(/(bearer\s+)[A-Za-z0-9._~+/=-]+/gi, '$1[redacted]')
    .replace(/(authorization["']?\s*[:=]\s*["']?(?:token|basic)\s+)[A-Za-z0-9._~+/=-]+/gi, '$1[redacted]')
    .replace(/\b(vbt|sk|pk|rk)[-_][A-Za-z0-9_-]{8,}/g, '[redacted]')
    .replace(
      // An Authorization header's scheme ("Bearer", "Token") is not the secret: the rule above
      // redacts what follows it.
      /((?:api[_-]?key|token|secret|password|authorization)["']?\s*[:=]\s*["']?)(?!(?:bearer|token|basic)\s)[^\s"',&]+/gi,
      '$1[redacted]',
    )
    .slice(0, 500);
}

const TRANSIENT_NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/** Node network error codes, including the ones wrapped by fetch in `cause`. */
export function networkErrorCode(err: unknown): string | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 4 && current; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSIENT_NET_CODES.has(code)) return code;
    if ((current as { name?: unknown }).name === 'TimeoutError') return 'ETIMEDOUT';
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** node-postgres reports a connection cut mid-query without a SQLSTATE. */
function isConnectionLoss(err: unknown): boolean {
  const message = err instanceof Error ? err.message : '';
  return /^Connection terminated|Client has encountered a connection error|Connection terminated unexpectedly/.test(
    message,
  );
}

function postgresErrorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * Failures that say nothing about the job: lost connections (08), deadlocks and serialization
 * failures (40), exhausted resources (53), an administrator's shutdown (57P), lock timeouts (55P03)
 * and statement timeouts (57014). Retrying is the right answer to each.
 */
function isTransientPostgresCode(code: string): boolean {
  return /^(08|40|53|57P)/.test(code) || code === '55P03' || code === '57014';
}

/**
 * Turns any thrown value into a record. An error that is not one of ours is a bug or an
 * unrecognised failure: it spends a retry like any error but is never treated as an outside outage.
 */
export function toErrorRecord(err: unknown, codePrefix = 'internal'): ErrorRecord {
  if (err instanceof AppError) return err.toRecord();
  const net = networkErrorCode(err);
  if (net) {
    return { kind: ErrorKind.transient, code: `${codePrefix}.network`, message: redactSecrets(`${net}`) };
  }
  if (isConnectionLoss(err)) {
    return { kind: ErrorKind.transient, code: 'db.connection_lost', message: 'database connection lost' };
  }
  const pgCode = postgresErrorCode(err);
  if (pgCode && isTransientPostgresCode(pgCode)) {
    return { kind: ErrorKind.transient, code: 'db.transient', message: redactSecrets(`postgres ${pgCode}`) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { kind: ErrorKind.unclassified, code: `${codePrefix}.error`, message: redactSecrets(message) };
}

/** HTTP status for an error kind, used by the API's one error handler. */
export function httpStatusFor(kind: ErrorKind): number {
  switch (kind) {
    case ErrorKind.invalidInput:
      return 400;
    case ErrorKind.unauthorized:
      return 401;
    case ErrorKind.forbidden:
      return 403;
    case ErrorKind.notFound:
      return 404;
    case ErrorKind.conflict:
      return 409;
    case ErrorKind.gone:
      return 410;
    case ErrorKind.tooLarge:
      return 413;
    case ErrorKind.unsupportedMedia:
      return 415;
    case ErrorKind.quotaExhausted:
      return 429;
    case ErrorKind.transient:
      return 503;
    case ErrorKind.permanent:
    case ErrorKind.unclassified:
      return 500;
    default:
      return assertNever(kind, 'error kind');
  }
}
