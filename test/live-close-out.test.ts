// Live meetings, split from live.test.ts so the suite runs them in parallel: the close-out of the
// last stretch (L4–L6, L10, L11) and where live windows are cut (L18).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { parseWav } from '../src/domain/wav.ts';
import { SPEECH, startHarness, supervise, waitFor, waitForMeeting } from './support/harness.ts';
import { LIVE_ENV, chunksOf, closeOutJob, createLive, putChunk, streamAndEnd } from './support/live.ts';

void it('L10: a close-out worker killed after the last stretch is reclaimed as the same job and completes', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const kill = [{ at: 'close-out-meeting.after-last-stretch', action: 'kill', times: 1 }];
    const sup = supervise(h, { VERBATIM_FAULTS: JSON.stringify(kill) });
    const id = await streamAndEnd(h, chunksOf(`${SPEECH} ${SPEECH}`));
    const meeting = await waitForMeeting(h, id);
    await sup.stop();
    assert.equal(meeting.minutes.status, 'written');
    const { job, attempts } = await closeOutJob(h, id);
    assert.equal(job.reclaim_count, 1, 'the reclaim was counted');
    assert.equal(job.error_count, 0);
    // Earlier runs may have ended normally while waiting for windows in retry (requeues, L4 step 2).
    assert.equal(attempts.filter((a) => a === 'lease_expired').length, 1);
    assert.equal(attempts.at(-1), 'completed');
    // The last stretch was committed once, before the kill, and not redone.
    const db = h.app.database.db;
    const windows = await db.selectFrom('windows').selectAll().where('meeting_id', '=', id).execute();
    assert.ok(windows.every((w) => w.status === 'transcribed'));
    const lastStretch = windows.reduce((a, b) => (b.start_ms > a.start_ms ? b : a));
    const settled = await db
      .selectFrom('audit_events')
      .select('id')
      .where('subject_id', '=', lastStretch.id)
      .where('to_status', '=', 'transcribed')
      .execute();
    assert.equal(settled.length, 1, 'the last stretch was committed once');
    const killed = await db
      .selectFrom('audit_events')
      .innerJoin('job_attempts', (j) =>
        j.on(sql`job_attempts.id::text`, '=', sql.ref('audit_events.subject_id')),
      )
      .select('audit_events.id')
      .where('job_attempts.job_id', '=', job.id)
      .where('audit_events.to_status', '=', 'lease_expired')
      .executeTakeFirstOrThrow();
    assert.ok(
      Number(settled[0]!.id) < Number(killed.id),
      'the last stretch was committed before the worker was killed',
    );
    const segments = await db
      .selectFrom('segments')
      .select(['start_ms', 'text'])
      .where('window_id', '=', lastStretch.id)
      .execute();
    assert.ok(segments.length > 0, 'the last stretch has words');
    assert.equal(
      new Set(segments.map((x) => `${x.start_ms}:${x.text}`)).size,
      segments.length,
      'and none of them twice: the stretch was not recognised and committed again',
    );
  } finally {
    await h.close();
  }
});

void it('L10/L11/J20: past the reclaim cap the close-out is isolated; one that kills its isolated runner every time is poison: the meeting fails with its reason and the audio is still deleted', async () => {
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_MAX_RECLAIMS: '1',
      VERBATIM_ISOLATION_BACKOFF_SECONDS: '0.3',
      VERBATIM_POISON_RUNNER_DEATHS: '2',
    },
  });
  try {
    const kill = [{ at: 'close-out-meeting.after-last-stretch', action: 'kill' }];
    const sup = supervise(h, { VERBATIM_FAULTS: JSON.stringify(kill) });
    const id = await streamAndEnd(h, chunksOf(SPEECH));
    const meeting = await waitForMeeting(h, id, 'failed');
    assert.equal(meeting.failure.code, 'poison');
    assert.match(meeting.failure.message, /^This meeting stopped before it finished: /);
    assert.match(meeting.failure.plain, /stopped the process running it/);
    const { attempts } = await closeOutJob(h, id);
    // Two workers lost (one reclaim, then the cap), then two isolated runners killed.
    assert.deepEqual(attempts.slice(-4), [
      'lease_expired',
      'lease_expired',
      'lease_expired',
      'lease_expired',
    ]);
    assert.ok(
      attempts.slice(0, -4).every((a) => a === 'completed'),
      'any earlier runs were waits',
    );
    await waitFor('the audio to be deleted', async () => {
      const left = await h.app.database.db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      return left.length === 0;
    });
    await sup.stop();
  } finally {
    await h.close();
  }
});

void it('L4/L6: a speech failure that passes (a timeout) on the last stretch is waited out: the stretch is transcribed, not failed', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    // Found by the simulation (issue 14): one timeout on the stretch the close-out transcribes
    // itself used to fail that window at once, and its words were deleted with the audio.
    const fault = [
      {
        at: 'close-out-meeting.transcribe-directly',
        action: 'throw',
        kind: 'transient',
        code: 'asr.timeout',
        times: 2,
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 0);
    assert.equal(meeting.windows.done, meeting.windows.total);
    assert.match(h.logs(), /the last stretch could not be transcribed yet; waiting/);
    const last = await h.app.database.db
      .selectFrom('windows')
      .select(['status'])
      .where('meeting_id', '=', id)
      .orderBy('index', 'desc')
      .executeTakeFirstOrThrow();
    assert.equal(last.status, 'transcribed');
  } finally {
    await h.close();
  }
});

