import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
} from './support/browser.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { seedMeeting } from './support/search.ts';

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const SIZES = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

/** E6: axe-core on the page as it stands: no serious or critical violation. */
async function assertAccessible(page: Page, where: string): Promise<void> {
  await page.addScriptTag({ path: AXE });
  const found = await page.evaluate<string[]>(`(async () => {
    const result = await window.axe.run();
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => v.impact + ' ' + v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', '));
  })()`);
  assert.deepEqual(found, [], `${where}: axe-core found serious or critical violations`);
}

void describe('E1/E2/E3 web: meetings first, paragraphs, corrections', () => {
  let h: Harness;
  let web: Awaited<ReturnType<typeof serveWebApp>>;
  let browser: Browser;
  let id: string;
  before(async () => {
    h = await startHarness();
    web = await serveWebApp(h, buildWebApp());
    const lines = Array.from({ length: 30 }, (_, i) =>
      i === 3 ? 'the budget for q three is fine' : `we talked about item ${i} for a while`,
    );
    id = await seedMeeting(h, { title: 'Budget review', lines });
    await seedMeeting(h, {
      title: 'Older sync',
      lines: ['so we ship on monday'],
      createdAt: new Date(Date.now() - 3 * 86_400_000),
    });
    await h.app.database.db.updateTable('meetings').set({ duration_ms: 150_000 }).execute();
    browser = await launchChromium();
    await signIn(browser.page, web.url, h.apiKey);
  });
  after(async () => {
    await browser?.close();
    await web?.stop();
    await h?.close();
  });

  for (const size of SIZES) {
    void it(`E1/E6: at ${size.width}×${size.height} the meetings list comes first, each with its date, length and first words; no serious accessibility violation`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width: size.width, height: size.height });
      await page.goto(`${web.url}/#/`);
      const list = page.getByRole('list', { name: 'Meetings' });
      await list.waitFor();
      const item = list.locator(`li[data-meeting-id="${id}"]`);
      assert.match((await item.getByTestId('meeting-when').textContent()) ?? '', /^Today \d{1,2}:\d{2}/);
      assert.equal((await item.getByTestId('meeting-duration').textContent())?.trim(), '· 3 min');
      assert.match(
        (await item.getByTestId('meeting-preview').textContent()) ?? '',
        /^We talked about item 0/,
      );
      const box = await list.boundingBox();
      assert.ok(box && box.y < size.height, `the list starts on the first screen (at ${box?.y} px)`);
      // One box: typing filters the list by title.
      await page.getByRole('searchbox').fill('older');
      await list.locator('li').first().waitFor();
      await page.waitForFunction(`document.querySelectorAll('ul.meetings > li').length === 1`);
      await page.getByRole('searchbox').fill('');
      await screenshot(page, `web-e1-list-${size.name}`);
      await assertAccessible(page, `meetings list at ${size.name}`);
    });
  }

  void it('E2/E3: the transcript reads as paragraphs; a sentence corrected in place is kept, marked, and in the export; a rename shows at once', async () => {
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${web.url}/#/meetings/${id}`);
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor();
    const paragraphs = await transcript.locator(':scope > li').count();
    const sentences = await transcript.locator('span.seg').count();
    assert.equal(sentences, 30);
    assert.ok(paragraphs >= 2 && paragraphs < sentences, `paragraphs, not a line per segment: ${paragraphs}`);
    assert.match((await transcript.textContent()) ?? '', /The budget for q three is fine\./);
    await assertAccessible(page, 'meeting page');

    await page.getByTestId('correct-toggle').click();
    await transcript.locator('button.seg[data-start-ms="15000"]').click();
    const form = page.getByTestId('correction-form');
    await form.locator('textarea').fill('The budget for Q3 is fine.');
    await form.getByRole('button', { name: 'Save' }).click();
    await transcript.locator('button.seg[data-corrected="1"][data-start-ms="15000"]').waitFor();
    await page.getByTestId('correct-toggle').click();
    const fixed = transcript.locator('span.seg[data-corrected="1"]');
    assert.equal((await fixed.textContent())?.trim(), 'The budget for Q3 is fine.');
    assert.match((await fixed.getAttribute('title')) ?? '', /the budget for q three is fine/);
    const txt = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    assert.match(txt.text, /The budget for Q3 is fine\./);
    await screenshot(page, 'web-e3-corrected');

    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('textbox', { name: 'Meeting title' }).fill('Budget review, Q3');
    await page.getByTestId('rename-meeting').getByRole('button', { name: 'Save' }).click();
    await page.getByRole('heading', { name: 'Budget review, Q3' }).waitFor();
  });

  void it('E3: delete asks first, saying what goes; Keep it keeps it, Delete meeting deletes it', async () => {
    const { page } = browser;
    const doomed = await seedMeeting(h, { title: 'Throwaway', lines: ['nothing to keep'] });
    await page.goto(`${web.url}/#/meetings/${doomed}`);
    await page.getByRole('button', { name: 'Delete…' }).click();
    const ask = page.getByRole('alertdialog');
    assert.match(
      (await ask.textContent()) ?? '',
      /transcript, corrections, speakers, minutes and share links/,
    );
    await screenshot(page, 'web-e3-delete-confirm');
    await ask.getByRole('button', { name: 'Keep it' }).click();
    assert.equal((await h.request('GET', `/v1/meetings/${doomed}`)).status, 200);
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Delete meeting' }).click();
    await page.getByRole('list', { name: 'Meetings' }).waitFor();
    assert.equal((await h.request('GET', `/v1/meetings/${doomed}`)).status, 404);
  });

  void it('E6: the app is installable (a manifest) and the operator page passes axe-core', async () => {
    const { page } = browser;
    const manifest = await fetch(`${web.url}/manifest.webmanifest`);
    assert.equal(manifest.status, 200);
    const json = (await manifest.json()) as { name: string; start_url: string; display: string };
    assert.deepEqual([json.name, json.start_url, json.display], ['Verbatim', '/', 'standalone']);
    await page.goto(`${web.url}/#/operator`);
    await page.getByRole('heading', { level: 2 }).first().waitFor();
    await assertAccessible(page, 'operator page');
  });
});
