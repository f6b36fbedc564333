// Live meetings, split from live.test.ts so the suite runs them in parallel: End (L24) and windows
// that settle after the transcript was published (L16, L19, J13).
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { parseWav } from '../src/domain/wav.ts';
import { OUTAGE_WAITS } from '../src/domain/retry-policy.ts';
import { SPEECH, startHarness, waitFor, waitForMeeting } from './support/harness.ts';
import { startFakeChat } from './support/fake-openai.ts';
import { LIVE_ENV, chunksOf, closeOutJob, createLive, putChunk, streamAndEnd } from './support/live.ts';

void it('L24: End with every declared chunk stored starts the close-out without the grace wait; End with one missing waits, and that chunk’s arrival starts it at once', async () => {
  // A grace this long would outlast the test: only a close-out that skips it can complete.
  const h = await startHarness({ env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_GRACE_SECONDS: '3600' } });
  const closeOutDueIn = async (meetingId: string) => {
    const r = await sql<{
      s: number;
      status: string;
    }>`select status, extract(epoch from run_after - now())::float as s
      from jobs where kind = 'close-out-meeting' and meeting_id = ${meetingId}`.execute(h.app.database.db);
    assert.equal(r.rows.length, 1);
    return r.rows[0]!;
  };
  try {
    h.spawnWorker();
    const chunks = chunksOf(SPEECH);
    assert.ok(chunks.length >= 2);

    const whole = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, whole, seq, chunk)).status, 201);
    const ended = await h.request('POST', `/v1/meetings/${whole}/end`, { chunks: chunks.length });
    assert.equal(ended.status, 202, ended.text);
    const due = await closeOutDueIn(whole);
    assert.ok(due.status !== 'pending' || due.s <= 1, `the close-out was put ${due.s} s away`);
    assert.equal((await waitForMeeting(h, whole)).status, 'complete');

    const missing = await createLive(h);
    const last = chunks.length - 1;
    for (const [seq, chunk] of chunks.entries())
      if (seq !== last) assert.equal((await putChunk(h, missing, seq, chunk)).status, 201);
    assert.equal(
      (await h.request('POST', `/v1/meetings/${missing}/end`, { chunks: chunks.length })).status,
      202,
    );
    const waiting = await closeOutDueIn(missing);
    assert.equal(waiting.status, 'pending');
    assert.ok(waiting.s > 3000, `a missing chunk keeps the grace wait (due in ${waiting.s} s)`);
    assert.equal((await putChunk(h, missing, last, chunks[last]!)).status, 201);
    const woken = await closeOutDueIn(missing);
    assert.ok(woken.status !== 'pending' || woken.s <= 1, `the arrival woke it (due in ${woken.s} s)`);
    const meeting = await waitForMeeting(h, missing);
    assert.equal(meeting.status, 'complete');
    const text = (await h.request('GET', `/v1/meetings/${missing}/transcript?format=txt`)).text;
    assert.ok(text.toLowerCase().includes('budget'), text);
  } finally {
    await h.close();
  }
});

void it('L24: the last stretch is split at quiet points and its pieces are transcribed at once: one piece held up does not hold the other', async () => {
  // 60 s windows: the whole meeting is the last stretch, transcribed by the close-out itself.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_WINDOW_SECONDS: '60', VERBATIM_TRANSCRIPTION_CONCURRENCY: '2' },
  });
  const pieces = (id: string) =>
    h.app.database.db
      .selectFrom('windows')
      .select(['index', 'status', 'start_samples', 'end_samples'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('index')
      .execute();
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const seconds = chunks.reduce((n, c) => n + parseWav(c)!.samples.length, 0) / 16_000;
    assert.ok(seconds >= 16, `a last stretch long enough to share (${seconds} s)`);
    // The first piece's recognition never returns in this worker.
    const first = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'close-out-meeting.transcribe-directly', action: 'hang', times: 1, match: { windowIndex: 0 } },
      ]),
    });
    const id = await streamAndEnd(h, chunks);
    await waitFor('the second piece transcribed while the first is held up', async () => {
      const rows = await pieces(id);
      return rows.length === 2 && rows[1]!.status === 'transcribed' && rows[0]!.status === 'pending';
    });
    const rows = await pieces(id);
    assert.equal(Number(rows[0]!.start_samples), 0);
    assert.equal(Number(rows[0]!.end_samples), Number(rows[1]!.start_samples), 'the pieces meet');
    assert.equal(Number(rows[1]!.end_samples), Math.round(seconds * 16_000));
    // The worker dies with the first piece held; the next one finishes the meeting.
    first.proc.kill('SIGKILL');
    await first.exited;
    h.spawnWorker();
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    assert.equal(meeting.windows.exhausted, 0);
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    const times = (w: string) => text.split(w).length - 1;
    assert.ok(times('budget') >= 1 && times('friday') >= 1, text);
  } finally {
    await h.close();
  }
});