void it('L6: when the last stretch cannot be transcribed only that window fails, and the minutes are still written', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const totalMs = chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0) / 16;
    const lastIndex = Math.floor(totalMs / 8000);
    const fault = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'permanent',
        code: 'asr.bad_request',
        match: { windowIndex: lastIndex },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 1);
    assert.equal(meeting.windows.done, meeting.windows.total - 1);
    assert.equal(meeting.minutes.status, 'written');
    const failed = await h.app.database.db
      .selectFrom('windows')
      .selectAll()
      .where('meeting_id', '=', id)
      .where('status', '=', 'failed')
      .executeTakeFirstOrThrow();
    assert.equal(failed.index, lastIndex);
    assert.equal(failed.failure_code, 'asr.bad_request');
    assert.match(h.logs(), /meeting completes with some windows untranscribed/);
  } finally {
    await h.close();
  }
});

void it('L4/L5: a window still in a recognizer retry at the end makes the close-out wait, then continue', async () => {
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_RETRY_STEP_SECONDS: '1' } });
  try {
    const fault = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 2,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunksOf(`${SPEECH} ${SPEECH}`));
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.done, meeting.windows.total, 'the retried window made it in');
    const { job } = await closeOutJob(h, id);
    assert.ok(job.wait_count >= 1, 'the close-out requeued itself to wait');
    assert.equal(job.error_count, 0, 'waiting spent no retry');
    assert.equal(job.reclaim_count, 0);
    const window0 = await h.app.database.db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .innerJoin('windows', 'windows.id', 'jobs.subject_id')
      .select('job_attempts.status')
      .where('windows.meeting_id', '=', id)
      .where('windows.index', '=', 0)
      .orderBy('job_attempts.attempt_no')
      .execute();
    assert.deepEqual(
      window0.map((a) => a.status),
      ['retryable_failed', 'retryable_failed', 'completed'],
    );
  } finally {
    await h.close();
  }
});

void it('L4/L5: a window whose job vanished is waited on only until the wall-clock cap, then counted at deletion', async () => {
  const h = await startHarness({
    // The cap leaves the stretch cut at End time to be transcribed even on a loaded machine.
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '6', VERBATIM_RESCUE_AFTER_SECONDS: '3600' },
  });
  try {
    const db = h.app.database.db;
    const id = await createLive(h);
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    // The transport row of window 0's job disappears before any worker sees it.
    const job0 = await db
      .selectFrom('jobs')
      .innerJoin('windows', 'windows.id', 'jobs.subject_id')
      .select(['jobs.delivery_id'])
      .where('windows.meeting_id', '=', id)
      .where('windows.index', '=', 0)
      .executeTakeFirstOrThrow();
    await sql`select graphile_worker.remove_job(${job0.delivery_id}::text)`.execute(db);
    h.spawnWorker();
    // Every other window is transcribed before End: only the vanished one can be left in flight.
    await waitFor('the windows other than the vanished one to be transcribed', async () => {
      const open = await db
        .selectFrom('windows')
        .select('index')
        .where('meeting_id', '=', id)
        .where('index', '<>', 0)
        .where('status', '=', 'pending')
        .execute();
      return open.length === 0;
    });
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.inFlight, 1, 'the vanished window is still counted as being attempted');
    assert.deepEqual(meeting.untranscribedWhenAudioDeleted, { inFlight: 1, exhausted: 0 });
    assert.match(h.logs(), /close-out wait cap reached/);
    assert.match(
      h.logs(),
      /"inFlight":1,"held":0,"exhausted":0,"exhaustedAudioKept":0,"missing":0,"msg":"meeting completes with some windows untranscribed/,
    );
    const row = await db
      .selectFrom('meetings')
      .select(['closeout_wait_started_at', 'completed_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.ok(row.closeout_wait_started_at, 'when the wait began is stored');
    const waitedMs = row.completed_at!.getTime() - row.closeout_wait_started_at.getTime();
    assert.ok(waitedMs >= 6000, `waited ${waitedMs} ms, at least the 6 s cap`);
  } finally {
    await h.close();
  }
});

void it('L18: live window boundaries fall in pauses, where a fixed cut would split speech', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH} ${SPEECH}`);
    const id = await streamAndEnd(h, chunks);
    h.spawnWorker();
    await waitForMeeting(h, id);
    const all = new Int16Array(chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0));
    let at = 0;
    for (const c of chunks) {
      const s = parseWav(c)!.samples;
      all.set(s, at);
      at += s.length;
    }
    const rms = (centerMs: number) => {
      const from = Math.max(0, Math.round(centerMs * 16) - 800);
      let sum = 0;
      for (let i = from; i < from + 1600 && i < all.length; i++) sum += all[i]! * all[i]!;
      return Math.sqrt(sum / 1600);
    };
    const speechLevel = [...Array(Math.floor(all.length / 1600)).keys()]
      .map((k) => rms(k * 100 + 50))
      .sort((a, b) => a - b)
      .at(Math.floor(all.length / 1600 / 2))!;
    const windows = await h.app.database.db
      .selectFrom('windows')
      .select(['end_ms'])
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    const boundaries = windows.slice(0, -1).map((w) => w.end_ms);
    assert.ok(boundaries.length >= 3);
    for (const b of boundaries) assert.ok(rms(b) < speechLevel * 0.2, `boundary at ${b} ms is in a pause`);
    const fixedCutsInSpeech = boundaries
      .map((_, k) => (k + 1) * 8000)
      .filter((ms) => rms(ms) >= speechLevel * 0.2);
    assert.ok(fixedCutsInSpeech.length >= 1, 'a fixed cut would have landed in speech at least once');
  } finally {
    await h.close();
  }
});
