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
    if (isDatabaseConnectionLoss(err)) return rideOut(err, 'a connection nobody listened to');
    log.fatal({ err: err.stack }, 'uncaught exception; exiting');
    process.exit(1);
  });
}
