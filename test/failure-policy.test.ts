// One failure decision per attempt (issue 34): the verdicts of `decideAttemptFailure` for each
// kind's policy as the job catalog declares it, without a database.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { ErrorKind, type ErrorRecord } from '../src/domain/errors.ts';
import { decideAttemptFailure, OUTAGE_WAITS, type AttemptState } from '../src/domain/retry-policy.ts';
import { JobKind } from '../src/domain/status.ts';
import { failurePolicyOf, JOB_CATALOG } from '../src/jobs/catalog.ts';

const config = loadConfig({});
const backoff = { retryStepMs: 1000, isolationDelayMs: (runs: number) => (runs <= 0 ? 0 : 60_000 * runs) };
const fresh: AttemptState = {
  errorCount: 0,
  maxErrors: 5,
  outageWaits: 0,
  isolated: false,
  isolatedRuns: 0,
  ageMs: 1000,
};
const err = (kind: ErrorKind, code: string): ErrorRecord => ({ kind, code, message: code });
const verdict = (kind: JobKind, error: ErrorRecord, state: Partial<AttemptState> = {}, retryAfter?: number) =>
  decideAttemptFailure(error, { ...fresh, ...state }, failurePolicyOf(config, kind), backoff, retryAfter);

void it('L7: an outside outage is waited out with no retry spent, for its kind’s outage waits; then it spends retries', () => {
  const overloaded = err(ErrorKind.transient, 'asr.overloaded');
  for (const kind of Object.values(JobKind)) {
    assert.equal(verdict(kind, overloaded).type, 'wait-out', kind);
    assert.equal(verdict(kind, err(ErrorKind.transient, 'db.connection_lost')).type, 'wait-out', kind);
  }
  const spent = verdict(JobKind.writeMinutes, overloaded, { outageWaits: OUTAGE_WAITS });
  assert.deepEqual(spent, { type: 'retry', delayMs: 1000, errorCount: 1 });
});

void it('J6/V6: every delay honours the provider’s Retry-After; a retry spends one unit of the budget', () => {
  assert.deepEqual(verdict(JobKind.transcribeWindow, err(ErrorKind.transient, 'asr.rate_limited'), {}, 30), {
    type: 'wait-out',
    delayMs: 30_000,
  });
  assert.deepEqual(
    verdict(JobKind.writeMinutes, err(ErrorKind.transient, 'llm.overloaded'), { errorCount: 1 }, 7),
    { type: 'retry', delayMs: 7000, errorCount: 2 },
  );
  const failed = verdict(JobKind.writeMinutes, err(ErrorKind.transient, 'llm.overloaded'), { errorCount: 4 });
  assert.equal(failed.type, 'fail');
  assert.equal(failed.type === 'fail' && failed.errorCount, 5);
  assert.equal(verdict(JobKind.writeMinutes, err(ErrorKind.permanent, 'llm.bad_request')).type, 'fail');
});

void it('J20: the kinds that hold words are isolated when their budget is spent on errors that may pass, and keep trying there; the others fail', () => {
  const holding = (Object.keys(JOB_CATALOG) as JobKind[]).filter(
    (k) => failurePolicyOf(config, k).isolateOnErrors,
  );
  assert.deepEqual(holding.sort(), [JobKind.repairTimeline, JobKind.transcribeWindow].sort());
  const flaky = err(ErrorKind.unclassified, 'internal.error');
  assert.deepEqual(verdict(JobKind.transcribeWindow, flaky, { errorCount: 4 }), {
    type: 'isolate',
    delayMs: 60_000,
    errorCount: 5,
  });
  assert.deepEqual(
    verdict(JobKind.transcribeWindow, flaky, { errorCount: 9, isolated: true, isolatedRuns: 3 }),
    { type: 'retry', delayMs: 180_000, errorCount: 10 },
  );
  assert.equal(verdict(JobKind.closeOutMeeting, flaky, { errorCount: 4 }).type, 'fail');
  // An error that can never pass fails a window too: there is nothing to wait for.
  assert.equal(
    verdict(JobKind.transcribeWindow, err(ErrorKind.permanent, 'asr.unsupported_audio')).type,
    'fail',
  );
});

void it('R7: a bot recording’s import waits out the provider’s outage for its patience since it was asked for, however many waits', () => {
  const gone = err(ErrorKind.transient, 'bot.recording_unavailable');
  const patience = config.bots.importPatienceMs;
  assert.equal(
    verdict(JobKind.importBotRecording, gone, { outageWaits: 500, ageMs: patience - 1 }).type,
    'wait-out',
  );
  assert.equal(verdict(JobKind.importBotRecording, gone, { ageMs: patience + 1 }).type, 'retry');
  // Only the import has that patience.
  assert.equal(verdict(JobKind.scheduleBot, gone).type, 'retry');
});
