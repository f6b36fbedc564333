import { assertNever, ErrorKind, type ErrorRecord } from './errors.ts';

const ONE_HOUR_MS = 60 * 60 * 1000;

/** Retries wait 1×, 2×, 3×… the step (15/30/45 s by default, L7 and L14), capped at one hour. */
export function linearBackoffMs(stepMs: number, failuresSoFar: number): number {
  return Math.min(stepMs * Math.max(1, failuresSoFar), ONE_HOUR_MS);
}

/** Exponential backoff capped at one hour, for deliveries and deletes that never give up (B5, O1). */
export function exponentialBackoffMs(baseMs: number, attempt: number, capMs = ONE_HOUR_MS): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), capMs);
}

/** Errors that may pass on another try: they spend a job's error budget rather than failing it at once (J6). */
export function mayPass(error: ErrorRecord): boolean {
  return (
    error.kind === ErrorKind.transient ||
    error.kind === ErrorKind.unclassified ||
    error.kind === ErrorKind.quotaExhausted
  );
}

export type FailureDecision =
  { type: 'retry'; delayMs: number } | { type: 'fail'; code: string; message: string };

/**
 * J6: what one failed attempt means for its job. Transient and unclassified errors spend one unit of
 * the error budget and retry with backoff; bad input and other permanent errors fail at once; quota
 * exhaustion, where a job has no path of its own for it, is treated as a failure that may clear and
 * spends the budget too. `errorCount` includes this failure.
 */
export function decideFailure(
  error: ErrorRecord,
  errorCount: number,
  maxErrors: number,
  stepMs: number,
  retryAfterSeconds?: number,
): FailureDecision {
  switch (error.kind) {
    case ErrorKind.transient:
    case ErrorKind.unclassified:
    case ErrorKind.quotaExhausted: {
      if (errorCount >= maxErrors) {
        return {
          type: 'fail',
          code: error.code,
          message: `gave up after ${errorCount} failures: ${error.message}`,
        };
      }
      const backoff = linearBackoffMs(stepMs, errorCount);
      const asked = retryAfterSeconds !== undefined ? retryAfterSeconds * 1000 : 0;
      return { type: 'retry', delayMs: Math.min(Math.max(backoff, asked), ONE_HOUR_MS) };
    }
    case ErrorKind.invalidInput:
    case ErrorKind.unauthorized:
    case ErrorKind.notFound:
    case ErrorKind.conflict:
    case ErrorKind.gone:
    case ErrorKind.tooLarge:
    case ErrorKind.unsupportedMedia:
    case ErrorKind.permanent:
      return { type: 'fail', code: error.code, message: error.message };
    default:
      return assertNever(error.kind, 'error kind');
  }
}
