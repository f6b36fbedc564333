import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { ErrorKind } from '../src/domain/errors.ts';
import { decideFailure } from '../src/domain/retry-policy.ts';

void it('L14: with the shipped settings, a window’s transcription retries after 15, 30, 45 and 60 s and gives up at its fifth failure, having waited under 5 minutes', () => {
  const config = loadConfig({});
  const transient = { kind: ErrorKind.transient, code: 'asr.unavailable', message: 'down' };
  const delays: number[] = [];
  let failures = 1;
  for (;;) {
    const d = decideFailure(transient, failures, config.transcribeMaxErrors, config.retryStepMs);
    if (d.type === 'fail') break;
    delays.push(d.delayMs);
    failures++;
  }
  assert.deepEqual(delays, [15_000, 30_000, 45_000, 60_000]);
  assert.equal(failures, 5, 'the fifth failure gives the window up');
  const waited = delays.reduce((a, b) => a + b, 0);
  assert.ok(waited < 5 * 60_000, `waited ${waited} ms in all`);
});

void it('L15: window interval, close-out grace, transcription and minutes wait caps and retry budgets are installation settings, and a bad value is refused naming its variable', () => {
  const shipped = loadConfig({});
  const set = loadConfig({
    VERBATIM_WINDOW_SECONDS: '30',
    VERBATIM_CLOSEOUT_GRACE_SECONDS: '7',
    VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '900',
    VERBATIM_MINUTES_WAIT_CAP_SECONDS: '1200',
    VERBATIM_TRANSCRIBE_MAX_ERRORS: '8',
    VERBATIM_CLOSEOUT_MAX_ERRORS: '4',
    VERBATIM_MAX_RECLAIMS: '6',
    VERBATIM_RETRY_STEP_SECONDS: '20',
  });
  const pick = (c: typeof shipped) => [
    c.windowMs,
    c.closeoutGraceMs,
    c.closeoutWaitCapMs,
    c.minutesWaitCapMs,
    c.transcribeMaxErrors,
    c.closeoutMaxErrors,
    c.maxReclaims,
    c.retryStepMs,
  ];
  assert.deepEqual(pick(set), [30_000, 7_000, 900_000, 1_200_000, 8, 4, 6, 20_000]);
  // Every one of them differs from what ships, so each value above came from its variable.
  pick(shipped).forEach((v, i) =>
    assert.notEqual(v, pick(set)[i], `setting ${i} is read from the environment`),
  );
  for (const name of [
    'VERBATIM_WINDOW_SECONDS',
    'VERBATIM_TRANSCRIBE_MAX_ERRORS',
    'VERBATIM_RETRY_STEP_SECONDS',
  ]) {
    assert.throws(
      () => loadConfig({ [name]: 'soon' }),
      (err: unknown) => err instanceof ConfigError && err.message.includes(name),
      name,
    );
  }
});
