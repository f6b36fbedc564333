// The write-minutes handler driven in-process through a job context (test/support/job-context.ts),
// without a worker: which of two minutes jobs of one meeting sends the prompt.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { JobKind } from '../src/domain/status.ts';
import { createJob } from '../src/jobs/catalog.ts';
import { writeMinutesJob } from '../src/meetings/minutes.ts';
import { startFakeChat } from './support/fake-openai.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
} from './support/harness.ts';
import { claimForTest } from './support/job-context.ts';

void it('V6/L19: of two minutes jobs of one meeting, one sends its prompt at a time: the later waits while the earlier is pending, the earlier ends without sending, the later writes the minutes', async () => {
  const chat = await startFakeChat(() => 'ok');
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  try {
    // A meeting with a transcript, minutes written once by a worker, which then stops.
    const worker = h.spawnWorker();
    const meetingId = await uploadMeeting(h, speechWav(SPEECH));
    assert.equal((await waitForMeeting(h, meetingId)).minutes.status, 'written');
    await worker.stop();
    const before = chat.calls();
    const deps = h.app.deps;
    const make = (variant: string) =>
      deps.db.transaction().execute(async (trx) => {
        const job = await createJob(
          deps,
          trx,
          JobKind.writeMinutes,
          { meetingId },
          {
            workspaceId: h.workspaceId,
            dedupeVariant: variant,
          },
          'test',
        );
        assert.ok(job);
        return job.id;
      });
    const earlier = await make('revision-1');
    const later = await make('revision-2');
    const handler = writeMinutesJob(deps);

    // The later job first: an earlier one is still waiting to run, so it waits for that one.
    const early = await claimForTest(deps, later);
    await handler.run(early.ctx);
    assert.equal(early.settled(), 'requeued');
    assert.equal(chat.calls(), before, 'the later job sent nothing while an earlier one was pending');

    // The earlier job ends without sending: the later one reads the newer text.
    const first = await claimForTest(deps, earlier);
    await handler.run(first.ctx);
    assert.equal(first.settled(), 'completed');
    assert.equal(chat.calls(), before, 'the earlier job sent nothing');

    // The later one, due again, writes the minutes.
    const second = await waitFor('the later job to be due again', () =>
      claimForTest(deps, later).catch(() => null),
    );
    await handler.run(second.ctx);
    assert.equal(second.settled(), 'completed');
    assert.equal(chat.calls(), before + 1, 'the later job sent the prompt');
    const meeting = await deps.db
      .selectFrom('meetings')
      .select('minutes_status')
      .where('id', '=', meetingId)
      .executeTakeFirstOrThrow();
    assert.equal(meeting.minutes_status, 'written');
  } finally {
    await h.close();
    await chat.close();
  }
});
