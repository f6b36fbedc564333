import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  buildWebApp,
  fakeMicrophoneFile,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
  type WebServer,
} from './support/browser.ts';
import { SPEECH, startHarness, type Harness } from './support/harness.ts';

/**
 * Issue 15 end to end: draft captions (L22) pushed over the meeting stream (L23) to Debian's
 * Chromium, with real worker processes, PocketSphinx and flite speech through the fake microphone.
 * Windows keep the product's 60 s, so anything on screen in the first minute is a draft.
 */
/** The little of the DOM the style check reads (the tests are typed without the DOM library). */
interface StyledElement {
  className: string;
  querySelector(selector: string): unknown;
  ownerDocument: { defaultView: { getComputedStyle(el: unknown): { fontStyle: string } } };
}

void describe('web app: live captions', () => {
  let h: Harness;
  let web: WebServer;
  let browser: Browser | null = null;

  before(async () => {
    h = await startHarness({
      env: {
        VERBATIM_DRAFTS: 'on',
        VERBATIM_WINDOW_SECONDS: '60',
        VERBATIM_CHUNK_SECONDS: '5',
        VERBATIM_GAP_PATIENCE_SECONDS: '60',
        // Shedding (L22 under load) has its own test; here another file's work on this 2-core
        // machine must not make every draft late enough to be skipped.
        VERBATIM_DRAFT_LAG_SECONDS: '60',
      },
    });
    h.spawnWorker();
    web = await serveWebApp(h, buildWebApp());
  });
  after(async () => {
    await browser?.close();
    await web?.stop();
    await h?.close();
  });

  const KEYWORDS = ['budget', 'marketing', 'engineers', 'finance', 'friday', 'report', 'quarterly'];
  const heard = (text: string) => KEYWORDS.filter((w) => text.toLowerCase().includes(w));

  void it('L22/L23: a spoken keyword is on screen in draft style before the first 60 s window exists, and is replaced by the final text', async () => {
    browser = await launchChromium({ microphoneFile: fakeMicrophoneFile(SPEECH) });
    const { page } = browser;
    await signIn(page, web.url, h.apiKey);
    await page.getByLabel('Title', { exact: true }).fill('Captions');
    await page.getByRole('button', { name: /Record/ }).click();
    await page.getByRole('heading', { name: 'Captions' }).waitFor();
    const meetingId = /#\/meetings\/([0-9a-f-]{36})$/.exec(page.url())?.[1];
    assert.ok(meetingId, `a meeting page: ${page.url()}`);
    await page.locator('[data-testid="caption-link"][data-link="live"]').waitFor({ timeout: 30_000 });

    // A draft line holding one of the spoken words, in the draft style.
    const draftLine = page.locator('[data-testid="transcript"] li[data-draft="1"]', {
      hasText: new RegExp(KEYWORDS.join('|'), 'i'),
    });
    await draftLine.first().waitFor({ timeout: 45_000 });
    const draftText = (await draftLine.first().textContent()) ?? '';
    const style = await draftLine.first().evaluate((node) => {
      const el = node as unknown as StyledElement;
      return {
        cls: el.className,
        fontStyle: el.ownerDocument.defaultView.getComputedStyle(el.querySelector('span')).fontStyle,
      };
    });
    assert.equal(style.cls, 'draft');
    assert.equal(style.fontStyle, 'italic', 'drafts are shown in a lighter (italic) style');

    // Still inside the first minute: no window has been cut, so no final text exists yet.
    const windows = await h.app.database.db
      .selectFrom('windows')
      .select('id')
      .where('meeting_id', '=', meetingId)
      .execute();
    assert.equal(windows.length, 0, 'no window exists when the draft is on screen');
    assert.equal(
      await page.locator('[data-testid="transcript"] li:not([data-draft])').count(),
      0,
      'nothing final is shown yet',
    );
    await screenshot(page, 'web-captions-draft');

    await page.getByRole('button', { name: /End meeting/ }).click();
    await page.locator('[data-meeting-status="complete"]').waitFor({ timeout: 120_000 });
    // The drafts are gone, the final text is there and holds the spoken words.
    await page.locator('[data-testid="transcript"] li').first().waitFor();
    assert.equal(await page.locator('[data-testid="transcript"] li[data-draft]').count(), 0);
    const finalText = (await page.getByTestId('transcript').textContent()) ?? '';
    assert.ok(heard(finalText).length >= 2, `the final transcript has the spoken words: ${finalText}`);
    assert.ok(
      heard(draftText).some((w) => finalText.toLowerCase().includes(w)),
      `a word the draft showed (${draftText}) is in the final text`,
    );
    await screenshot(page, 'web-captions-final');
    await browser.close();
    browser = null;
  });
});
