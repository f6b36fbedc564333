import assert from 'node:assert/strict';
import { it } from 'node:test';
import { startCloseOutIfSettled } from '../src/meetings/close-out-start.ts';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import { planWindows } from '../src/domain/audio-windows.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  supervise,
  uploadMeeting,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

/** The windows an uninterrupted split cuts from `wav` under `h`'s settings: [index, start ms, end ms]. */
async function uninterruptedWindows(h: Harness, wav: Buffer): Promise<Array<[number, number, number]>> {
  const audio = await new FfmpegAudioDecoder().decode(wav);
  const config = h.app.deps.config;
  const ms = (samples: number) => Math.round((samples * 1000) / audio.sampleRate);
  return planWindows(audio.samples, audio.sampleRate, config.windowMs / 1000, {
    searchSeconds: config.boundarySearchMs / 1000,
  }).map((w) => [w.index, ms(w.startSample), ms(w.endSample)]);
}

void it('J19: a split SIGKILLed after k windows were committed resumes at window k+1: every window exactly once, boundaries identical to an uninterrupted split', async () => {
  const h = await startHarness();
  try {
    const wav = speechWav(`${SPEECH} ${SPEECH}`);
    const audio = await new FfmpegAudioDecoder().decode(wav);
    const expected = await uninterruptedWindows(h, wav);
    assert.ok(expected.length >= 6, `enough windows to be killed among them: ${expected.length}`);

    // The first worker dies right after committing window 2 (k = 3 windows); the supervisor starts
    // another, which must resume at window 3.
    const k = 3;
    const sup = supervise(h, {
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'split.window-committed', action: 'kill', times: 1, match: { windowIndex: k - 1 } },
      ]),
    });
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id);
    await sup.stop();
    assert.equal(sup.starts(), 2, 'the first worker was killed and a second one finished the split');
    assert.equal(meeting.status, 'complete');

    const db = h.app.database.db;
    const windows = await db
      .selectFrom('windows')
      .select(['id', 'index', 'start_ms', 'end_ms', 'status'])
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    assert.deepEqual(
      windows.map((w) => [w.index, w.start_ms, w.end_ms]),
      expected,
      'the same windows as a split of the whole recording, each once',
    );
    assert.ok(windows.every((w) => w.status === 'transcribed'));
    // One transcription job per window: nothing was cut or queued twice.
    const jobs = await db
      .selectFrom('jobs')
      .select(['subject_id'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'transcribe-window')
      .execute();
    assert.equal(jobs.length, windows.length);
    assert.equal(new Set(jobs.map((j) => j.subject_id)).size, windows.length);
    // The split ran twice: the killed attempt's lease expired, the second resumed after k windows.
    const attempts = await db
      .selectFrom('job_attempts')
      .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
      .select(['job_attempts.status'])
      .where('jobs.meeting_id', '=', id)
      .where('jobs.kind', '=', 'split-recording')
      .orderBy('job_attempts.attempt_no')
      .execute();
    assert.deepEqual(
      attempts.map((a) => a.status),
      ['lease_expired', 'completed'],
    );
    assert.match(h.logs(), new RegExp(`"windows":${k}[,}].*split resumes after its committed windows`));
    // Every window's object is referenced once; no staged object was left behind by the kill.
    const blobs = await db
      .selectFrom('blobs')
      .select(['kind'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'window')
      .execute();
    assert.equal(blobs.length, windows.length);
    const staged = await db
      .selectFrom('object_cleanups')
      .select('object_key')
      .where('meeting_id', '=', id)
      .where('state', '=', 'staged')
      .execute();
    assert.deepEqual(staged, []);
    const duration = await db
      .selectFrom('meetings')
      .select('duration_ms')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(duration.duration_ms, Math.round((audio.samples.length * 1000) / audio.sampleRate));
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    assert.ok(text.split('budget').length - 1 >= 2, text);
  } finally {
    await h.close();
  }
});

