import assert from 'node:assert/strict';
import { it } from 'node:test';
import { indexMeetingForSearch } from '../src/search/indexer.ts';
import {
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
} from './support/browser.ts';
import { startHarness, waitFor } from './support/harness.ts';
import { seedMeeting } from './support/search.ts';

void it('O4/O5/E1/E7 web: one box finds what was said → click a hit → the transcript opens scrolled to the cited segment, marked; Ask offline shows the passages, labelled, each opening its moment', async () => {
  const h = await startHarness();
  let browser: Browser | null = null;
  const web = await serveWebApp(h, buildWebApp());
  try {
    // A long meeting: the cited segment is far below the top of the page.
    const lines = Array.from({ length: 120 }, (_, i) => `status update number ${i} with nothing of note`);
    lines[97] = 'we agreed to renew the zeppelin hangar lease for two more years';
    const id = await seedMeeting(h, { title: 'Facilities review', lines });
    await seedMeeting(h, { title: 'Unrelated sync', lines: ['the coffee machine is fixed'] });
    assert.equal(await indexMeetingForSearch(h.app.deps, id), 'indexed');

    browser = await launchChromium();
    const { page } = browser;
    await signIn(page, web.url, h.apiKey);
    // E1: one box searches titles and what was said; Find shows what was said.
    await page.getByRole('searchbox').fill('zeppelin hangars');
    await page.getByRole('button', { name: 'Find', exact: true }).click();
    const results = page.getByTestId('search-results');
    await results.waitFor();
    assert.match((await results.textContent()) ?? '', /Facilities review/);
    assert.doesNotMatch((await results.textContent()) ?? '', /Unrelated sync/);
    assert.deepEqual(await results.locator('mark').allTextContents(), ['zeppelin', 'hangar']);
    // E7: a meeting's hit count counts the hits shown under it.
    for (const item of await results.locator(':scope > li').all()) {
      const shown = await item.locator('a[data-hit-ms]').count();
      assert.equal(
        await item.getByTestId('hit-count').textContent(),
        `${shown} ${shown === 1 ? 'hit' : 'hits'}`,
      );
    }
    const hit = results.locator('a[data-hit-ms]').first();
    assert.equal(await hit.getAttribute('data-hit-ms'), String(97 * 5000));
    await screenshot(page, 'web-search-results');
    await hit.click();

    const cited = page.locator('[data-testid="transcript"] li[data-cited="1"]');
    await cited.waitFor();
    assert.match((await cited.textContent()) ?? '', /zeppelin hangar lease/i);
    // E2: the paragraph holding it is marked, and within it the cited segment.
    assert.equal(await cited.locator(`span[data-cited="1"][data-start-ms="${97 * 5000}"]`).count(), 1);
    // The page scrolls the marked segment into view (it started at the top, far above it).
    const viewport = page.viewportSize();
    assert.ok(viewport);
    const citedLine = cited.locator('span[data-cited="1"]');
    await waitFor('the cited segment scrolled on screen', async () => {
      const b = await citedLine.boundingBox();
      const scrolled = await page.evaluate<number>('window.scrollY');
      return b !== null && b.y >= 0 && b.y + b.height <= viewport.height && scrolled > 0;
    });
    const box = await citedLine.boundingBox();
    assert.ok(box && box.y >= 0 && box.y + box.height <= viewport.height, 'the cited segment is on screen');
    await screenshot(page, 'web-search-cited');

    await page.goto(`${web.url}/#/`);
    await page.getByRole('radio', { name: 'Ask' }).check();
    await page.getByRole('searchbox').fill('what did we decide about the zeppelin hangar?');
    await page.getByRole('button', { name: 'Ask', exact: true }).click();
    const panel = page.getByTestId('ask-panel');
    await panel.waitFor();
    assert.equal(await panel.getAttribute('data-mode'), 'passages');
    assert.match((await panel.textContent()) ?? '', /No language model is configured/);
    await panel.getByRole('link', { name: /Facilities review at 7:55/ }).click();
    await page.locator('[data-testid="transcript"] li[data-cited="1"]').waitFor();
    assert.match(
      (await page.locator('[data-testid="transcript"] li[data-cited="1"]').textContent()) ?? '',
      /status update number 95|zeppelin/i,
    );
  } finally {
    await browser?.close();
    await web.stop();
    await h.close();
  }
});
