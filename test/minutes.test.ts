import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import { sql } from 'kysely';
import { onTranscriptEvent } from '../src/meetings/minutes.ts';
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

void it('L19/V5: an event whose revision already has written minutes (an older event’s job read the newer text first) asks for no second copy; a newer revision still does', async () => {
  const h = await startHarness();
  try {
    h.spawnWorker();
    const id = await uploadMeeting(h, wav);
    const done = await waitForMeeting(h, id);
    assert.equal(done.minutes.status, 'written');
    assert.equal(done.minutes.revision, 0);
    const db = h.app.database.db;
    const minutesReady = async () =>
      (
        await db
          .selectFrom('outbox')
          .select(sql<string>`payload->>'eventId'`.as('eventId'))
          .distinct()
          .where('event_type', '=', 'minutes.ready')
          .where('subject_id', '=', id)
          .execute()
      ).map((r) => r.eventId);
    const minutesJobs = () =>
      db
        .selectFrom('jobs')
        .select('id')
        .where('kind', '=', 'write-minutes')
        .where('subject_id', '=', id)
        .execute();
    assert.equal((await minutesReady()).length, 1);
    assert.equal((await minutesJobs()).length, 1);

    // A second event for revision 0 (as when a job made for an older event read revision 0 and
    // wrote its minutes before this event's consumer ran): nothing more is asked for.
    await onTranscriptEvent(h.app.deps, {
      workspaceId: h.workspaceId,
      meetingId: id,
      eventId: randomUUID(),
      revision: 0,
    });
    assert.equal((await minutesJobs()).length, 1, 'no second minutes job for revision 0');

    // The transcript revised (as a repair commits it): revision 1 gets its minutes.
    await db
      .updateTable('meetings')
      .set({ transcript_revision: 1, minutes_status: 'pending' })
      .where('id', '=', id)
      .execute();
    await onTranscriptEvent(h.app.deps, {
      workspaceId: h.workspaceId,
      meetingId: id,
      eventId: randomUUID(),
      revision: 1,
    });
    const rewritten = await waitFor('minutes of revision 1', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.minutes.status === 'written' && m.minutes.revision === 1 ? m : null;
    });
    assert.equal(rewritten.minutes.stale, false);
    assert.equal((await minutesJobs()).length, 2);
    assert.equal((await minutesReady()).length, 2, 'one minutes.ready per revision');
  } finally {
    await h.close();
  }
});

void it('J13/L8/V5: a resubmit while the minutes wait out an outage asks for them again, once', async () => {
  let back = false;
  await withChat(
    () => (back ? 'ok' : '503'),
    async (h) => {
      const id = await uploadMeeting(h, wav);
      const db = h.app.database.db;
      await waitFor('the minutes to wait out the outage', async () => {
        const job = await db
          .selectFrom('jobs')
          .select('wait_count')
          .where('kind', '=', 'write-minutes')
          .where('subject_id', '=', id)
          .executeTakeFirst();
        return (job?.wait_count ?? 0) >= 1;
      });
      const resubmitted = await h.request('POST', `/v1/meetings/${id}/resubmit`);
      assert.equal(resubmitted.status, 202, resubmitted.text);
      const active = () =>
        db
          .selectFrom('jobs')
          .select('id')
          .where('kind', '=', 'write-minutes')
          .where('subject_id', '=', id)
          .where('status', 'in', ['pending', 'running'])
          .execute();
      assert.equal((await active()).length, 1, 'the resubmit asked for the minutes again');
      // V5 (found by the simulation): a transcript event whose consumer runs only now, after the
      // resubmit made its minutes job, asks for no second one.
      await onTranscriptEvent(h.app.deps, {
        workspaceId: h.workspaceId,
        meetingId: id,
        eventId: randomUUID(),
        revision: 0,
      });
      assert.equal((await active()).length, 1, 'one minutes job, not two');
      back = true;
      const meeting = await waitForMeeting(h, id);
      assert.equal(meeting.status, 'complete');
      assert.equal(meeting.minutes.status, 'written');
      assert.equal(meeting.minutes.content.writer, 'llm');
      const ready = await db
        .selectFrom('outbox')
        .select(sql<string>`payload->>'eventId'`.as('eventId'))
        .distinct()
        .where('event_type', '=', 'minutes.ready')
        .where('subject_id', '=', id)
        .execute();
      assert.equal(ready.length, 1, 'minutes written once');
    },
  );
});
