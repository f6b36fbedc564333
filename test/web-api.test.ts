import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApi } from '../src/api/server.ts';
import { meetingProgress, plainReason, type ProgressInput } from '../src/domain/meeting-progress.ts';
import { Downsampler } from '../web/src/audio/resample.ts';
import { encodeWav } from '../web/src/audio/wav.ts';
import { chunkOutcome, endOutcome, type Answer } from '../web/src/outbox/answers.ts';
import { parseWav } from '../src/domain/wav.ts';
import { brokenWav, startHarness, uploadMeeting, waitForMeeting, type Harness } from './support/harness.ts';

/** What the web app (issue 6) needs from the API, and the app's pure audio code, without a browser. */

const base: ProgressInput = {
  status: 'finalizing',
  source: 'live',
  finalizingAt: new Date('2026-01-01T00:00:00Z'),
  transcriptCompletedAt: null,
  minutesStatus: 'none',
  windows: { total: 4, done: 2, inFlight: 0 },
};
const at = (ms: number) => new Date(base.finalizingAt!.getTime() + ms);

void describe('close-out progress and reasons (pure)', () => {
  void it('L17: a finalizing meeting names the close-out step it is in', () => {
    assert.equal(meetingProgress(base, at(500), 10_000)?.stage, 'grace');
    assert.equal(
      meetingProgress({ ...base, windows: { total: 4, done: 2, inFlight: 2 } }, at(20_000), 10_000)?.message,
      'Waiting on 2 windows still being transcribed.',
    );
    assert.equal(meetingProgress(base, at(20_000), 10_000)?.stage, 'last_stretch');
    const transcribed = { ...base, transcriptCompletedAt: at(30_000) };
    assert.equal(
      meetingProgress({ ...transcribed, minutesStatus: 'pending' }, at(40_000), 10_000)?.stage,
      'writing_minutes',
    );
    assert.equal(
      meetingProgress({ ...transcribed, minutesStatus: 'written' }, at(40_000), 10_000)?.stage,
      'finishing',
    );
    assert.equal(meetingProgress({ ...base, status: 'complete' }, at(0), 10_000), null);
    assert.equal(meetingProgress({ ...base, status: 'failed' }, at(0), 10_000), null);
    assert.equal(
      meetingProgress({ ...base, status: 'processing' }, at(0), 10_000)?.message,
      'Transcribing: 2 of 4 windows done.',
    );
  });

  void it('L17/E5: failure and missing-minutes codes are said in plain words with what to do, never in a provider’s words', () => {
    assert.match(plainReason('llm.quota_exhausted', 'You exceeded your current quota'), /Regenerate/);
    const undecodable = plainReason(
      'audio.undecodable',
      'This meeting stopped before it finished: file:input: Invalid data found when processing input',
    );
    assert.match(
      undecodable,
      /^This meeting failed: the recording could not be read as audio\. The file may be damaged/,
    );
    assert.doesNotMatch(undecodable, /file:input|Invalid data/, "E5: the decoder's words are not a person's");
    assert.match(plainReason('reclaim_cap_exceeded', null), /stopped again and again/);
    // A failed meeting's audio is deleted and resubmission needs it: no reason promises one.
    for (const code of ['reclaim_cap_exceeded', 'asr.timeout', 'storage.unavailable'])
      assert.doesNotMatch(plainReason(code, 'x'), /resubmit/i, code);
    assert.doesNotMatch(plainReason('minutes.no_transcript', null), /Regenerate/);
    // E5: a provider's own words stay with operators; the reason is said from the code.
    const asr = plainReason('asr.timeout', 'upstream: 504 Gateway Time-out from 10.0.0.7');
    assert.match(asr, /speech recognition did not succeed \(the recogniser took too long\)/);
    assert.doesNotMatch(asr, /504|10\.0\.0\.7|upstream/);
    assert.match(
      plainReason('storage.unavailable', 'ECONNREFUSED 127.0.0.1:9000'),
      /^This meeting failed: the audio store/,
    );
    assert.doesNotMatch(plainReason('storage.unavailable', 'ECONNREFUSED 127.0.0.1:9000'), /ECONNREFUSED/);
    assert.equal(
      plainReason('something.new', 'it broke'),
      'This stopped with the code something.new. An operator can see the details with `verbatim inspect`.',
    );
  });
});

