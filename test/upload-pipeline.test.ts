import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  assertNoTokenLeaks,
  brokenWav,
  METRICS_AUTH,
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
  type WorkerProcess,
} from './support/harness.ts';

void describe('upload pipeline end to end', () => {
  let h: Harness;
  let worker: WorkerProcess;
  before(async () => {
    h = await startHarness({ env: { VERBATIM_MAX_UPLOAD_BYTES: String(2 * 1024 * 1024) } });
    worker = h.spawnWorker();
  });
  after(async () => {
    await h?.close();
  });

  void it('A7, E2: synthetic speech uploaded through the API comes back through real PocketSphinx, in sentences', async () => {
    const id = await uploadMeeting(h, speechWav(SPEECH), 'budget review');
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.windows.done, meeting.windows.total);
    assert.ok(meeting.windows.total >= 3, `expected several 3 s windows, got ${meeting.windows.total}`);
    const transcript = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    const text = transcript.text.toLowerCase();
    for (const word of ['budget', 'marketing', 'finance', 'friday']) {
      assert.ok(text.includes(word), `transcript lacks "${word}": ${text}`);
    }
    // E2: PocketSphinx gives neither case nor punctuation; the reader gets sentences, the raw words beside.
    const json = await h.request('GET', `/v1/meetings/${id}/transcript`);
    const lines = json.json.segments as Array<{ text: string; rawText: string; formatted: boolean }>;
    assert.ok(lines.length > 0 && lines.every((l) => l.formatted), 'every line formatted');
    assert.ok(
      lines.every((l) => /^[a-z' -]+$/.test(l.rawText)),
      'the raw text is the recogniser’s',
    );
    assert.match(lines[0]!.text, /^\p{Lu}/u, 'the first sentence starts with a capital');
    assert.match(lines.at(-1)!.text, /\.$/, 'the last sentence ends');
    assert.match(transcript.text, /[A-Z][a-z]/, 'the export reads the formatted text');
    assert.equal(meeting.minutes.status, 'written');
    assert.equal(meeting.minutes.content.writer, 'extractive');
    assert.match(meeting.minutes.content.note, /without a language model/);
    assert.ok(meeting.audioDeletedAt, 'audio is deleted once the meeting is complete');
    const blobs = await h.app.database.db
      .selectFrom('blobs')
      .select(['deleted_at'])
      .where('meeting_id', '=', id)
      .execute();
    assert.ok(blobs.length > 1 && blobs.every((b) => b.deleted_at !== null));
  });

  void it('L18: windows are contiguous, recorded, and cover the whole recording once', async () => {
    const rows = await h.app.database.db
      .selectFrom('windows')
      .innerJoin('meetings', 'meetings.id', 'windows.meeting_id')
      .select(['windows.start_ms', 'windows.end_ms', 'meetings.duration_ms'])
      .orderBy('windows.index')
      .execute();
    assert.ok(rows.length > 1);
    assert.equal(rows[0]!.start_ms, 0);
    for (let i = 1; i < rows.length; i++) assert.equal(rows[i]!.start_ms, rows[i - 1]!.end_ms);
    assert.ok(Math.abs(rows[rows.length - 1]!.end_ms - rows[0]!.duration_ms!) <= 1);
  });

  void it('J17: every transition of the meeting, its jobs and attempts is in the audit trail', async () => {
    const db = h.app.database.db;
    const meeting = await db.selectFrom('meetings').select('id').executeTakeFirstOrThrow();
    const trail = await db
      .selectFrom('audit_events')
      .select(['from_status', 'to_status', 'actor'])
      .where('subject_id', '=', meeting.id)
      .where('subject_type', '=', 'meeting')
      .orderBy('id')
      .execute();
    const moves = trail
      .filter((t) => !t.to_status.startsWith('minutes:') && !t.to_status.startsWith('audio:'))
      .map((t) => `${t.from_status ?? '∅'}>${t.to_status}`);
    assert.deepEqual(moves, [
      '∅>created',
      'created>processing',
      'processing>finalizing',
      'finalizing>complete',
    ]);
    assert.ok(trail.every((t) => t.actor.length > 0));
    const jobs = await db.selectFrom('jobs').select(['id', 'status']).execute();
    assert.ok(jobs.length >= 3, 'split, windows, close-out, minutes');
    for (const job of jobs) {
      const jobTrail = await db
        .selectFrom('audit_events')
        .select(['from_status', 'to_status', 'actor', 'at'])
        .where('subject_id', '=', job.id)
        .orderBy('id')
        .execute();
      // Created, claimed and completed, each from the status the one before left it in.
      assert.equal(jobTrail[0]!.from_status, null, 'the first row is its creation');
      for (let i = 1; i < jobTrail.length; i++) {
        assert.equal(jobTrail[i]!.from_status, jobTrail[i - 1]!.to_status, 'a chain of moves, none missing');
        assert.ok(jobTrail[i]!.at >= jobTrail[i - 1]!.at, 'in time order');
      }
      assert.equal(jobTrail.at(-1)!.to_status, job.status, 'the trail ends where the job is');
      assert.ok(jobTrail.length >= 3, 'created, claimed and completed are audited');
      // Each attempt's outcome is audited too, by whom and when it ended.
      const attempts = await db
        .selectFrom('job_attempts')
        .select(['id', 'status'])
        .where('job_id', '=', job.id)
        .execute();
      assert.ok(attempts.length >= 1);
      for (const a of attempts) {
        const rows = await db
          .selectFrom('audit_events')
          .select(['from_status', 'to_status', 'actor', 'at'])
          .where('subject_type', '=', 'attempt')
          .where('subject_id', '=', a.id)
          .orderBy('id')
          .execute();
        assert.deepEqual(
          rows.map((r) => `${r.from_status}>${r.to_status}`),
          ['null>running', `running>${a.status}`],
          'the attempt started and ended once, both audited',
        );
        assert.ok(rows.every((r) => r.actor.length > 0));
        assert.ok(rows[1]!.at >= rows[0]!.at, 'ended after it started');
      }
    }
  });

  void it('O1/O2: meeting.transcribed went through the outbox to the minutes consumer exactly once', async () => {
    const db = h.app.database.db;
    // The webhooks consumer gets its own rows (O3); this is about the minutes consumer.
    const events = await db.selectFrom('outbox').selectAll().where('consumer', '=', 'minutes').execute();
    assert.equal(events.length, 1);
    assert.equal(events[0]!.event_type, 'meeting.transcribed');
    assert.equal(events[0]!.status, 'delivered');
    const minutesJobs = await db
      .selectFrom('jobs')
      .select('status')
      .where('kind', '=', 'write-minutes')
      .execute();
    assert.deepEqual(
      minutesJobs.map((j) => j.status),
      ['completed'],
    );
  });

  void it('S2: bad input gets a clear 4xx and nothing stored is lost', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'bad input' });
    const id = created.json.id as string;

    const unknown = await h.request('GET', '/v1/meetings/00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, 'meeting.not_found');
    assert.equal((await h.request('GET', '/v1/meetings/not-a-uuid')).status, 404);

    const notAudio = await h.request('PUT', `/v1/meetings/${id}/recording`, Buffer.from('hello'), {
      'content-type': 'text/plain',
    });
    assert.equal(notAudio.status, 415);
    assert.match(notAudio.json.error.message, /audio\/wav/);
    assert.match(notAudio.json.error.message, /audio\/mpeg/);

    const big = Buffer.alloc(3 * 1024 * 1024, 1);
    const tooBig = await h.request('PUT', `/v1/meetings/${id}/recording`, big, {
      'content-type': 'audio/wav',
    });
    assert.equal(tooBig.status, 413);

    const malformed = await h.api.inject({
      method: 'POST',
      url: '/v1/meetings',
      headers: { authorization: `Bearer ${h.apiKey}`, 'content-type': 'application/json' },
      payload: '{"source": ',
    });
    assert.equal(malformed.statusCode, 400);
    const badSource = await h.request('POST', '/v1/meetings', { source: 'fax', title: 'x' });
    assert.equal(badSource.status, 400);
    assert.equal(badSource.json.error.code, 'meeting.source');
    const noKey = await h.api.inject({ method: 'GET', url: `/v1/meetings/${id}` });
    assert.equal(noKey.statusCode, 401);

    // The meeting survived every rejected request untouched.
    const still = await h.request('GET', `/v1/meetings/${id}`);
    assert.equal(still.json.status, 'created');
  });

  void it('S2: an undecodable recording fails the meeting with audio.undecodable', async () => {
    const id = await uploadMeeting(h, brokenWav(), 'garbage');
    const meeting = await waitForMeeting(h, id, 'failed');
    assert.equal(meeting.failure.code, 'audio.undecodable');
    assert.match(meeting.failure.message, /This meeting stopped before it finished/);
    // Its audio goes right after the failure is recorded (a step of its own, not the same commit).
    await waitFor('the failed meeting’s audio to be deleted', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.audioDeletedAt ? m : null;
    });
  });

  void it('S1: another workspace cannot see or touch a meeting', async () => {
    const first = await h.app.database.db.selectFrom('meetings').select('id').executeTakeFirstOrThrow();
    const other = await h.app.workspaces.createWorkspace('other');
    const { apiKey } = await h.app.workspaces.createApiKey(other, 'other');
    const auth = { authorization: `Bearer ${apiKey}` };
    for (const [method, url] of [
      ['GET', `/v1/meetings/${first.id}`],
      ['GET', `/v1/meetings/${first.id}/transcript`],
      ['POST', `/v1/meetings/${first.id}/minutes`],
    ] as const) {
      const res = await h.api.inject({ method, url, headers: auth });
      assert.equal(res.statusCode, 404, `${method} ${url}`);
    }
    const put = await h.api.inject({
      method: 'PUT',
      url: `/v1/meetings/${first.id}/recording`,
      headers: { ...auth, 'content-type': 'audio/wav' },
      payload: Buffer.alloc(100),
    });
    assert.equal(put.statusCode, 404);
    // An encoded path reaches the same route and needs the same key.
    for (const url of [`/%761/meetings/${first.id}`, '/v%31/meetings']) {
      const res = await h.api.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 401, url);
    }
    const list = await h.api.inject({ method: 'GET', url: '/v1/meetings', headers: auth });
    assert.deepEqual(JSON.parse(list.body).meetings, []);
  });

  void it('X2: /metrics reports queue age, reclaims, quarantines, outages, outbox and cleanup backlog', async () => {
    const res = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
    assert.equal(res.statusCode, 200);
    for (const line of [
      /verbatim_queue_oldest_pending_age_seconds\{queue="transcription"\} \d/,
      /verbatim_queue_pending_jobs\{queue="minutes"\} 0/,
      /verbatim_leases_reclaimed_total 0/,
      /verbatim_jobs_quarantined_total 0/,
      /verbatim_minutes_outages_in_progress 0/,
      /verbatim_outbox_pending 0/,
      /verbatim_cleanup_backlog_blobs 0/,
      /verbatim_workers_alive 1/,
      /verbatim_scrape_ok 1/,
    ]) {
      assert.match(res.body, line);
    }
    const health = await h.api.inject({ method: 'GET', url: '/healthz' });
    assert.deepEqual(JSON.parse(health.body), { status: 'ok', database: 'ok' });
  });

  void it('A8/J12: no lease token appears in API responses or logs', async () => {
    const checked = await assertNoTokenLeaks(h);
    assert.ok(checked > 3, 'there were attempts whose tokens were checked');
    assert.ok(worker.output().length > 0, 'worker output was captured');
  });
});
