import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { deleteEndedMeetingsAudio } from '../src/meetings/audio-lifecycle.ts';
import { parseWav } from '../src/domain/wav.ts';
import { markedChunk } from './support/chunk-recognizer.ts';
import {
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  VIEWPORTS,
} from './support/browser.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const DAY = 86_400_000;

void describe('E4: playback when a workspace keeps audio', () => {
  let h: Harness;
  const speech = speechWav(SPEECH);
  /** A meeting transcribed while the workspace kept no audio, and one while it kept 7 days. */
  let unkept = '';
  let kept = '';
  before(async () => {
    h = await startHarness();
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
  });

  const liveBlobs = (id: string) =>
    h.app.database.db
      .selectFrom('blobs')
      .select('id')
      .where('meeting_id', '=', id)
      .where('deleted_at', 'is', null)
      .execute();

  void it('E4: by default no audio is kept once a meeting is transcribed, and playback says why', async () => {
    assert.deepEqual((await h.request('GET', '/v1/playback-settings')).json, { days: 0 });
    const id = await uploadMeeting(h, speech, 'no playback');
    unkept = id;
    const m = await waitForMeeting(h, id);
    assert.equal(m.playback, null);
    assert.ok(m.audioDeletedAt);
    assert.deepEqual(await liveBlobs(id), [], 'every audio object handed off');
    const res = await h.request('GET', `/v1/meetings/${id}/audio?fromMs=0&toMs=2000`);
    assert.equal(res.status, 410, res.text);
    assert.equal(res.json.error.code, 'audio.not_kept');
    assert.match(res.json.error.message, /keeps no audio/);
  });

  void it('E4: with days set, an upload and a live meeting play back their own audio from any moment; bad settings and ranges are 400s', async () => {
    for (const days of [-1, 366, 1.5, 'seven'])
      assert.equal((await h.request('PUT', '/v1/playback-settings', { days })).status, 400, String(days));
    const set = await h.request('PUT', '/v1/playback-settings', { days: 7 });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual((await h.request('GET', '/v1/playback-settings')).json, { days: 7 });
    const trail = await h.request('GET', '/v1/audit?limit=50');
    assert.ok(
      (trail.json.events as Array<{ action: string }>).some((e) => e.action === 'playback.settings_changed'),
      'the change is in the audit trail',
    );

    const id = await uploadMeeting(h, speech, 'kept for playback');
    kept = id;
    const m = await waitForMeeting(h, id);
    assert.ok(m.playback, 'the meeting says its audio is kept');
    const until = new Date(m.playback.until).getTime() - new Date(m.completedAt).getTime();
    assert.ok(Math.abs(until - 7 * DAY) < 60_000, `kept 7 days after completion: ${until} ms`);
    assert.ok((await liveBlobs(id)).length > 0, 'the audio is kept');
    // The stretch 1.0–3.0 s is the recording's own samples.
    const played = await h.request('GET', `/v1/meetings/${id}/audio?fromMs=1000&toMs=3000`);
    assert.equal(played.status, 200, played.text);
    assert.equal(played.headers['content-type'], 'audio/wav');
    const wav = parseWav(played.raw)!;
    const original = parseWav(speech)!;
    assert.equal(wav.sampleRate, 16_000);
    assert.equal(wav.samples.length, 32_000);
    assert.deepEqual(wav.samples, original.samples.subarray(16_000, 48_000), 'the recording’s own audio');
    const far = await h.request('GET', `/v1/meetings/${id}/audio?fromMs=0&toMs=${6 * 60_000}`);
    assert.equal(far.status, 400);
    assert.equal(far.json.error.code, 'audio.to_ms');

    // A live meeting plays back from its chunks.
    const live = (await h.request('POST', '/v1/meetings', { source: 'live', title: 'live playback' })).json
      .id as string;
    for (let seq = 0; seq < 3; seq++) {
      const put = await h.request('PUT', `/v1/meetings/${live}/chunks/${seq}`, markedChunk(seq, 32_000), {
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 201, put.text);
    }
    assert.equal((await h.request('POST', `/v1/meetings/${live}/end`, { chunks: 3 })).status, 202);
    const lm = await waitForMeeting(h, live);
    assert.ok(lm.playback);
    const chunk1 = await h.request('GET', `/v1/meetings/${live}/audio?fromMs=2000&toMs=4000`);
    assert.equal(chunk1.status, 200, chunk1.text);
    assert.deepEqual(
      parseWav(chunk1.raw)!.samples,
      parseWav(markedChunk(1, 32_000))!.samples,
      'chunk 1, exactly',
    );
  });

  void it('E4 web: at 1280×800 and 390×844, with audio kept, ▶ beside a paragraph plays it and marks the sentence heard; with none kept, no player and the promise says the audio is deleted', async () => {
    const web = await serveWebApp(h, buildWebApp());
    const browser = await launchChromium();
    try {
      const { page } = browser;
      await signIn(page, web.url, h.apiKey);
      for (const size of VIEWPORTS) {
        await page.setViewportSize({ width: size.width, height: size.height });
        await page.goto(`${web.url}/#/meetings/${kept}`);
        await page.getByTestId('player').waitFor();
        assert.match((await page.getByTestId('player').textContent()) ?? '', /kept for playback until/);
        await page.getByTestId('play-from').first().click();
        await page.locator('[data-testid="transcript"] span.seg[data-playing="1"]').first().waitFor();
        const at = await page
          .getByTestId('player-audio')
          .evaluate((a) => (a as unknown as { currentTime: number }).currentTime);
        assert.ok(at > 0, `the audio plays at ${size.name}: ${at} s`);
        await screenshot(page, `web-e4-playback-${size.name}`);

        await page.goto(`${web.url}/#/meetings/${unkept}`);
        await page.getByTestId('transcript').waitFor();
        assert.equal(await page.getByTestId('player').count(), 0);
        assert.equal(await page.getByTestId('play-from').count(), 0);
        await screenshot(page, `web-e4-no-audio-${size.name}`);
        // The promise and its setting, where the workspace is run.
        await page.goto(`${web.url}/#/operator`);
        await waitFor('the promise', async () =>
          /kept for 7 days/.test((await page.getByTestId('privacy-promise').textContent()) ?? ''),
        );
      }
    } finally {
      await browser.close();
      await web.stop();
    }
  });

  void it('E4: when the days have passed (the setting lowered to 0 shortens what is kept), the audio sweep deletes the audio, audited, and playback says so', async () => {
    const id = await uploadMeeting(h, speech, 'expiring');
    await waitForMeeting(h, id);
    assert.ok((await liveBlobs(id)).length > 0);
    // Fewer days shorten what is kept already: 0 days, and its audio is due now.
    assert.equal((await h.request('PUT', '/v1/playback-settings', { days: 0 })).status, 200);
    assert.equal((await h.request('GET', `/v1/meetings/${id}`)).json.playback, null);
    await deleteEndedMeetingsAudio(h.app.deps, 1000);
    assert.deepEqual(await liveBlobs(id), [], 'the audio is handed to cleanup');
    const audited = await h.app.database.db
      .selectFrom('audit_events')
      .select('reason')
      .where('subject_id', '=', id)
      .where('to_status', '=', 'audio:deleted')
      .execute();
    assert.ok(
      audited.some((a) => /playback retention passed/.test(a.reason ?? '')),
      JSON.stringify(audited),
    );
    const res = await h.request('GET', `/v1/meetings/${id}/audio?fromMs=0&toMs=1000`);
    assert.equal(res.status, 410);
    assert.match(res.json.error.message, /has been deleted/);
  });
});
