import assert from 'node:assert/strict';
import { it } from 'node:test';
import { startFakeChat, type FakeReply } from './support/fake-openai.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
} from './support/harness.ts';

const wav = speechWav(SPEECH);

async function withChat(
  script: (n: number) => FakeReply,
  fn: (h: Awaited<ReturnType<typeof startHarness>>) => Promise<void>,
) {
  const chat = await startFakeChat(script);
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  try {
    h.spawnWorker();
    await fn(h);
  } finally {
    await h.close();
    await chat.close();
  }
}

void it('L9: an exhausted minutes quota completes the meeting without minutes, with the reason, and Regenerate works later', async () => {
  let quotaBack = false;
  await withChat(
    () => (quotaBack ? 'ok' : 'quota'),
    async (h) => {
      const id = await uploadMeeting(h, wav);
      const meeting = await waitForMeeting(h, id);
      assert.equal(meeting.transcriptComplete, true);
      assert.equal(meeting.minutes.status, 'unavailable');
      assert.equal(meeting.minutes.reason.code, 'llm.quota_exhausted');
      assert.ok(meeting.audioDeletedAt, 'the audio went once the transcript was final');
      const minutesJob = await h.app.database.db
        .selectFrom('jobs')
        .select(['error_count', 'wait_count', 'status'])
        .where('kind', '=', 'write-minutes')
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        minutesJob,
        { error_count: 0, wait_count: 0, status: 'completed' },
        'checked before the outage path',
      );

      quotaBack = true;
      const regen = await h.request('POST', `/v1/meetings/${id}/minutes`);
      assert.equal(regen.status, 202);
      const written = await waitFor('regenerated minutes', async () => {
        const m = await h.request('GET', `/v1/meetings/${id}`);
        return m.json.minutes.status === 'written' ? m.json : null;
      });
      assert.equal(written.minutes.content.writer, 'llm');
      assert.deepEqual(written.minutes.content.decisions, ['Hire two engineers']);
      assert.equal(written.status, 'complete');
    },
  );
});

void it('L8: a minutes-model outage requeues without spending retries and the minutes are written once it ends', async () => {
  await withChat(
    (n) => (n <= 3 ? '503' : 'ok'),
    async (h) => {
      const id = await uploadMeeting(h, wav);
      const meeting = await waitForMeeting(h, id);
      assert.equal(meeting.minutes.status, 'written');
      const job = await h.app.database.db
        .selectFrom('jobs')
        .select(['error_count', 'wait_count', 'attempt_count'])
        .where('kind', '=', 'write-minutes')
        .executeTakeFirstOrThrow();
      assert.equal(job.error_count, 0, 'an outside outage spends no retry');
      assert.equal(job.wait_count, 3);
      assert.equal(job.attempt_count, 4);
    },
  );
});

void it('L8: an outage that outlasts the wait cap closes the meeting without minutes as an outage', async () => {
  const chat = await startFakeChat(() => '503');
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_MINUTES_WAIT_CAP_SECONDS: '1',
    },
  });
  try {
    h.spawnWorker();
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.minutes.status, 'failed');
    assert.equal(meeting.minutes.reason.code, 'llm.outage');
    assert.equal(meeting.status, 'complete', 'the transcript is kept and the meeting is closed');
  } finally {
    await h.close();
    await chat.close();
  }
});

void it('L7/L8: a minutes endpoint that resets, answers 503, 429 and 529, then times out, is waited out without spending the close-out budget', async () => {
  const script: FakeReply[] = ['reset', '503', '429', '529', 'hang', '503'];
  const chat = await startFakeChat((n) => script[n - 1] ?? 'ok');
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_TIMEOUT_SECONDS: '1',
      // The outage lasts longer than the close-out's whole error budget of 2 would.
      VERBATIM_CLOSEOUT_MAX_ERRORS: '2',
    },
  });
  try {
    h.spawnWorker();
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.minutes.status, 'written');
    assert.equal(chat.calls(), script.length + 1);
    const db = h.app.database.db;
    const minutesJob = await db
      .selectFrom('jobs')
      .select(['error_count', 'wait_count'])
      .where('kind', '=', 'write-minutes')
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      minutesJob,
      { error_count: 0, wait_count: script.length },
      'every outage answer was a wait',
    );
    const closeOut = await db
      .selectFrom('jobs')
      .select(['error_count', 'reclaim_count'])
      .where('kind', '=', 'close-out-meeting')
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      closeOut,
      { error_count: 0, reclaim_count: 0 },
      "the close-out's counters are unchanged",
    );
  } finally {
    await h.close();
    await chat.close();
  }
});

void it('L9: a provider billing limit (402) completes the meeting without minutes, with the reason', async () => {
  await withChat(
    () => '402',
    async (h) => {
      const id = await uploadMeeting(h, wav);
      const meeting = await waitForMeeting(h, id);
      assert.equal(meeting.status, 'complete');
      assert.equal(meeting.minutes.status, 'unavailable');
      assert.equal(meeting.minutes.reason.code, 'llm.quota_exhausted');
    },
  );
});