void describe('the outbox: what each answer does to a chunk or an End (pure)', () => {
  const a = (status: number, code: string | null = null, body: unknown = null): Answer => ({
    status,
    code,
    body,
  });
  const err = (status: number, code: string) => a(status, code, { error: { code, message: 'm' } });

  void it('L1: a chunk is deleted only on a 2xx that names the same seq', () => {
    assert.equal(chunkOutcome(3, a(201, null, { seq: 3, created: true })), 'acknowledged');
    assert.equal(chunkOutcome(3, a(200, null, { seq: 3, created: false })), 'acknowledged');
    assert.equal(chunkOutcome(3, a(200, null, { seq: 4 })), 'retry', 'another chunk acknowledged');
    assert.equal(chunkOutcome(3, a(200, null, null)), 'retry', "a proxy's 200 page");
    assert.equal(chunkOutcome(3, a(0)), 'unreachable');
  });

  void it('L1: a 2xx without a seq, or naming another seq, does not acknowledge the chunk (it is retried)', () => {
    assert.equal(chunkOutcome(3, a(201, null, { created: true })), 'retry', 'no seq in the body');
    assert.equal(chunkOutcome(3, a(200, null, {})), 'retry', 'an empty object');
    assert.equal(chunkOutcome(3, a(204)), 'retry', 'no body');
    assert.equal(chunkOutcome(3, a(200, null, 'ok')), 'retry', 'not an object');
    assert.equal(chunkOutcome(3, a(200, null, { seq: '3' })), 'retry', 'the seq as a string');
    assert.equal(chunkOutcome(3, a(201, null, { seq: 2, created: true })), 'retry', 'the chunk before');
    assert.equal(chunkOutcome(3, a(201, null, { seq: 4, created: true })), 'retry', 'the chunk after');
    assert.equal(chunkOutcome(3, a(201, null, { seq: 3, created: true })), 'acknowledged');
  });

  void it('L1: 413 storage.quota_exceeded, a 404, a proxy 403/407 and 5xx keep the chunk pending', () => {
    assert.equal(chunkOutcome(0, err(413, 'storage.quota_exceeded')), 'retry');
    assert.equal(chunkOutcome(0, err(404, 'meeting.not_found')), 'not_found');
    assert.equal(chunkOutcome(0, a(404)), 'retry', 'a 404 that is not ours');
    assert.equal(chunkOutcome(0, a(403)), 'retry');
    assert.equal(chunkOutcome(0, a(407)), 'retry');
    assert.equal(chunkOutcome(0, a(409)), 'retry', 'a 409 without our code');
    assert.equal(chunkOutcome(0, a(413)), 'retry', 'a proxy body limit');
    assert.equal(chunkOutcome(0, err(408, 'x')), 'retry');
    assert.equal(chunkOutcome(0, err(429, 'rate.limited')), 'retry');
    assert.equal(chunkOutcome(0, err(503, 'db.transient')), 'retry');
    assert.equal(chunkOutcome(0, err(401, 'auth.invalid_key')), 'sign_in');
    // L21: a seq too far ahead clears once the chunks before it are stored.
    assert.equal(chunkOutcome(0, err(409, 'chunk.too_far_ahead')), 'retry');
  });

  void it("L1: the server's final refusals of one chunk mark it rejected (its audio is kept)", () => {
    for (const [status, code] of [
      [409, 'chunk.conflict'],
      [409, 'chunk.after_end'],
      [410, 'chunk.too_late'],
      [409, 'meeting.not_live'],
      [400, 'chunk.seq'],
      [400, 'chunk.empty'],
      [413, 'request.too_large'],
      [415, 'chunk.bad_format'],
      [415, 'chunk.format_changed'],
    ] as const)
      assert.equal(chunkOutcome(0, err(status, code)), 'rejected', code);
  });

  void it('L3: a pending End is forgotten only when delivered or the meeting is already past recording', () => {
    assert.equal(endOutcome(a(202, null, { status: 'finalizing' })), 'delivered');
    assert.equal(endOutcome(err(409, 'meeting.not_live')), 'delivered');
    assert.equal(
      endOutcome(err(409, 'end.chunks_conflict')),
      'delivered',
      'ended before, with another count',
    );
    assert.equal(endOutcome(err(409, 'end.chunks_below_stored')), 'without_count');
    assert.equal(endOutcome(err(401, 'auth.invalid_key')), 'sign_in');
    assert.equal(endOutcome(err(404, 'meeting.not_found')), 'not_found');
    assert.equal(endOutcome(a(403)), 'retry');
    assert.equal(endOutcome(a(404)), 'retry');
    assert.equal(endOutcome(err(500, 'x')), 'retry');
    assert.equal(endOutcome(a(0)), 'unreachable');
  });
});