void it('L4/L6: the last stretch has outage patience of its own: a close-out past its wait cap for windows in retry still waits out a passing failure there, and only past its outage waits does that stretch leave it, for a job of its own, never failed (found by the 30-minute simulation; J20)', async () => {
  // A wait cap of 0 stands for a close-out that has already waited its 10 minutes for a slow
  // backlog; the retry step is short so the outage waits run out within the test.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0', VERBATIM_RETRY_STEP_SECONDS: '0.01' },
  });
  const overloaded = (times: number) =>
    JSON.stringify([
      {
        at: 'close-out-meeting.transcribe-directly',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times,
      },
    ]);
  const lastWindow = (id: string) =>
    h.app.database.db
      .selectFrom('windows')
      .select(['status', 'failure_code'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('start_samples', 'desc')
      .executeTakeFirstOrThrow();
  try {
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const passing = h.spawnWorker({ VERBATIM_FAULTS: overloaded(3) });
    const id = await streamAndEnd(h, chunks);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.exhausted, 0, 'no window failed');
    assert.equal((await lastWindow(id)).status, 'transcribed');
    const job = (await closeOutJob(h, id)).job;
    assert.equal(job.error_count, 0, 'no retry spent');
    assert.ok(job.outage_waits >= 1, `outage waits counted: ${job.outage_waits}`);
    await passing.stop();

    // An outage the close-out's own path never sees pass: after its outage waits the close-out
    // goes on without that stretch, which is not failed but handed to a job of its own (J20, L6);
    // here that job's path is healthy, so its words come and revise the transcript (L19).
    h.spawnWorker({ VERBATIM_FAULTS: overloaded(1000) });
    const other = await streamAndEnd(h, chunks);
    const ended = await waitForMeeting(h, other);
    assert.equal(ended.status, 'complete');
    assert.equal(ended.windows.exhausted, 0, 'the last stretch was not given up');
    assert.equal((await closeOutJob(h, other)).job.outage_waits, OUTAGE_WAITS);
    const handedOff = await h.app.database.db
      .selectFrom('jobs')
      .select(['status'])
      .where('meeting_id', '=', other)
      .where('kind', '=', 'transcribe-window')
      .execute();
    assert.ok(handedOff.length >= 1, 'the last stretch went on in a job of its own');
    await waitFor('the handed-off stretch is transcribed', async () =>
      (await lastWindow(other)).status === 'transcribed' ? true : undefined,
    );
    const revised = await waitForMeeting(h, other);
    assert.equal(revised.windows.exhausted, 0);
    assert.equal(revised.windows.held, 0);
  } finally {
    await h.close();
  }
});

void it('L16/L19: a late chunk spliced into a window still in retry after publication is transcribed with that whole window, whose audio was kept; no piece of it fails audio.deleted (found by the 30-minute soak)', async () => {
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '0.2',
      VERBATIM_GAP_PATIENCE_SECONDS: '0',
    },
  });
  try {
    // Window 0 ([0, 8 s): chunk 0 and the start of chunk 1) meets a long speech outage, so the
    // meeting is published while it is in retry, with the rest of its audio deleted.
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries()) {
      if (seq !== 1) assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    }
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    await waitForMeeting(h, id);
    const db = h.app.database.db;
    const meeting = await db
      .selectFrom('meetings')
      .select(['audio_deleted_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.ok(meeting.audio_deleted_at, 'published with its settled audio deleted: a late chunk is spliced');
    const zero = await db
      .selectFrom('windows')
      .select(['status', 'end_ms'])
      .where('meeting_id', '=', id)
      .where('index', '=', 0)
      .executeTakeFirstOrThrow();
    assert.equal(zero.status, 'pending', 'window 0 is still in retry');
    assert.ok(zero.end_ms > 5000, 'window 0 reaches into chunk 1’s reserved stretch');

    // Chunk 1 arrives late, into the reserved stretch window 0 reaches into.
    assert.equal((await putChunk(h, id, 1, chunks[1]!)).status, 201);
    await waitFor(
      'the repair and every window settled',
      async () => {
        const open = await db
          .selectFrom('windows')
          .select('id')
          .where('meeting_id', '=', id)
          .where('status', '=', 'pending')
          .execute();
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const gaps = await db
          .selectFrom('timeline_gaps')
          .select('id')
          .where('meeting_id', '=', id)
          .where('arrived_at', 'is not', null)
          .execute();
        return open.length === 0 && gaps.length === 0 && m.transcript_revision >= 1;
      },
      120_000,
    );
    const shown = await db
      .selectFrom('windows')
      .select(['index', 'start_ms', 'end_ms', 'status', 'failure_code', 'segment_count'])
      .where('meeting_id', '=', id)
      .where('status', '<>', 'superseded')
      .orderBy('start_ms')
      .execute();
    assert.deepEqual(
      shown.filter((w) => w.failure_code === 'audio.deleted'),
      [],
      `no stretch lost its words to a deletion: ${JSON.stringify(shown)}`,
    );
    const first = shown.find((w) => w.start_ms === 0)!;
    assert.equal(first.status, 'transcribed', JSON.stringify(shown));
    assert.ok((first.segment_count ?? 0) > 0, 'the words of chunk 0 are in the transcript');
  } finally {
    await h.close();
  }
});

