/**
 * The error is a database connection (or the server) going away: a restart, a terminated backend,
 * a refused or reset socket. Such errors are transient; everything else is not.
 */
export function isDatabaseConnectionLoss(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error)) return false;
  // A wrapped error (a failed migration, a start-up step) is judged by what it wraps.
  if (depth < 5 && err.cause !== undefined && isDatabaseConnectionLoss(err.cause, depth + 1)) return true;
  const code = (err as { code?: unknown }).code;
  // 08: connection exceptions; 57P: shutdown, crash, cannot connect now; 53: too many clients,
  // out of resources.
  if (typeof code === 'string' && /^(08|57P|53)/.test(code)) return true;
  if (
    typeof code === 'string' &&
    ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN'].includes(code)
  )
    return true;
  // "has been discarded": Kysely's refusal to reuse a connection whose backend went away.
  return /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|no live database connection|connection has been discarded/i.test(
    err.message,
  );
}
