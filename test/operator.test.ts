import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { startFakeChat } from './support/fake-openai.ts';
import {
  processState,
  SPEECH,
  spawnVerbatim,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const wav = speechWav(SPEECH);

function objectFiles(h: Harness, meetingId: string): string[] {
  const dir = path.join(h.dataDir, 'blobs', h.workspaceId, meetingId);
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
}

async function jobsOf(h: Harness, meetingId: string) {
  return h.app.database.db
    .selectFrom('jobs')
    .select(['id', 'kind', 'status', 'current_attempt_id', 'subject_id'])
    .where('meeting_id', '=', meetingId)
    .orderBy('created_at')
    .execute();
}

/** Stops a worker (a real SIGSTOP) right before it commits window 0, and waits until it is stopped. */
async function stoppedWorker(h: Harness) {
  const worker = h.spawnWorker({
    VERBATIM_FAULTS: JSON.stringify([
      { at: 'transcribe-window.before-commit', action: 'stop', times: 1, match: { windowIndex: 0 } },
    ]),
    VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
    // Long enough that the stopped worker's lease does not expire while the test acts.
    VERBATIM_LEASE_SECONDS: '60',
    VERBATIM_HEARTBEAT_SECONDS: '5',
  });
  return worker;
}

void it('B8: deleting a meeting removes every child row in one transaction and hands its audio to cleanup', async () => {
  const h = await startHarness();
  try {
    const id = await uploadMeeting(h, wav);
    h.spawnWorker();
    await waitFor('windows cut', async () => {
      const w = await h.app.database.db
        .selectFrom('windows')
        .select('id')
        .where('meeting_id', '=', id)
        .execute();
      return w.length > 0;
    });
    assert.ok(objectFiles(h, id).length > 0);
    const res = await h.request('DELETE', `/v1/meetings/${id}`);
    assert.equal(res.status, 204, res.text);
    assert.equal((await h.request('GET', `/v1/meetings/${id}`)).status, 404);
    const db = h.app.database.db;
    for (const table of ['segments', 'windows', 'chunks', 'blobs'] as const) {
      const rows = await db.selectFrom(table).select('id').where('meeting_id', '=', id).execute();
      assert.equal(rows.length, 0, `${table} rows left`);
    }
    const jobs = await jobsOf(h, id);
    assert.ok(jobs.length > 0);
    assert.ok(
      jobs.every((j) => j.status === 'completed' || j.status === 'canceled' || j.status === 'failed'),
      JSON.stringify(jobs.map((j) => j.status)),
    );
    await waitFor('objects deleted', async () => {
      const left = await db.selectFrom('object_cleanups').select('id').where('meeting_id', '=', id).execute();
      return left.length === 0 && objectFiles(h, id).length === 0;
    });
    const audit = await db
      .selectFrom('audit_events')
      .select(['to_status', 'reason'])
      .where('subject_id', '=', id)
      .orderBy('id')
      .execute();
    assert.equal(audit.at(-1)!.to_status, 'deleted');
    assert.equal((await h.request('DELETE', `/v1/meetings/${id}`)).status, 404);
  } finally {
    await h.close();
  }
});

void it('J14: canceling a batch cancels its jobs and closes running attempts before any input is removed; the late worker cannot commit', async () => {
  const h = await startHarness();
  try {
    const batch = await h.request('POST', '/v1/batches', { title: 'Q3 interviews' });
    assert.equal(batch.status, 201);
    const ids: string[] = [];
    for (const title of ['one', 'two']) {
      const created = await h.request('POST', '/v1/meetings', {
        source: 'upload',
        title,
        batchId: batch.json.id,
      });
      assert.equal(created.status, 201, created.text);
      ids.push(created.json.id as string);
    }
    const late = await stoppedWorker(h);
    for (const id of ids) {
      const put = await h.request('PUT', `/v1/meetings/${id}/recording`, wav, {
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 202);
    }
    await waitFor('the worker to stop itself before committing', async () => processState(late.pid) === 'T');
    const running = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select(['job_attempts.id', 'jobs.meeting_id', 'jobs.subject_id'])
      .where('job_attempts.status', '=', 'running')
      // The stopped transcription; the other meeting's split may still be running beside it (CI).
      .where('jobs.kind', '=', 'transcribe-window')
      .execute();
    assert.equal(running.length, 1);

    const liveBefore = await h.app.database.db
      .selectFrom('blobs')
      .select('id')
      .where('meeting_id', 'in', ids)
      .where('deleted_at', 'is', null)
      .execute();
    assert.ok(liveBefore.length >= 2, 'both recordings are stored before the cancel');
    const canceled = await h.request('POST', `/v1/batches/${batch.json.id}/cancel`);
    assert.equal(canceled.status, 202, canceled.text);
    assert.ok(canceled.json.canceledAt);
    assert.deepEqual(
      (canceled.json.meetings as Array<{ status: string; failureCode: string }>).map((m) => [
        m.status,
        m.failureCode,
      ]),
      [
        ['failed', 'meeting.canceled'],
        ['failed', 'meeting.canceled'],
      ],
    );
    const db = h.app.database.db;
    const attempt = await db
      .selectFrom('job_attempts')
      .select(['status', 'ended_at'])
      .where('id', '=', running[0]!.id)
      .executeTakeFirstOrThrow();
    assert.equal(attempt.status, 'canceled');
    for (const id of ids) {
      const jobs = await jobsOf(h, id);
      assert.ok(!jobs.some((j) => j.status === 'pending' || j.status === 'running'), JSON.stringify(jobs));
      // The input is handed to deletion in a later transaction than the one that closed the attempt.
      const blobs = await db.selectFrom('blobs').select('deleted_at').where('meeting_id', '=', id).execute();
      assert.ok(blobs.length > 0);
      for (const b of blobs)
        assert.ok(b.deleted_at && attempt.ended_at! < b.deleted_at, 'attempt closed first');
    }
    // The late worker resumes and tries to commit window 0: its token was invalidated.
    process.kill(late.pid, 'SIGCONT');
    await waitFor('the late worker to give up its commit', async () =>
      /no longer holds the job/.test(late.output()),
    );
    const segments = await db
      .selectFrom('segments')
      .select('id')
      .where('window_id', '=', running[0]!.subject_id)
      .execute();
    assert.equal(segments.length, 0, 'nothing committed by the canceled attempt');
    const after = await db
      .selectFrom('job_attempts')
      .select('status')
      .where('id', '=', running[0]!.id)
      .executeTakeFirstOrThrow();
    assert.equal(after.status, 'canceled');
    const third = await h.request('POST', '/v1/meetings', {
      source: 'upload',
      title: 'three',
      batchId: batch.json.id,
    });
    assert.equal(third.status, 409);
    assert.equal(third.json.error.code, 'batch.canceled');
  } finally {
    await h.close();
  }
});

void it('J13: resubmitting a meeting supersedes its active jobs and running attempt, keeps the history, and completes', async () => {
  const h = await startHarness();
  try {
    const stale = await stoppedWorker(h);
    const id = await uploadMeeting(h, wav);
    await waitFor('the worker to stop itself before committing', async () => processState(stale.pid) === 'T');
    const res = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(res.status, 202, res.text);
    assert.ok(res.json.superseded >= 1 && res.json.created >= 1, res.text);
    const db = h.app.database.db;
    const superseded = await db
      .selectFrom('job_attempts')
      .select(['id', 'status'])
      .where('status', '=', 'superseded')
      .execute();
    assert.equal(superseded.length, 1, 'the running attempt is closed as superseded');
    process.kill(stale.pid, 'SIGCONT');
    h.spawnWorker();
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    assert.equal(meeting.windows.done, meeting.windows.total);
    const jobs = await jobsOf(h, id);
    assert.ok(
      jobs.some((j) => j.status === 'superseded'),
      'superseded jobs are kept',
    );
    const audit = await db
      .selectFrom('audit_events')
      .select(['subject_id', 'to_status', 'reason'])
      .where('to_status', '=', 'superseded')
      .execute();
    assert.ok(audit.length >= 2, 'job and attempt supersessions are in the audit trail');
    const resubmitted = await db
      .selectFrom('audit_events')
      .select('reason')
      .where('subject_id', '=', id)
      .where('reason', 'like', 'resubmitted%')
      .execute();
    assert.equal(resubmitted.length, 1);
    // An ended meeting's audio is gone: resubmission is refused with the reason.
    const again = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, 'meeting.audio_deleted');
  } finally {
    await h.close();
  }
});

void it('J16: an exhausted job is listed by verbatim dead-letters with its history; verbatim resubmit completes it', async () => {
  let llmBack = false;
  const chat = await startFakeChat(() => (llmBack ? 'ok' : '400'));
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  try {
    h.spawnWorker();
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    const failed = await h.app.database.db
      .selectFrom('jobs')
      .select(['id', 'attempt_count'])
      .where('kind', '=', 'write-minutes')
      .where('status', '=', 'failed')
      .executeTakeFirstOrThrow();
    const cli = (args: string[]) => {
      const p = spawnVerbatim(args, h.env());
      return p.exited.then((code) => ({ code, out: p.output() }));
    };
    const listed = await cli(['dead-letters']);
    assert.equal(listed.code, 0, listed.out);
    assert.ok(listed.out.includes(failed.id), listed.out);
    assert.ok(listed.out.includes(`verbatim resubmit ${failed.id}`), listed.out);
    // Its history: every attempt, in order, with its outcome and error, not just the job's line.
    const attempts = await h.app.database.db
      .selectFrom('job_attempts')
      .select(['attempt_no', 'status', 'error_code'])
      .where('job_id', '=', failed.id)
      .orderBy('attempt_no')
      .execute();
    assert.equal(attempts.length, failed.attempt_count);
    assert.ok(attempts.length >= 1);
    let from = 0;
    for (const a of attempts) {
      const line = new RegExp(`attempt ${a.attempt_no} ${a.status} .*${a.error_code ?? ''}`);
      const at = listed.out.slice(from).search(line);
      assert.ok(
        at >= 0,
        `attempt ${a.attempt_no} (${a.status} ${a.error_code}) listed after the one before:\n${listed.out}`,
      );
      from += at + 1;
    }

    llmBack = true;
    const resubmitted = await cli(['resubmit', failed.id]);
    assert.equal(resubmitted.code, 0, resubmitted.out);
    await waitFor('minutes written', async () => {
      const m = await h.request('GET', `/v1/meetings/${id}`);
      return m.json.minutes.status === 'written';
    });
    const after = await cli(['dead-letters']);
    assert.match(after.out, new RegExp(`resubmitted: job [0-9a-f-]{36} is completed`));
    const original = await h.app.database.db
      .selectFrom('jobs')
      .select('status')
      .where('id', '=', failed.id)
      .executeTakeFirstOrThrow();
    assert.equal(original.status, 'failed', 'the dead letter itself is never republished or edited');
  } finally {
    await h.close();
    await chat.close();
  }
});

void it('B8/V3: a job its meeting’s delete did not see (made alongside the delete) ends canceled once it runs, instead of failing for ever on the gone rows (found by the simulation)', async () => {
  const h = await startHarness();
  try {
    // No worker yet: the split job waits. The delete is made blind to it, as a delete whose
    // transaction ran alongside the one creating the job is.
    const id = await uploadMeeting(h, wav);
    const [split] = await jobsOf(h, id);
    assert.equal(split?.kind, 'split-recording');
    const jobs = h.app.deps.jobs;
    const cancel = jobs.cancelMeetingJobs.bind(jobs);
    jobs.cancelMeetingJobs = () => Promise.resolve(0);
    try {
      assert.equal((await h.request('DELETE', `/v1/meetings/${id}`)).status, 204);
    } finally {
      jobs.cancelMeetingJobs = cancel;
    }
    assert.equal((await jobsOf(h, id))[0]?.status, 'pending', 'the delete left the job behind');

    h.spawnWorker();
    const ended = await waitFor('the orphaned job to end', async () => {
      const job = (await jobsOf(h, id))[0];
      return job && job.status !== 'pending' && job.status !== 'running' ? job : null;
    });
    assert.equal(ended.status, 'canceled');
    assert.equal(ended.current_attempt_id, null);
    const trail = await h.app.database.db
      .selectFrom('audit_events')
      .select('reason')
      .where('subject_id', '=', ended.id)
      .where('to_status', '=', 'canceled')
      .execute();
    assert.match(trail[0]?.reason ?? '', /its meeting was deleted/);
  } finally {
    await h.close();
  }
});