void describe('the capture worklet audio path (pure)', () => {
  void it('L1: 48 kHz input comes out as 16 kHz with the same length and the speech band kept', () => {
    const inRate = 48_000;
    const tone = (hz: number, rate: number, n: number) =>
      Float32Array.from({ length: n }, (_, i) => 0.5 * Math.sin((2 * Math.PI * hz * i) / rate));
    const d = new Downsampler(inRate, 16_000);
    // Fed in odd-sized blocks, as an AudioWorklet's 128-frame quanta would not line up with 3:1.
    const input = tone(440, inRate, inRate * 2);
    const parts: Float32Array[] = [];
    for (let i = 0; i < input.length; i += 127) parts.push(d.process(input.subarray(i, i + 127)));
    parts.push(d.flush());
    const out = Float32Array.from(parts.flatMap((p) => Array.from(p)));
    assert.equal(out.length, 32_000, 'two seconds at 16 kHz');
    const expected = tone(440, 16_000, 32_000);
    let err = 0;
    for (let i = 100; i < out.length - 100; i++) err = Math.max(err, Math.abs(out[i]! - expected[i]!));
    assert.ok(err < 0.02, `a 440 Hz tone survives (max error ${err})`);

    // 12 kHz cannot be represented at 16 kHz: the low-pass removes it instead of folding it to 4 kHz.
    const high = new Downsampler(inRate, 16_000);
    const folded = high.process(tone(12_000, inRate, inRate));
    const rms = Math.sqrt(folded.slice(200).reduce((s, v) => s + v * v, 0) / (folded.length - 200));
    assert.ok(rms < 0.01, `12 kHz is filtered out (rms ${rms})`);

    const wav = Buffer.from(encodeWav(Int16Array.from([0, 1000, -1000, 32767]), 16_000));
    const parsed = parseWav(wav);
    assert.equal(parsed?.sampleRate, 16_000);
    assert.deepEqual(Array.from(parsed?.samples ?? []), [0, 1000, -1000, 32767]);
  });
});