void it('L4/L16: a window still being attempted when the close-out stops waiting at its cap keeps its audio until it settles, so its words still reach the transcript, which is revised for them (L19) (found by the 30-minute simulation: such windows failed audio.deleted)', async () => {
  // A wait cap of 0: the close-out does not wait for windows in retry at all.
  const h = await startHarness({
    env: { ...LIVE_ENV, VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0', VERBATIM_RETRY_STEP_SECONDS: '0.2' },
  });
  try {
    // Window 0's own job meets a speech outage that lasts well past the close-out (its outage
    // waits double from 0.2 s to 6.4 s: about 40 s in all).
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['status', 'failure_code'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    assert.equal((await windowZero()).status, 'pending', 'the meeting completed while window 0 was in retry');
    const kept = await db
      .selectFrom('blobs')
      .select('id')
      .where('meeting_id', '=', id)
      .where('deleted_at', 'is', null)
      .execute();
    assert.ok(kept.length > 0, 'the audio under window 0 is kept');

    // The outage passes: window 0 is transcribed from the audio kept for it, then that audio goes.
    await waitFor('window 0 to settle', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.deepEqual(await windowZero(), { status: 'transcribed', failure_code: null });
    await waitFor(
      'the kept audio to be deleted',
      async () =>
        (
          await db
            .selectFrom('blobs')
            .select('id')
            .where('meeting_id', '=', id)
            .where('deleted_at', 'is', null)
            .execute()
        ).length === 0,
      60_000,
    );
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    const zeroSegments = await db
      .selectFrom('segments as s')
      .innerJoin('windows as w', 'w.id', 's.window_id')
      .select('s.text')
      .where('w.meeting_id', '=', id)
      .where('w.index', '=', 0)
      .execute();
    assert.ok(zeroSegments.length > 0, 'window 0 has its segments');
    for (const seg of zeroSegments)
      assert.ok(text.includes(seg.text.toLowerCase().trim()), `"${seg.text}" is in the transcript: ${text}`);

    // L19: the words came after publication, so the transcript is revised like a late chunk's
    // repair: a new revision each time late words land, meeting.transcript_revised naming the
    // windows, minutes rewritten from the last revision, and no window counted as still in flight.
    // (With a wait cap of 0 the windows that were simply running at publication are late too.)
    await waitFor(
      'the minutes of the revised transcript',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision', 'minutes_revision', 'minutes_status', 'untranscribed_in_flight'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return (
          m.transcript_revision >= 1 &&
          m.minutes_revision === m.transcript_revision &&
          m.minutes_status === 'written' &&
          m.untranscribed_in_flight === 0
        );
      },
      60_000,
    );
    const revision = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json as { revision: number };
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const payloads = revised
      .map((r) => r.payload as { meetingId: string; revision: number; lateWindows: number[] })
      .sort((a, b) => a.revision - b.revision);
    assert.deepEqual(
      payloads.map((p) => p.revision),
      Array.from({ length: revision.revision }, (_, k) => k + 1),
      'one event per revision, each revision once',
    );
    const named = payloads.flatMap((p) => p.lateWindows);
    assert.ok(named.includes(0), `window 0 is named as late: ${JSON.stringify(payloads)}`);
    assert.equal(new Set(named).size, named.length, 'no window is published twice');
    const stillMarked = await db
      .selectFrom('windows')
      .select('index')
      .where('meeting_id', '=', id)
      .where('pending_at_publication', '=', true)
      .execute();
    assert.deepEqual(stillMarked, [], 'every window marked at publication was published');
    const row = await db
      .selectFrom('meetings')
      .select(['untranscribed_in_flight', 'untranscribed_exhausted'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { untranscribed_in_flight: 0, untranscribed_exhausted: 0 });
  } finally {
    await h.close();
  }
});

void it('J13/L19: a resubmit after the transcript was published gives a window still in retry a job again, so its words still come and revise the transcript (before, it was left pending with no job and its audio deleted)', async () => {
  // The minutes wait out an outage, so the close-out is still waiting for them after it published.
  let chatBack = false;
  const chat = await startFakeChat(() => (chatBack ? 'ok' : '503'));
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '0.2',
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  try {
    const outage = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.overloaded',
        times: 10,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(outage) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['id', 'status'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    await waitFor(
      'the transcript to be published while window 0 is in retry',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['status', 'transcript_completed_at'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return m.transcript_completed_at !== null;
      },
      60_000,
    );
    assert.equal((await windowZero()).status, 'pending', 'published while window 0 was in retry');

    const resubmitted = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(resubmitted.status, 202, resubmitted.text);
    const w0 = await windowZero();
    const active = await db
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', '=', w0.id)
      .where('status', 'in', ['pending', 'running'])
      .execute();
    assert.equal(active.length, 1, `window 0 (${w0.status}) has a job again`);
    chatBack = true;
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    await waitFor('window 0 to settle', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.equal((await windowZero()).status, 'transcribed');
    await waitFor(
      'the minutes of the revised transcript',
      async () => {
        const m = await db
          .selectFrom('meetings')
          .select(['transcript_revision', 'minutes_revision', 'minutes_status', 'untranscribed_in_flight'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return (
          m.transcript_revision >= 1 &&
          m.minutes_revision === m.transcript_revision &&
          m.minutes_status === 'written' &&
          m.untranscribed_in_flight === 0
        );
      },
      60_000,
    );
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const named = revised.flatMap((r) => (r.payload as { lateWindows: number[] }).lateWindows);
    assert.ok(named.includes(0), `window 0 revised the transcript: ${JSON.stringify(named)}`);
  } finally {
    await h.close();
    await chat.close();
  }
});

void it('L5/L19: a window that fails after its transcript was published is counted as untranscribed in the same transaction, and revises nothing', async () => {
  const h = await startHarness({
    env: {
      ...LIVE_ENV,
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '0',
      VERBATIM_RETRY_STEP_SECONDS: '1',
      VERBATIM_TRANSCRIBE_MAX_ERRORS: '6',
    },
  });
  try {
    // Window 0's job meets errors that spend its retries (not an outage) a few times, so the
    // close-out publishes while it is in retry, and then one that can never pass (J20: errors that
    // may pass isolate a window, never fail it), so it fails for good after publication.
    const broken = [
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'transient',
        code: 'asr.bad_response',
        times: 3,
        match: { windowIndex: 0 },
      },
      {
        at: 'storage.get',
        action: 'throw',
        kind: 'permanent',
        code: 'asr.unsupported_audio',
        times: 100,
        match: { windowIndex: 0 },
      },
    ];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(broken) });
    const chunks = chunksOf(`${SPEECH} ${SPEECH}`);
    const id = await createLive(h);
    for (const [seq, chunk] of chunks.entries())
      assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length })).status, 202);
    const db = h.app.database.db;
    const windowZero = () =>
      db
        .selectFrom('windows')
        .select(['status', 'failure_code', 'pending_at_publication'])
        .where('meeting_id', '=', id)
        .where('index', '=', 0)
        .executeTakeFirstOrThrow();
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');
    assert.equal((await windowZero()).status, 'pending', 'the meeting completed while window 0 was in retry');

    await waitFor('window 0 to fail', async () => (await windowZero()).status !== 'pending', 120_000);
    assert.deepEqual(await windowZero(), {
      status: 'failed',
      failure_code: 'asr.unsupported_audio',
      pending_at_publication: false,
    });
    // Its failure and the new counts commit together: no moment shows it neither in flight nor failed.
    const m = await db
      .selectFrom('meetings')
      .select(['untranscribed_in_flight', 'untranscribed_exhausted', 'transcript_revision'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(m.untranscribed_in_flight, 0);
    assert.equal(m.untranscribed_exhausted, 1, 'the failed window is counted');
    const revised = await db
      .selectFrom('outbox')
      .select('payload')
      .distinct()
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    const named = revised.flatMap((r) => (r.payload as { lateWindows: number[] }).lateWindows);
    assert.ok(!named.includes(0), 'a window that failed revises nothing');
    assert.equal(revised.length, m.transcript_revision, 'one event per revision');
    const view = (await h.request('GET', `/v1/meetings/${id}`)).json as {
      untranscribedWhenAudioDeleted: { inFlight: number; exhausted: number } | null;
    };
    assert.deepEqual(view.untranscribedWhenAudioDeleted, { inFlight: 0, exhausted: 1 });
  } finally {
    await h.close();
  }
});
