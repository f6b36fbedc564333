import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import {
  assertNoTokenLeaks,
  METRICS_AUTH,
  SPEECH,
  speechWav,
  spawnVerbatim,
  startHarness,
  supervise,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';
import { processOfClientPort } from './support/socket-owner.ts';
import { LIVE_ENV, chunksOf, streamAndEnd } from './support/live.ts';

/**
 * J20: no innocent window is given up. A window whose worker keeps dying is isolated (run alone,
 * in a process of its own, on a slow backoff) and transcribed in the end; one that kills its
 * runner every time is poison, and its audio is held until the retention bound.
 */

const wav = speechWav(SPEECH);

async function windowJobAttempts(h: Harness, jobId: string) {
  return h.app.database.db
    .selectFrom('job_attempts')
    .select(['status', 'error_code', 'owner'])
    .where('job_id', '=', jobId)
    .orderBy('attempt_no')
    .execute();
}

async function metricsText(h: Harness): Promise<string> {
  return (await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH })).body;
}

/**
 * An OpenAI-compatible transcription server that SIGKILLs the process asking for one window
 * (the first window it is asked for) while the request is in flight, `kills` times, then answers
 * it once `release` resolves; every other window is answered at once. The process asking is
 * found from the connection (test/support/socket-owner.ts): the worker in the ordinary lane, its
 * isolated runner once the window is isolated.
 */