void it('J19/J13: a resubmitted meeting whose split stopped partway gets its split again, which resumes after the committed windows; the meeting completes', async () => {
  const h = await startHarness();
  try {
    const wav = speechWav(`${SPEECH} ${SPEECH}`);
    const db = h.app.database.db;
    // A worker dies right after committing window 1, and nothing restarts it.
    const doomed = h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        { at: 'split.window-committed', action: 'kill', times: 1, match: { windowIndex: 1 } },
      ]),
    });
    const id = await uploadMeeting(h, wav);
    await doomed.exited;
    const before = await db.selectFrom('windows').select('index').where('meeting_id', '=', id).execute();
    assert.equal(before.length, 2, 'two windows were committed before the kill');
    const stuck = await db
      .selectFrom('meetings')
      .select(['status', 'windows_cut_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual([stuck.status, stuck.windows_cut_at], ['processing', null]);

    // The operator resubmits at once (before the dead split's lease runs out).
    const resubmitted = await h.request('POST', `/v1/meetings/${id}/resubmit`);
    assert.equal(resubmitted.status, 202, resubmitted.text);
    const splits = await db
      .selectFrom('jobs')
      .select(['status'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'split-recording')
      .orderBy('created_at')
      .execute();
    assert.deepEqual(
      splits.map((j) => j.status),
      ['superseded', 'pending'],
      'the split is asked for again',
    );

    h.spawnWorker();
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
    const expected = await uninterruptedWindows(h, wav);
    const windows = await db
      .selectFrom('windows')
      .select(['index', 'start_ms', 'end_ms', 'status'])
      .where('meeting_id', '=', id)
      .orderBy('index')
      .execute();
    assert.deepEqual(
      windows.map((w) => [w.index, w.start_ms, w.end_ms, w.status]),
      expected.map((w) => [...w, 'transcribed']),
    );
    const text = (await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`)).text.toLowerCase();
    assert.ok(text.split('budget').length - 1 >= 2, text);
  } finally {
    await h.close();
  }
});

void it('J19: a split that fails for good after committing windows ends their transcription jobs with the meeting, in the same transaction', async () => {
  const h = await startHarness();
  try {
    const wav = speechWav(`${SPEECH} ${SPEECH}`);
    const db = h.app.database.db;
    h.spawnWorker({
      VERBATIM_FAULTS: JSON.stringify([
        // The split breaks for good right after window 1 is committed with its job.
        {
          at: 'split.window-committed',
          action: 'throw',
          kind: 'permanent',
          code: 'test.split_broke',
          match: { windowIndex: 1 },
        },
        // Transcription is slow, so the windows' jobs are still active when the split fails.
        { at: 'transcribe-window.before-commit', action: 'delay', ms: 5000, times: 100 },
      ]),
    });
    const id = await uploadMeeting(h, wav);
    const meeting = await waitForMeeting(h, id, 'failed');
    assert.equal(meeting.failure.code, 'test.split_broke');
    const jobs = await db
      .selectFrom('jobs')
      .select(['status'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'transcribe-window')
      .execute();
    assert.equal(jobs.length, 2, 'the two windows cut before the failure had jobs');
    assert.deepEqual(
      jobs.map((j) => j.status),
      ['canceled', 'canceled'],
      'ended with the meeting, not left to transcribe for it',
    );
    const windows = await db.selectFrom('windows').select('status').where('meeting_id', '=', id).execute();
    assert.ok(windows.every((w) => w.status !== 'transcribed'));
  } finally {
    await h.close();
  }
});

void it('J19: the close-out waits for an upload’s split while its job is pending or running, and not after it (a split by an earlier release completes without marking the meeting)', async () => {
  const h = await startHarness();
  try {
    const db = h.app.database.db;
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'gate' });
    const id = created.json.id as string;
    await db.updateTable('meetings').set({ status: 'processing' }).where('id', '=', id).execute();
    const split = await db
      .insertInto('jobs')
      .values({
        id: crypto.randomUUID(),
        workspace_id: h.workspaceId,
        kind: 'split-recording',
        queue: 'intake',
        subject_type: 'meeting',
        subject_id: id,
        meeting_id: id,
        dedupe_key: `split-recording:${id}`,
        status: 'running',
        payload: JSON.stringify({ meetingId: id }),
        max_errors: 3,
        max_reclaims: 3,
        delivery_id: crypto.randomUUID(),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const start = () =>
      db.transaction().execute((trx) => startCloseOutIfSettled(h.app.deps, trx, id, 'test'));
    assert.equal(await start(), 'not_started', 'a split still running: its windows are not all cut');
    await db.updateTable('jobs').set({ status: 'completed' }).where('id', '=', split.id).execute();
    assert.equal(await start(), 'started', 'the split is over, though it did not set windows_cut_at');
  } finally {
    await h.close();
  }
});
