import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
} from './support/browser.ts';
import { markedChunk, startChunkRecognizer } from './support/chunk-recognizer.ts';
import { startFakeChat } from './support/fake-openai.ts';
import { SPEECH, speechWav, startHarness, uploadMeeting, waitForMeeting } from './support/harness.ts';

void it('L9/L17: a meeting completed without minutes (quota) shows the reason in plain words, and Regenerate writes them', async () => {
  let quotaBack = false;
  const chat = await startFakeChat(() => (quotaBack ? 'ok' : 'quota'));
  const h = await startHarness({
    env: {
      VERBATIM_MINUTES: 'openai',
      VERBATIM_LLM_URL: chat.url,
      VERBATIM_LLM_API_KEY: 'sk-test-abcdefghijklmnop',
    },
  });
  let browser: Browser | null = null;
  const web = await serveWebApp(h, buildWebApp());
  try {
    h.spawnWorker();
    const id = await uploadMeeting(h, speechWav(SPEECH), 'Quota meeting');
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.minutes.status, 'unavailable');

    browser = await launchChromium();
    const { page } = browser;
    await signIn(page, web.url, h.apiKey);
    await page.getByRole('searchbox').fill('quota');
    await page.getByRole('link', { name: 'Quota meeting' }).click();
    const reason = page.getByTestId('minutes-reason');
    await reason.waitFor();
    assert.match((await reason.textContent()) ?? '', /usage or billing limit/);
    // The transcript is read by its own request; it is shown beside the reason once it answers.
    await page.getByTestId('transcript').waitFor({ state: 'visible' });
    assert.match(
      (await page.getByTestId('transcript').textContent()) ?? '',
      /\S/,
      'the transcript is shown without minutes',
    );

    quotaBack = true;
    await page.getByRole('button', { name: 'Regenerate minutes' }).click();
    const decisions = page.locator('[data-minutes-status="written"]');
    await decisions.waitFor({ timeout: 60_000 });
    assert.match((await decisions.textContent()) ?? '', /Hire two engineers/);
    assert.equal(await page.getByTestId('minutes-reason').count(), 0);
    await screenshot(page, 'web-regenerate');
  } finally {
    await browser?.close();
    await web.stop();
    await h.close();
    await chat.close();
  }
});

void it('L19: a chunk that arrives after the meeting completed shows on the open meeting page: the transcript updates, with its revision and the late audio said in plain words', async () => {
  const recognizer = await startChunkRecognizer();
  const h = await startHarness({
    env: {
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: recognizer.url,
      VERBATIM_WINDOW_SECONDS: '20',
      VERBATIM_GAP_PATIENCE_SECONDS: '0',
    },
  });
  let browser: Browser | null = null;
  const web = await serveWebApp(h, buildWebApp());
  try {
    h.spawnWorker();
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'Late chunk meeting' });
    const id = created.json.id as string;
    for (let seq = 0; seq < 8; seq++) {
      if (seq === 3) continue;
      const put = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq), {
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 201);
    }
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 8 })).status, 202);
    await waitForMeeting(h, id);

    browser = await launchChromium();
    const { page } = browser;
    await signIn(page, web.url, h.apiKey);
    await page.getByRole('link', { name: 'Late chunk meeting' }).click();
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor();
    assert.doesNotMatch((await transcript.textContent()) ?? '', /c3x/);
    assert.equal(await page.getByTestId('transcript-revision').count(), 0);

    // Another client (a phone that reconnected) sends the missing chunk; the page is not reloaded.
    assert.equal(
      (await h.request('PUT', `/v1/meetings/${id}/chunks/3`, markedChunk(3), { 'content-type': 'audio/wav' }))
        .status,
      201,
    );
    await page
      .getByTestId('transcript-revision')
      .filter({ hasText: 'revision 1' })
      .waitFor({ timeout: 60_000 });
    await page.getByTestId('transcript').filter({ hasText: 'c3x80000' }).waitFor();
    const said = page.getByTestId('late-audio');
    await said.filter({ hasText: /revised 1 time since it was published/ }).waitFor({ timeout: 30_000 });
    await screenshot(page, 'web-late-chunk');
  } finally {
    await browser?.close();
    await web.stop();
    await h.close();
    await recognizer.close();
  }
});
