import assert from 'node:assert/strict';
import { it } from 'node:test';
import { startFakeChat } from './support/fake-openai.ts';
import { SPEECH, speechWav, startHarness, uploadMeeting, waitFor } from './support/harness.ts';

const wav = speechWav(SPEECH);

void it('L13: a minutes writer that hangs holds only the minutes queue: meanwhile another meeting is split, transcribed and published, and its minutes wait their turn', async () => {
  // The first minutes request never gets an answer (until the test ends); later ones are answered.
  const chat = await startFakeChat((n) => (n === 1 ? 'hang' : 'ok'));
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
      VERBATIM_LLM_TIMEOUT_SECONDS: '600',
      VERBATIM_JOB_TIMEOUT_SECONDS: '600',
      // One slot per queue: a queue shared with the minutes would be held by the hanging request.
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
      VERBATIM_CLOSEOUT_CONCURRENCY: '1',
      VERBATIM_MINUTES_CONCURRENCY: '1',
    },
  });
  const db = h.app.database.db;
  const runningMinutes = (meetingId: string) =>
    db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select('job_attempts.id')
      .where('jobs.meeting_id', '=', meetingId)
      .where('jobs.kind', '=', 'write-minutes')
      .where('job_attempts.status', '=', 'running')
      .executeTakeFirst();
  try {
    h.spawnWorker();
    const first = await uploadMeeting(h, wav, 'first');
    await waitFor('the first meeting’s minutes request to hang', async () => {
      return chat.calls() >= 1 && (await runningMinutes(first));
    });

    const second = await uploadMeeting(h, wav, 'second');
    await waitFor(
      'the second meeting’s transcript to be published while the minutes queue is held',
      async () => {
        const row = await db
          .selectFrom('meetings')
          .select('transcript_completed_at')
          .where('id', '=', second)
          .executeTakeFirstOrThrow();
        return row.transcript_completed_at !== null;
      },
      120_000,
    );
    const windows = await db
      .selectFrom('windows')
      .select('status')
      .where('meeting_id', '=', second)
      .execute();
    assert.ok(windows.length > 0 && windows.every((w) => w.status === 'transcribed'));
    assert.ok(await runningMinutes(first), 'the first meeting’s minutes are still being written');
    assert.equal(chat.calls(), 1, 'the minutes queue took nothing else while its one slot was held');
    // Its minutes job is made when the dispatcher delivers the transcript's event.
    const secondMinutes = await waitFor('the second meeting’s minutes job', () =>
      db
        .selectFrom('jobs')
        .select(['status', 'attempt_count'])
        .where('meeting_id', '=', second)
        .where('kind', '=', 'write-minutes')
        .executeTakeFirst(),
    );
    assert.deepEqual(secondMinutes, { status: 'pending', attempt_count: 0 }, 'its minutes wait their turn');
  } finally {
    await h.close();
    await chat.close();
  }
});
