import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import {
  assertNoTokenLeaks,
  processState,
  SPEECH,
  speechWav,
  startHarness,
  supervise,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const wav = speechWav(SPEECH);

async function attemptHistory(h: Harness, windowIndex: number): Promise<string[]> {
  const rows = await h.app.database.db
    .selectFrom('job_attempts')
    .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
    .innerJoin('windows', 'windows.id', 'jobs.subject_id')
    .select(['job_attempts.status', 'job_attempts.attempt_no'])
    .where('jobs.kind', '=', 'transcribe-window')
    .where('windows.index', '=', windowIndex)
    .orderBy('job_attempts.attempt_no')
    .execute();
  return rows.map((r) => r.status);
}

/** Each window has exactly one committed transcript: transcribed once, segments numbered once. */
async function assertOneTranscriptPerWindow(h: Harness, meetingId: string): Promise<void> {
  const db = h.app.database.db;
  const windows = await db.selectFrom('windows').selectAll().where('meeting_id', '=', meetingId).execute();
  for (const w of windows) {
    assert.equal(w.status, 'transcribed', `window ${w.index}`);
    const segs = await db
      .selectFrom('segments')
      .select(['seq'])
      .where('window_id', '=', w.id)
      .orderBy('seq')
      .execute();
    assert.equal(segs.length, w.segment_count, `window ${w.index} has its segments once`);
    assert.deepEqual(
      segs.map((s) => s.seq),
      segs.map((_, i) => i),
    );
  }
}

for (const checkpoint of ['transcribe-window.after-claim', 'transcribe-window.before-commit']) {
  void it(`A1/J1/J2: a worker SIGKILLed at ${checkpoint} loses nothing and does nothing twice`, async () => {
    const h = await startHarness();
    try {
      const faults = JSON.stringify([
        { at: checkpoint, action: 'kill', times: 1, match: { windowIndex: 1 } },
      ]);
      const sup = supervise(h, { VERBATIM_FAULTS: faults });
      const id = await uploadMeeting(h, wav);
      await waitForMeeting(h, id);
      await sup.stop();
      assert.equal(sup.starts(), 2, 'the first worker was killed and a second one finished the work');
      assert.deepEqual(await attemptHistory(h, 1), ['lease_expired', 'completed']);
      await assertOneTranscriptPerWindow(h, id);
      const tokens = await h.app.database.db
        .selectFrom('job_attempts')
        .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
        .select('job_attempts.token')
        .where('jobs.kind', '=', 'transcribe-window')
        .where(sql`(jobs.payload->>'windowIndex')::int`, '=', 1)
        .execute();
      assert.equal(new Set(tokens.map((t) => t.token)).size, 2, 'the new attempt has a new token');
      assert.match(h.logs(), /expired lease reclaimed/);
      // The dead worker was recognised from its heartbeats and its transport locks were released
      // at once instead of after graphile-worker's 4-hour expiry.
      const dead = await h.app.database.db
        .selectFrom('workers')
        .select(['pool_ids'])
        .where('declared_dead_at', 'is not', null)
        .execute();
      assert.equal(dead.length, 1);
      const pools = dead[0]!.pool_ids;
      // Its runners start one queue after another; under load it can die before the last ones
      // exist. Those hold nothing: no transport job is locked by a pool no worker recorded.
      assert.ok(pools.length >= 1, 'the pools of the dead worker were recorded');
      const unrecorded = await sql<{ n: number }>`select count(*)::int as n from graphile_worker._private_jobs
        where locked_by is not null
          and not exists (select 1 from workers w where locked_by = any(w.pool_ids))`.execute(
        h.app.database.db,
      );
      assert.equal(unrecorded.rows[0]!.n, 0, 'every locked transport job belongs to a recorded pool');
      const locked = await sql<{ n: number }>`select count(*)::int as n from graphile_worker._private_jobs
        where locked_by = any(${pools}::text[])`.execute(h.app.database.db);
      assert.equal(locked.rows[0]!.n, 0);
      assert.match(h.logs(), /declared dead/);
      await assertNoTokenLeaks(h);
    } finally {
      await h.close();
    }
  });
}

void it("J5: a worker SIGKILLed between its last window's commit and the close-out start: the sweep starts the close-out, once", async () => {
  const h = await startHarness();
  try {
    const faults = JSON.stringify([
      { at: 'transcribe-window.before-close-out-start', action: 'kill', times: 1 },
    ]);
    const sup = supervise(h, { VERBATIM_FAULTS: faults });
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id);
    await sup.stop();
    assert.equal(meeting.status, 'complete');
    assert.equal(sup.starts(), 2, 'the worker was killed once, after the commit');
    await assertOneTranscriptPerWindow(h, id);
    const attempts = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select('job_attempts.status')
      .where('jobs.meeting_id', '=', id)
      .where('jobs.kind', '=', 'transcribe-window')
      .execute();
    assert.ok(
      attempts.every((a) => a.status === 'completed'),
      'no window was attempted again',
    );
    const moves = await h.app.database.db
      .selectFrom('audit_events')
      .select(['to_status', 'actor'])
      .where('subject_id', '=', id)
      .where('from_status', '=', 'processing')
      .execute();
    assert.equal(moves.length, 1, 'processing was left once');
    assert.equal(moves[0]!.to_status, 'finalizing');
    assert.match(moves[0]!.actor, /sweep/, 'the sweep started it, the killed worker could not');
    await assertNoTokenLeaks(h);
  } finally {
    await h.close();
  }
});

