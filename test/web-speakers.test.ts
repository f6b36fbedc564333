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
import { stereoConversation } from './support/channels.ts';
import { conversationWav, startHarness, waitFor, waitForMeeting } from './support/harness.ts';

void it('W4/W5 web: a stereo call shows both speakers before their words; a click on a name renames the speaker in place', async () => {
  const h = await startHarness();
  h.spawnWorker();
  let browser: Browser | null = null;
  const web = await serveWebApp(h, buildWebApp());
  try {
    const { wav } = stereoConversation(
      conversationWav([
        'The quarterly budget meeting will discuss the marketing plan.',
        'We decided to hire two engineers for the new project.',
        'Alice will send the report to the finance team by Friday.',
      ]),
    );
    const created = await h.request('POST', '/v1/meetings', {
      source: 'upload',
      title: 'Stereo call',
      channels: 'speakers',
    });
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/recording`, wav, { 'content-type': 'audio/wav' });
    assert.equal(put.status, 202, put.text);
    assert.equal((await waitForMeeting(h, id)).status, 'complete');

    browser = await launchChromium();
    const { page } = browser;
    await signIn(page, web.url, h.apiKey);
    await page.goto(`${web.url}/#/meetings/${id}`);
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor();
    const labels = transcript.getByTestId('speaker');
    await labels.first().waitFor();
    assert.deepEqual(await labels.allTextContents(), ['Channel 1', 'Channel 2', 'Channel 1']);
    await screenshot(page, 'web-speakers');

    // Rename "Channel 2" in place: every line of that speaker reads the new name.
    await labels.nth(1).click();
    const input = page.getByLabel('Speaker name');
    await input.fill('Bob');
    await page.getByTestId('rename-speaker').getByRole('button', { name: 'Save' }).click();
    let shown = '';
    await waitFor(
      () => `the new name on every line of that speaker (shown: ${shown})`,
      async () => {
        shown = `${(await labels.allTextContents()).join(',')} ${(await page.locator('[role=alert]').allTextContents()).join(' ')}`;
        return shown.startsWith('Channel 1,Bob,Channel 1');
      },
    );
    const stored = await h.request('GET', `/v1/meetings/${id}/speakers`);
    assert.deepEqual((stored.json.speakers as Array<{ name: string }>).map((s) => s.name).sort(), [
      'Bob',
      'Channel 1',
    ]);
    await screenshot(page, 'web-speakers-renamed');
  } finally {
    await browser?.close();
    await web.stop();
    await h.close();
  }
});
