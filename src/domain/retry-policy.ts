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
    case ErrorKind.forbidden:
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

/**
 * How many times a job waits out an outside outage (the database, or a provider) before such
 * errors spend its retries: with `outageBackoffMs`, about half an hour at the default step.
 * Counted apart from its other waits (`outage_waits`): a close-out that polled for its windows
 * many times has met no outage.
 */
export const OUTAGE_WAITS = 30;

/** The wait before the next try after an outside outage: doubling from one step, at most a minute. */
export function outageBackoffMs(stepMs: number, outageWaits: number): number {
  return Math.min(stepMs * 2 ** Math.min(outageWaits, 5), 60_000);
}

/**
 * What a kind of job does with a failed attempt, beyond its error budget (which each job row
 * carries): the error codes that are outside outages, waited out without spending retries up to
 * `outageWaits` (L7); codes waited out however many times it takes while the job is younger than
 * a patience (R7); and whether a spent budget isolates the job instead of failing it (J20).
 * Declared per kind in the job catalog (src/jobs/catalog.ts).
 */
export interface FailurePolicy {
  outageCodes: ReadonlySet<string>;
  outageWaits: number;
  patience: { codes: ReadonlySet<string>; ms: number } | null;
  isolateOnErrors: boolean;
}

/** Where the failed attempt's job stands, from its row; `errorCount` does not count this failure. */
export interface AttemptState {
  errorCount: number;
  maxErrors: number;
  outageWaits: number;
  isolated: boolean;
  isolatedRuns: number;
  ageMs: number;
}

export interface FailureBackoff {
  retryStepMs: number;
  /** The isolated lane's wait before run `runs + 1` (src/jobs/job-rows.ts). */
  isolationDelayMs(runs: number): number;
}

/**
 * The verdict on one failed attempt. `wait-out`: an outside outage, waited out with no retry
 * spent; `isolate`: the budget is spent on errors that may pass, and the job moves to the
 * isolated lane (J20); `retry`: one retry spent (`errorCount` includes it); `fail`: the job fails.
 * Every delay honours the provider's Retry-After.
 */
export type AttemptVerdict =
  | { type: 'wait-out'; delayMs: number }
  | { type: 'isolate'; delayMs: number; errorCount: number }
  | { type: 'retry'; delayMs: number; errorCount: number }
  | { type: 'fail'; error: ErrorRecord; errorCount: number };

/** J6, L7, R7, J20: one failed attempt's verdict, from the error, the job's state and its kind's policy. */
export function decideAttemptFailure(
  error: ErrorRecord,
  state: AttemptState,
  policy: FailurePolicy,
  backoff: FailureBackoff,
  retryAfterSeconds?: number,
): AttemptVerdict {
  const askedMs = (retryAfterSeconds ?? 0) * 1000;
  const outage = policy.outageCodes.has(error.code) && state.outageWaits < policy.outageWaits;
  const patient =
    policy.patience !== null &&
    error.kind === ErrorKind.transient &&
    policy.patience.codes.has(error.code) &&
    state.ageMs < policy.patience.ms;
  if (outage || patient)
    return {
      type: 'wait-out',
      delayMs: Math.max(askedMs, outageBackoffMs(backoff.retryStepMs, state.outageWaits)),
    };
  const errorCount = state.errorCount + 1;
  const decision = decideFailure(error, errorCount, state.maxErrors, backoff.retryStepMs, retryAfterSeconds);
  // J20: a job whose budget ran out on errors that may pass is not given up where its kind says
  // so (a window's words would be lost): it goes to the isolated lane, or, already there, keeps
  // trying on its slow backoff.
  const keepTrying = decision.type === 'fail' && mayPass(error) && policy.isolateOnErrors;
  if (keepTrying && !state.isolated)
    return { type: 'isolate', delayMs: Math.max(backoff.isolationDelayMs(1), askedMs), errorCount };
  if (decision.type === 'retry' || keepTrying) {
    // An isolated job waits at least its slow backoff between runs.
    const delayMs = Math.max(
      decision.type === 'retry' ? decision.delayMs : 0,
      state.isolated ? backoff.isolationDelayMs(state.isolatedRuns) : 0,
      askedMs,
    );
    return { type: 'retry', delayMs, errorCount };
  }
  return {
    type: 'fail',
    error: { kind: error.kind, code: decision.code, message: decision.message },
    errorCount,
  };
}