async function startKillingWhisper(kills: number, release: Promise<void>) {
  let target: string | null = null;
  const killed: Array<{ pid: number; isolated: boolean }> = [];
  let answered = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const riff = body.indexOf('RIFF');
      // The window's WAV itself (its RIFF header gives its length), not the multipart around it.
      const wavLength = body.readUInt32LE(riff + 4) + 8;
      const key = createHash('sha1')
        .update(body.subarray(riff, riff + wavLength))
        .digest('hex');
      const ok = (text: string) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            text,
            duration: 2,
            segments: [{ id: 0, start: 0.1, end: 1.5, text: ` ${text}` }],
          }),
        );
      target ??= key;
      if (key !== target) {
        ok(`window ${key.slice(0, 6)}`);
        return;
      }
      if (killed.length < kills) {
        const pid = processOfClientPort(req.socket.remotePort!, (server.address() as AddressInfo).port);
        assert.ok(pid, 'the process asking is found');
        const cmdline = readCmdline(pid);
        killed.push({ pid, isolated: cmdline.includes('isolated-run') });
        process.kill(pid, 'SIGKILL');
        return;
      }
      void release.then(() => {
        answered = true;
        ok('the held stretch came back');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    killed: () => killed,
    answered: () => answered,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function readCmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

void it('J20: a window whose worker is SIGKILLed mid-recognition five times in a row is transcribed in the end, spliced in with a revision after its meeting completed', async () => {
  let releaseAnswer!: () => void;
  const release = new Promise<void>((resolve) => (releaseAnswer = resolve));
  const whisper = await startKillingWhisper(5, release);
  const h = await startHarness({
    env: {
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: whisper.url,
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
      // The defaults: three reclaims, then the isolated lane; three runner deaths in a row are poison.
      VERBATIM_MAX_RECLAIMS: '3',
      VERBATIM_POISON_RUNNER_DEATHS: '3',
      // Shorter than the default (a minute), but long enough for the meeting to complete meanwhile
      // on a loaded machine: a held window does not hold an upload back, a running one does.
      VERBATIM_ISOLATION_BACKOFF_SECONDS: '20',
      VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS: '4',
    },
  });
  const sup = supervise(h, {});
  try {
    const id = await uploadMeeting(h, wav);
    await waitFor(
      () => `five kills mid-recognition (so far ${JSON.stringify(whisper.killed())})`,
      async () => whisper.killed().length >= 5,
      120_000,
    );
    const killed = whisper.killed();
    assert.deepEqual(
      killed.map((k) => k.isolated),
      [false, false, false, false, true],
      'four times the worker (three reclaims, then the cap), the fifth its isolated runner',
    );
    // The meeting completes meanwhile, with the gap shown; the words are not there yet.
    const done = await waitForMeeting(h, id);
    assert.equal(whisper.answered(), false);
    assert.equal(done.windows.held + done.windows.inFlight, 1, JSON.stringify(done.windows));
    assert.equal(done.windows.exhausted, 0, 'nothing was given up');
    const before = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    assert.doesNotMatch(before.text, /held stretch came back/);
    if (done.windows.held === 1) assert.match(done.heldAudio.message, /1 stretch awaiting transcription/);
    const revisionAtCompletion = done.revision as number;

    releaseAnswer();
    const revised = await waitFor('the late words spliced in', async () => {
      const m = await h.request('GET', `/v1/meetings/${id}`);
      return m.json.revision > revisionAtCompletion && m.json.windows.done === m.json.windows.total
        ? m.json
        : null;
    });
    const after = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    assert.match(after.text, /held stretch came back/);
    assert.equal(revised.heldAudio, null);
    const db = h.app.database.db;
    const event = await db
      .selectFrom('outbox')
      .select('payload')
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .executeTakeFirst();
    assert.ok(event, 'meeting.transcript_revised was published');
    await waitFor('the minutes rewritten for the revision', async () => {
      const m = await h.request('GET', `/v1/meetings/${id}`);
      return m.json.minutes.revision === m.json.revision && m.json.minutes.status === 'written';
    });

    const job = await db
      .selectFrom('jobs')
      .selectAll()
      .where('meeting_id', '=', id)
      .where('kind', '=', 'transcribe-window')
      .where('isolated_at', 'is not', null)
      .executeTakeFirstOrThrow();
    assert.equal(job.status, 'completed');
    assert.equal(job.isolation_reason, 'reclaim_cap_exceeded');
    const attempts = await windowJobAttempts(h, job.id);
    assert.deepEqual(
      attempts.map((a) => `${a.status}:${a.error_code ?? ''}`),
      [
        'lease_expired:lease_expired',
        'lease_expired:lease_expired',
        'lease_expired:lease_expired',
        'lease_expired:lease_expired',
        'lease_expired:runner_died',
        'completed:',
      ],
    );
    assert.match(attempts[4]!.owner, /\/isolated-/);
    assert.match(attempts[5]!.owner, /\/isolated-/, 'the last run was alone, in a runner of its own');
    // No stretch holds audio any more: every object of the meeting goes to deletion.
    await waitFor('the audio deleted once nothing is held', async () => {
      const live = await db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      return live.length === 0;
    });
    await assertNoTokenLeaks(h);
  } finally {
    releaseAnswer();
    await sup.stop();
    await h.close();
    await whisper.close();
  }
});

void it('J20: a window that kills its runner every time is declared poison after its isolated runs; its meeting completes with the gap shown and its audio is held with a signal, deleted only at the retention bound (audited)', async () => {
  const h = await startHarness({
    env: {
      VERBATIM_MAX_RECLAIMS: '2',
      VERBATIM_POISON_RUNNER_DEATHS: '3',
      VERBATIM_ISOLATION_BACKOFF_SECONDS: '0.3',
      VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
    },
  });
  // Window 1 kills whichever process runs it, every time: a worker, then its isolated runners.
  const faults = JSON.stringify([
    { at: 'transcribe-window.after-claim', action: 'kill', match: { windowIndex: 1 } },
  ]);
  let sup = supervise(h, { VERBATIM_FAULTS: faults });
  try {
    const id = await uploadMeeting(h, wav);
    // The meeting completes while the window is held between its isolated runs (it does not
    // wait for it), then the window is declared poison.
    await waitForMeeting(h, id, 'complete', 180_000);
    const db = h.app.database.db;
    const job = await waitFor('the window declared poison', () =>
      db
        .selectFrom('jobs')
        .selectAll()
        .where('meeting_id', '=', id)
        .where('kind', '=', 'transcribe-window')
        .where('status', '=', 'failed')
        .executeTakeFirst(),
    );
    const meeting = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.equal(meeting.status, 'complete');
    assert.equal(meeting.windows.exhausted, 1, JSON.stringify(meeting.windows));
    assert.equal(meeting.windows.done, meeting.windows.total - 1);
    assert.equal(meeting.heldAudio.failed, 1);
    assert.match(
      meeting.heldAudio.message,
      /1 stretch could not be transcribed; the audio is kept until \d{4}-/,
    );
    assert.equal(job.last_error_code, 'poison');
    assert.equal(job.isolated_runs, 3);
    assert.equal(job.runner_deaths, 3);
    const attempts = await windowJobAttempts(h, job.id);
    assert.deepEqual(
      attempts.map((a) => `${a.status}:${a.error_code}`),
      [
        'lease_expired:lease_expired',
        'lease_expired:lease_expired',
        'lease_expired:lease_expired',
        'lease_expired:runner_died',
        'lease_expired:runner_died',
        'lease_expired:runner_died',
      ],
    );
    const window = await db
      .selectFrom('windows')
      .selectAll()
      .where('meeting_id', '=', id)
      .where('index', '=', 1)
      .executeTakeFirstOrThrow();
    assert.equal(window.status, 'failed');
    assert.equal(window.failure_code, 'poison');
    // Its audio is held (every other window's is deleted), and the operator is told.
    await waitFor('the other windows’ audio handed to deletion', async () => {
      const live = await db
        .selectFrom('blobs')
        .select('id')
        .where('meeting_id', '=', id)
        .where('deleted_at', 'is', null)
        .execute();
      return live.length === 1 && live[0]!.id === window.blob_id;
    });
    const metrics = await metricsText(h);
    assert.match(metrics, /verbatim_held_stretches 1\b/);
    assert.match(metrics, /verbatim_jobs_poison_total 1\b/);
    assert.match(metrics, /verbatim_jobs_quarantined_total 1\b/);
    const status = spawnVerbatim(['status'], h.env());
    assert.equal(await status.exited, 0);
    assert.match(status.output(), /held stretches 1 /);
    assert.match(status.output(), /poison 1\b/);
    const inspect = spawnVerbatim(['inspect', id], h.env());
    assert.equal(await inspect.exited, 0);
    assert.match(inspect.output(), /#1 .* failed poison HELD: audio kept for a resubmit/);
    assert.match(inspect.output(), /isolated=reclaim_cap_exceeded .* runs=3 runner_deaths=3/);
    assert.match(inspect.output(), /runner_died: its isolated runner was killed by SIGKILL/);
    // J16: the dead-letter listing shows the poison job with its attempt history.
    const deadLetters = spawnVerbatim(['dead-letters'], h.env());
    assert.equal(await deadLetters.exited, 0);
    assert.match(deadLetters.output(), /1 dead letters/);
    assert.match(deadLetters.output(), /transcribe-window window #1 status=failed .*last_error=poison/);
    assert.match(deadLetters.output(), /attempt 6 lease_expired .*runner_died/);

    // The retention bound (7 days by default) passes: the held audio is deleted, audited.
    await sup.stop();
    sup = supervise(h, { VERBATIM_FAULTS: faults, VERBATIM_HELD_AUDIO_DAYS: '0.00001' });
    await waitFor('the held audio deleted at its retention bound', async () => {
      const blob = await db
        .selectFrom('blobs')
        .select('deleted_at')
        .where('id', '=', window.blob_id!)
        .executeTakeFirstOrThrow();
      return blob.deleted_at !== null;
    });
    const released = await db
      .selectFrom('windows')
      .select('audio_released_at')
      .where('id', '=', window.id)
      .executeTakeFirstOrThrow();
    assert.ok(released.audio_released_at);
    const trail = await db
      .selectFrom('audit_events')
      .select(['to_status', 'actor', 'reason'])
      .where('subject_id', '=', id)
      .orderBy('id')
      .execute();
    assert.ok(
      trail.some(
        (a) =>
          a.actor === 'sweep:audio-retention' &&
          /held stretch\(es\) given up.*retention/.test(a.reason ?? ''),
      ),
      JSON.stringify(trail),
    );
    assert.ok(
      trail.some((a) => a.to_status === 'audio:deleted' && /past their retention bound/.test(a.reason ?? '')),
    );
    assert.match(await metricsText(h), /verbatim_held_stretches 0\b/);
    await assertNoTokenLeaks(h);
  } finally {
    await sup.stop();
    await h.close();
  }
});

void it('J20/L6: a last stretch the close-out cannot transcribe for an error that may pass is not given up: it goes on in a job of its own and its words are spliced in', async () => {
  const h = await startHarness({ env: LIVE_ENV });
  try {
    // A plain Error is unclassified: it may pass. Once, in the close-out's own recognition (the
    // last stretch, cut at End, is the only audio the close-out transcribes itself here).
    const fault = [{ at: 'close-out-meeting.transcribe-directly', action: 'throw', times: 1 }];
    h.spawnWorker({ VERBATIM_FAULTS: JSON.stringify(fault) });
    const id = await streamAndEnd(h, chunksOf(`${SPEECH} ${SPEECH}`));
    await waitForMeeting(h, id);
    const meeting = await waitFor('every window transcribed, the last stretch after all', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.windows.done === m.windows.total ? m : null;
    });
    assert.equal(meeting.windows.exhausted, 0, 'no window was given up');
    assert.match(h.logs(), /close-out could not transcribe a window; it goes on in a job of its own/);
    const db = h.app.database.db;
    const closeOut = await db
      .selectFrom('jobs')
      .select('created_at')
      .where('meeting_id', '=', id)
      .where('kind', '=', 'close-out-meeting')
      .executeTakeFirstOrThrow();
    // The job the close-out made for the stretch it could not transcribe: it has the words.
    const handed = await db
      .selectFrom('jobs')
      .innerJoin('windows', 'windows.id', 'jobs.subject_id')
      .select(['jobs.status', 'windows.status as window_status', 'windows.segment_count'])
      .where('jobs.meeting_id', '=', id)
      .where('jobs.kind', '=', 'transcribe-window')
      .where('jobs.created_at', '>', closeOut.created_at)
      .execute();
    assert.equal(handed.length, 1);
    assert.equal(handed[0]!.status, 'completed');
    assert.equal(handed[0]!.window_status, 'transcribed');
  } finally {
    await h.close();
  }
});
