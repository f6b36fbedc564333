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
    await page.getByLabel('Search by title').fill('quota');
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
