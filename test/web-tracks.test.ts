import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import {
  buildWebApp,
  fakeMicrophoneFile,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
} from './support/browser.ts';
import { startHarness, waitFor, waitForMeeting } from './support/harness.ts';

/**
 * L25 in the browser. The microphone is Chromium's fake capture device playing speech; the tab is
 * a page audio source handed out by getDisplayMedia. Headless Chromium has no tab picker to share a
 * real tab's audio through, so the picker alone is replaced, at the browser's API: the stream it
 * returns is what a shared tab's is (an audio track beside a video track), and everything after it
 * (capture, chunks, the outbox, the server) is the product's.
 */
void it('L25: in the browser, the microphone and a tab playing a call are recorded as two tracks; both speakers are shown and renamed in place', async () => {
  const h = await startHarness({
    env: { VERBATIM_WINDOW_SECONDS: '10', VERBATIM_CLOSEOUT_GRACE_SECONDS: '1' },
  });
  h.spawnWorker();
  let browser: Browser | null = null;
  const web = await serveWebApp(h, buildWebApp());
  try {
    const mic = fakeMicrophoneFile('The quarterly budget meeting will discuss the marketing plan.');
    const call = fs.readFileSync(fakeMicrophoneFile('We decided to hire two engineers for the new project.'));
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    // In the page, not in Node: a tab's share as getDisplayMedia returns it, playing the call.
    await page.addInitScript({
      content: `navigator.mediaDevices.getDisplayMedia = async () => {
        const context = new AudioContext();
        const bytes = Uint8Array.from(atob(${JSON.stringify(call.toString('base64'))}), (c) => c.charCodeAt(0));
        const buffer = await context.decodeAudioData(bytes.buffer);
        const source = context.createBufferSource();
        source.buffer = buffer;
        source.loop = true;
        const out = context.createMediaStreamDestination();
        source.connect(out);
        source.start();
        const video = document.createElement('canvas').captureStream(1);
        return new MediaStream([...out.stream.getAudioTracks(), ...video.getVideoTracks()]);
      };`,
    });
    await signIn(page, web.url, h.apiKey);
    await page.getByLabel('Title', { exact: true }).fill('Call with a client');
    await page.getByRole('button', { name: /Record/ }).click();
    await page.getByRole('heading', { name: 'Call with a client' }).waitFor();
    const id = /#\/meetings\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
    await page.getByRole('meter', { name: 'Input level' }).waitFor();
    await page.getByRole('button', { name: /Record a tab/ }).click();
    await page.getByTestId('tab-audio').waitFor();
    // About 20 s of both: each track's chunks reach the server through the outbox.
    await waitFor(
      'chunks of both tracks on the server',
      async () => {
        const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
        if (m.tracks?.length !== 1) return null;
        const rows = await h.app.database.db
          .selectFrom('chunks')
          .select('meeting_id')
          .where('meeting_id', 'in', [id, m.tracks[0].meetingId as string])
          .execute();
        const mine = rows.filter((r) => r.meeting_id === id).length;
        return mine >= 4 && rows.length - mine >= 3 ? true : null;
      },
      120_000,
    );
    await screenshot(page, 'web-tracks-recording');
    await page.getByRole('button', { name: /End meeting/ }).click();
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete');

    // The server's transcript has both tracks' words, each under its track's speaker.
    const segments = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json.segments as Array<{
      text: string;
      speaker: { name: string } | null;
    }>;
    const said = (name: string) =>
      segments
        .filter((s) => s.speaker?.name === name)
        .map((s) => s.text)
        .join(' ');
    assert.match(said('You'), /budget|marketing|quarterly/, JSON.stringify(segments));
    assert.match(said('Others'), /engineers|project|hire/, JSON.stringify(segments));

    // In the app: both speakers named, and "Others" renamed in place.
    await page.locator('[data-meeting-status="complete"]').waitFor({ timeout: 60_000 });
    const labels = page.getByTestId('transcript').getByTestId('speaker');
    await labels.first().waitFor();
    const names = new Set(await labels.allTextContents());
    assert.ok(names.has('You') && names.has('Others'), [...names].join(','));
    await labels.filter({ hasText: 'Others' }).first().click();
    await page.getByLabel('Speaker name').fill('Client');
    await page.getByTestId('rename-speaker').getByRole('button', { name: 'Save' }).click();
    await waitFor('the new name in the transcript', async () =>
      (await labels.allTextContents()).includes('Client') ? true : null,
    );
    const after = new Set(await labels.allTextContents());
    assert.ok(!after.has('Others') && after.has('You'), [...after].join(','));
    await screenshot(page, 'web-tracks-renamed');
  } finally {
    await browser?.close();
    await web.stop();
    await h.close();
  }
});
