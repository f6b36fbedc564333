import { isDatabaseConnectionLoss } from '../db/connect.ts';
import type { Logger } from '../log.ts';

/**
 * J11: a fatal error exits non-zero so a supervisor restarts the process. A lost database
 * connection is not one (V8): the process rides it out, whether it surfaces as a rejection no one
 * awaited (graphile-worker failing a job batch during a restart) or as an 'error' event of a pg
 * connection nobody listens to (a library's pool closing while its backend is terminated: the
 * simulation saw an api process exit this way during start-up). The connection is gone either
 * way, and pg takes it out of its pool.
 */
export function installProcessGuards(log: Logger): void {
  const rideOut = (err: unknown, where: string) => {
    log.warn(
      { err: err instanceof Error ? err.message : String(err) },
      `${where} lost its database connection; continuing`,
    );
  };
  process.on('unhandledRejection', (reason) => {
    if (isDatabaseConnectionLoss(reason)) return rideOut(reason, 'a background task');
    log.fatal(
      { err: reason instanceof Error ? reason.stack : String(reason) },
      'unhandled rejection; exiting',
    );
    process.exit(1);
  });
  process.on('uncaughtException', (err) => {
    if (isPgConnectionLoss(err)) return rideOut(err, 'a connection nobody listened to');
    log.fatal({ err: err.stack }, 'uncaught exception; exiting');
    process.exit(1);
  });
}

/**
 * Narrower than isDatabaseConnectionLoss (which also takes socket errors of any kind, and "out of
 * resources"): only what a pg connection says when its server or backend went away. Any other
 * uncaught error (a provider's socket, a stream) still ends the process.
 */
function isPgConnectionLoss(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^(08|57P)/.test(code)) return true;
  return code === undefined && /^Connection terminated/.test(err.message);
}