void it('A2/J3: a worker SIGSTOPped past its lease can neither commit, renew nor fail once resumed', async () => {
  const h = await startHarness();
  try {
    // The first worker stops itself (a real SIGSTOP) after recognising window 0, before committing.
    const stale = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'transcribe-window.before-commit', action: 'stop', times: 1, match: { windowIndex: 0 } },
      ]),
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
    });
    const id = await uploadMeeting(h, wav);
    await waitFor('the first worker to be stopped', async () => processState(stale.pid) === 'T');
    const fresh = h.spawnWorker();
    await waitForMeeting(h, id);
    assert.deepEqual(await attemptHistory(h, 0), ['lease_expired', 'completed']);
    const db = h.app.database.db;
    const before = await db.selectFrom('job_attempts').selectAll().orderBy('id').execute();
    const segmentsBefore = await db.selectFrom('segments').selectAll().orderBy('id').execute();

    const seenBefore = stale.output().length;
    process.kill(stale.pid, 'SIGCONT');
    // Only what the worker says after it resumed counts: its commit was tried and refused.
    await waitFor('the resumed worker to have its writes refused', async () =>
      /its writes were refused/.test(stale.output().slice(seenBefore)),
    );
    const after = await db.selectFrom('job_attempts').selectAll().orderBy('id').execute();
    assert.deepEqual(after, before, 'the stale worker changed no attempt row (no commit, renew or fail)');
    assert.deepEqual(await db.selectFrom('segments').selectAll().orderBy('id').execute(), segmentsBefore);
    await assertOneTranscriptPerWindow(h, id);
    assert.ok(stale.proc.exitCode === null, 'the stale worker keeps running; it only dropped that job');
    await fresh.stop();
    await assertNoTokenLeaks(h);
  } finally {
    await h.close();
  }
});

void it('A9/J11: an unhandled rejection in a worker process makes it exit non-zero', async () => {
  const h = await startHarness();
  try {
    const worker = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([{ at: 'worker.started', action: 'reject' }]),
    });
    const code = await worker.exited;
    assert.equal(code, 1);
    assert.match(worker.output(), /unhandled rejection; exiting/);
  } finally {
    await h.close();
  }
});

void it('J11: SIGTERM stops claiming and the worker exits 0 after draining', async () => {
  const h = await startHarness();
  try {
    // One slot, and window 0 slow enough for the signal to come while it runs, with more windows
    // waiting: a worker that kept claiming would start one of them before it exits.
    const worker = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        {
          at: 'transcribe-window.before-commit',
          action: 'delay',
          ms: 5000,
          times: 1,
          match: { windowIndex: 0 },
        },
      ]),
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
    });
    const id = await uploadMeeting(h, wav);
    const db = h.app.database.db;
    const waitingWindows = async () =>
      (
        await db
          .selectFrom('jobs')
          .select(sql<number>`count(*)::int`.as('n'))
          .where('kind', '=', 'transcribe-window')
          .where('status', '=', 'pending')
          .executeTakeFirstOrThrow()
      ).n;
    // (The split cuts windows while it decodes: the others appear while window 0 runs.)
    await waitFor(
      'window 0 in progress and another window waiting for the slot',
      async () => (await attemptHistory(h, 0)).includes('running') && (await waitingWindows()) > 0,
    );
    const { rows } = await sql<{ at: Date }>`select now() as at`.execute(db);
    worker.proc.kill('SIGTERM');
    assert.equal(await worker.exited, 0);
    assert.match(worker.output(), /worker stopped/);
    // The job in hand was finished (drained), not handed back, and nothing was claimed after the signal.
    assert.deepEqual(await attemptHistory(h, 0), ['completed']);
    const later = await db
      .selectFrom('job_attempts')
      .select('id')
      .where('started_at', '>', rows[0]!.at)
      .execute();
    assert.equal(later.length, 0, 'no attempt started after SIGTERM');
    const row = await db.selectFrom('workers').select('stopped_at').executeTakeFirstOrThrow();
    assert.ok(row.stopped_at);
    // The rest is left for the next worker.
    h.spawnWorker();
    await waitForMeeting(h, id);
  } finally {
    await h.close();
  }
});

void it('J11: SIGTERM during a job drains, then hands the unfinished attempt back without spending a retry', async () => {
  const h = await startHarness({ env: { VERBATIM_DRAIN_SECONDS: '1' } });
  try {
    const stuck = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'transcribe-window.before-commit', action: 'hang', times: 1, match: { windowIndex: 0 } },
      ]),
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
    });
    const id = await uploadMeeting(h, wav);
    await waitFor(
      'window 0 to be in progress',
      async () =>
        /checkpoint|attempt started/.test(stuck.output()) && (await attemptHistory(h, 0)).includes('running'),
    );
    stuck.proc.kill('SIGTERM');
    assert.equal(await stuck.exited, 0);
    assert.match(stuck.output(), /attempt released to another worker/);
    const history = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select(['job_attempts.status', 'job_attempts.error_code', 'jobs.error_count', 'jobs.reclaim_count'])
      .where(sql`(jobs.payload->>'windowIndex')::int`, '=', 0)
      .where('jobs.kind', '=', 'transcribe-window')
      .execute();
    assert.deepEqual(
      history.map((r) => [r.status, r.error_code]),
      [['retryable_failed', 'worker.shutdown']],
    );
    assert.equal(history[0]!.error_count, 0, 'a released attempt spends no retry');
    assert.equal(history[0]!.reclaim_count, 0);
    h.spawnWorker();
    await waitForMeeting(h, id);
    assert.deepEqual(await attemptHistory(h, 0), ['retryable_failed', 'completed']);
  } finally {
    await h.close();
  }
});