void describe('web app API', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ env: { VERBATIM_CLOSEOUT_GRACE_SECONDS: '30' } });
  });
  after(async () => {
    await h?.close();
  });

  void it('GET /v1/meetings?q= finds meetings by title, case-insensitively, with LIKE wildcards taken literally', async () => {
    for (const title of ['Budget review', 'Weekly BUDGET sync', 'Retro 100%', 'Retro 1000']) {
      assert.equal((await h.request('POST', '/v1/meetings', { source: 'upload', title })).status, 201);
    }
    const titles = async (q: string) =>
      (
        (await h.request('GET', `/v1/meetings?q=${encodeURIComponent(q)}`)).json.meetings as Array<{
          title: string;
        }>
      )
        .map((m) => m.title)
        .sort();
    assert.deepEqual(await titles('budget'), ['Budget review', 'Weekly BUDGET sync']);
    assert.deepEqual(await titles('100%'), ['Retro 100%']);
    assert.deepEqual(await titles('_'), []);
    assert.equal((await h.request('GET', `/v1/meetings?q=${'x'.repeat(301)}`)).status, 400);
  });

  void it('V2: a create retried with its Idempotency-Key answers the meeting it made, also when the tries race', async () => {
    const key = randomUUID();
    const body = { source: 'live', title: 'retried create' };
    const first = await h.request('POST', '/v1/meetings', body, { 'idempotency-key': key });
    assert.equal(first.status, 201);
    const chunk = Buffer.from(encodeWav(new Int16Array(16_000), 16_000));
    const put = await h.request('PUT', `/v1/meetings/${first.json.id}/chunks/0`, chunk, {
      'content-type': 'audio/wav',
    });
    assert.ok(put.status === 200 || put.status === 201, put.text);
    // The answer was lost; the client sends the same create again, after it went on with the meeting.
    const again = await h.request('POST', '/v1/meetings', body, { 'idempotency-key': key });
    assert.equal(again.status, 200);
    assert.equal(again.json.id, first.json.id);
    assert.equal(again.json.status, 'recording');
    // Other details under the same key are a client bug, said as such; nothing is made.
    const other = await h.request(
      'POST',
      '/v1/meetings',
      { ...body, title: 'another' },
      { 'idempotency-key': key },
    );
    assert.equal(other.status, 409);
    assert.equal(other.json.error.code, 'meeting.idempotency_key_reused');
    // Tries that race: one meeting, every answer names it.
    const raced = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        h.request('POST', '/v1/meetings', { source: 'upload', title: 'raced' }, { 'idempotency-key': raced }),
      ),
    );
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 200, 200, 200, 200, 201]);
    assert.equal(new Set(answers.map((a) => a.json.id)).size, 1);
    const listed = (await h.request('GET', '/v1/meetings?q=raced')).json.meetings as unknown[];
    assert.equal(listed.length, 1);
    // A repeat that comes after the meeting was deleted is told so; it makes nothing.
    assert.equal((await h.request('DELETE', `/v1/meetings/${first.json.id}`)).status, 204);
    const late = await h.request('POST', '/v1/meetings', body, { 'idempotency-key': key });
    assert.equal(late.status, 410, late.text);
    assert.equal(late.json.error.code, 'meeting.deleted');
    // A repeat into a batch canceled since the first try still learns its meeting, whatever the
    // case of the batch id it sends.
    const batch = await h.request('POST', '/v1/batches', { title: 'b' });
    const inBatch = { source: 'upload', title: 'batched', batchId: batch.json.id as string };
    const batchKey = randomUUID();
    const made = await h.request('POST', '/v1/meetings', inBatch, { 'idempotency-key': batchKey });
    assert.equal(made.status, 201, made.text);
    assert.equal((await h.request('POST', `/v1/batches/${batch.json.id}/cancel`)).status, 202);
    const repeat = await h.request(
      'POST',
      '/v1/meetings',
      { ...inBatch, batchId: inBatch.batchId.toUpperCase() },
      { 'idempotency-key': batchKey },
    );
    assert.equal(repeat.status, 200, repeat.text);
    assert.equal(repeat.json.id, made.json.id);
    // A new create into the canceled batch is still refused.
    assert.equal(
      (await h.request('POST', '/v1/meetings', inBatch, { 'idempotency-key': randomUUID() })).status,
      409,
    );
    // A malformed key is refused, naming the header; no key at all is a plain create.
    const bad = await h.request('POST', '/v1/meetings', body, { 'idempotency-key': 'has space' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'request.idempotency_key');
    assert.equal((await h.request('POST', '/v1/meetings', body)).status, 201);
  });

  void it('L17: a meeting in its close-out grace shows the step; a failed one its reason in plain words', async () => {
    const live = await h.request('POST', '/v1/meetings', { source: 'live', title: 'progress' });
    const ended = await h.request('POST', `/v1/meetings/${live.json.id}/end`);
    assert.equal(ended.json.status, 'finalizing');
    assert.deepEqual(ended.json.progress, {
      stage: 'grace',
      message: 'Waiting a moment for the last audio to arrive.',
    });

    const worker = h.spawnWorker();
    const id = await uploadMeeting(h, brokenWav(), 'junk');
    const failed = await waitForMeeting(h, id, 'failed');
    assert.equal(failed.failure.code, 'audio.undecodable');
    assert.match(failed.failure.plain, /^This meeting failed: the recording could not be read as audio/);
    assert.equal(failed.progress, null);
    await worker.stop();
  });

  void it("X1/S1: the operator overview lists dead letters with their attempt history, for the caller's workspace only", async () => {
    const res = await h.request('GET', '/v1/operator/overview');
    assert.equal(res.status, 200);
    const deadLetters = res.json.deadLetters as Array<Record<string, any>>;
    const dead = deadLetters.find((d) => d.meetingTitle === 'junk')!;
    assert.ok(dead, 'the failed intake job is a dead letter');
    assert.equal(dead.kind, 'split-recording');
    assert.equal(dead.error.code, 'audio.undecodable');
    assert.equal(dead.quarantined, false);
    assert.ok(dead.attempts.length >= 1);
    const attempts = dead.attempts as Array<{ status: string; error: { code: string } }>;
    assert.equal(attempts[attempts.length - 1]!.status, 'failed');
    assert.equal(attempts[attempts.length - 1]!.error.code, 'audio.undecodable');
    assert.ok(!JSON.stringify(res.json).includes('token'), 'no lease tokens');
    assert.ok((res.json.queues as Array<{ queue: string }>).some((q) => q.queue === 'intake'));
    assert.equal(typeof res.json.health.cleanupPending, 'number');
    assert.equal(typeof res.json.health.minutesOutagesInProgress, 'number');

    // This workspace also stores audio (a live chunk) and has a minutes job waiting out an outage
    // (set up in the rows: the worker is stopped, and run_after is far ahead so nothing runs it).
    const live = await h.request('POST', '/v1/meetings', { source: 'live', title: 'stored' });
    const chunk = Buffer.from(encodeWav(new Int16Array(16_000), 16_000));
    assert.equal(
      (
        await h.request('PUT', `/v1/meetings/${live.json.id}/chunks/0`, chunk, {
          'content-type': 'audio/wav',
        })
      ).status,
      201,
    );
    const workspaceId = (
      await h.app.database.db
        .selectFrom('meetings')
        .select('workspace_id')
        .where('id', '=', live.json.id)
        .executeTakeFirstOrThrow()
    ).workspace_id;
    await h.app.database.db
      .insertInto('jobs')
      .values({
        id: randomUUID(),
        workspace_id: workspaceId,
        kind: 'write-minutes',
        queue: 'minutes',
        subject_type: 'meeting',
        subject_id: live.json.id,
        meeting_id: live.json.id,
        status: 'pending',
        payload: JSON.stringify({ meetingId: live.json.id }),
        wait_count: 2,
        max_errors: 3,
        max_reclaims: 3,
        run_after: new Date(Date.now() + 3_600_000),
        delivery_id: randomUUID(),
        last_error_code: 'llm.outage',
      })
      .execute();
    const mine = (await h.request('GET', '/v1/operator/overview')).json;
    assert.equal(mine.outages.length, 1);
    assert.equal(mine.workspace.minutesOutagesInProgress, 1);
    assert.ok(mine.workspace.jobsFailed >= 1);
    assert.ok(mine.storedBytes > 0, 'this workspace stores audio');

    const other = await h.app.workspaces.createWorkspace('other');
    const { apiKey } = await h.app.workspaces.createApiKey(other, 'other');
    const theirs = await h.request('GET', '/v1/operator/overview', undefined, {
      authorization: `Bearer ${apiKey}`,
    });
    assert.equal(theirs.status, 200);
    assert.deepEqual(theirs.json.deadLetters, [], "another workspace's dead letters are not shown");
    assert.deepEqual(theirs.json.outages, [], "another workspace's outages are not shown");
    assert.equal(theirs.json.storedBytes, 0, "another workspace's stored bytes are not counted");
    assert.deepEqual(theirs.json.workspace, {
      jobsFailed: 0,
      jobsQuarantined: 0,
      minutesOutagesInProgress: 0,
    });
    // Installation-wide figures are the same for both: counts only, labelled as such on the page.
    assert.equal(theirs.json.health.minutesOutagesInProgress, mine.health.minutesOutagesInProgress);
    assert.equal(
      (await h.request('GET', '/v1/operator/overview', undefined, { authorization: 'Bearer nope' })).status,
      401,
    );
  });

  void it('the web app is served at / by the API process; the API keeps its JSON 404s', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-webroot-'));
    fs.mkdirSync(path.join(root, 'assets'));
    fs.writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>Verbatim</title>');
    fs.writeFileSync(path.join(root, 'assets', 'app-abc123.js'), 'console.log(1)');
    const api = buildApi({
      deps: h.app.deps,
      workspaces: h.app.workspaces,
      people: h.app.people,
      log: h.app.log,
      webRoot: root,
    });
    const index = await api.inject({ method: 'GET', url: '/' });
    assert.equal(index.statusCode, 200);
    assert.match(index.headers['content-type'] as string, /text\/html/);
    assert.match(index.headers['content-security-policy'] as string, /default-src 'self'/);
    assert.equal(index.headers['cache-control'], 'no-cache');
    const asset = await api.inject({ method: 'GET', url: '/assets/app-abc123.js' });
    assert.equal(asset.statusCode, 200);
    assert.match(asset.headers['cache-control'] as string, /immutable/);
    const unknown = await api.inject({ method: 'GET', url: '/v1/nothing-here' });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error.code, 'route.not_found');
    assert.equal((await api.inject({ method: 'GET', url: '/v1/meetings' })).statusCode, 401);
    await api.close();

    const unbuilt = buildApi({
      deps: h.app.deps,
      workspaces: h.app.workspaces,
      people: h.app.people,
      log: h.app.log,
      webRoot: path.join(root, 'none'),
    });
    const res = await unbuilt.inject({ method: 'GET', url: '/' });
    assert.equal(res.statusCode, 503);
    assert.match(res.body, /npm run build/);
    await unbuilt.close();
  });

  void it('the OpenAPI document lists the calls the web app adds', async () => {
    const doc = (await h.request('GET', '/openapi.json')).json;
    assert.ok(doc.paths['/v1/operator/overview']?.get);
    const list = doc.paths['/v1/meetings'].get;
    assert.ok((list.parameters as Array<{ name: string }>).some((p) => p.name === 'q'));
  });
});
