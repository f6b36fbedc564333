import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  assertAccessible,
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
  VIEWPORTS,
} from './support/browser.ts';
import { startHarness, waitFor, type Harness } from './support/harness.ts';
import { seedMeeting } from './support/search.ts';

/** A meeting of 30 lines as PocketSphinx gives them (no case, no punctuation, no digits). */
const BUDGET = Array.from({ length: 30 }, (_, i) =>
  i === 3
    ? 'the budget for q three is fine'
    : `we talked about item ${String.fromCharCode(97 + (i % 26))} for a while`,
);

void describe('E1/E2/E3 web: meetings first, paragraphs, corrections', () => {
  let h: Harness;
  let web: Awaited<ReturnType<typeof serveWebApp>>;
  let browser: Browser;
  let id: string;
  before(async () => {
    h = await startHarness();
    web = await serveWebApp(h, buildWebApp());
    id = await seedMeeting(h, { title: 'Budget review', lines: BUDGET });
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

  for (const size of VIEWPORTS) {
    void it(`E1/E6/E7: at ${size.width}×${size.height} the meetings list comes first, each with its date, length and first words; no serious accessibility violation`, async () => {
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
        /^We talked about item a for a while\. We talked about item b/,
      );
      const box = await list.boundingBox();
      assert.ok(box && box.y < size.height, `the list starts on the first screen (at ${box?.y} px)`);
      // E7: the box's example is a meeting of this workspace, which it finds.
      const example = /e\.g\. (.+)$/.exec(
        (await page.getByRole('searchbox').getAttribute('placeholder')) ?? '',
      )?.[1];
      assert.ok(example, 'the placeholder gives an example');
      await page.getByRole('searchbox').fill(example);
      await waitFor('the example to find its meeting', async () =>
        (await list.locator(':scope > li').allTextContents()).some((t) => t.includes(example)),
      );
      // One box: typing filters the list by title.
      await page.getByRole('searchbox').fill('older');
      await list.locator('li').first().waitFor();
      await waitFor(
        'the list filtered by title',
        async () => (await list.locator(':scope > li').count()) === 1,
      );
      await page.getByRole('searchbox').fill('');
      await screenshot(page, `web-e1-list-${size.name}`);
      await assertAccessible(page, `meetings list at ${size.name}`);
    });
  }

  for (const size of VIEWPORTS) {
    void it(`E2/E3: at ${size.width}×${size.height} the transcript reads as paragraphs; a sentence corrected in place is kept, marked, and in the export; a rename shows at once`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width: size.width, height: size.height });
      const id = await seedMeeting(h, { title: 'Budget review', lines: BUDGET });
      await page.goto(`${web.url}/#/meetings/${id}`);
      const transcript = page.getByTestId('transcript');
      await transcript.waitFor();
      const paragraphs = await transcript.locator(':scope > li').count();
      const sentences = await transcript.locator('span.seg').count();
      assert.equal(sentences, 30);
      assert.ok(
        paragraphs >= 2 && paragraphs < sentences,
        `paragraphs, not a line per segment: ${paragraphs}`,
      );
      assert.match((await transcript.textContent()) ?? '', /The budget for q three is fine\./);
      await assertAccessible(page, `meeting page at ${size.name}`);

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
      await screenshot(page, `web-e3-corrected-${size.name}`);

      await page.getByRole('button', { name: 'Rename' }).click();
      await page.getByRole('textbox', { name: 'Meeting title' }).fill('Budget review, Q3');
      await page.getByTestId('rename-meeting').getByRole('button', { name: 'Save' }).click();
      await page.getByRole('heading', { name: 'Budget review, Q3' }).waitFor();
    });
  }

  void it('E2: a reader scrolled into a transcript keeps their place when the lines above change (the first visible line and where it sits are unchanged)', async () => {
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 800 });
    const long = await seedMeeting(h, {
      title: 'Long review',
      lines: Array.from(
        { length: 120 },
        (_, i) => `we went over point ${String.fromCharCode(97 + (i % 26))} again`,
      ),
    });
    await page.goto(`${web.url}/#/meetings/${long}`);
    const transcript = page.getByTestId('transcript');
    await transcript.waitFor();
    // Scrolled by the reader to a line far down (3:20), at once (no smooth scrolling still moving).
    const target = transcript.locator('span.seg[data-start-ms="200000"]');
    await target.waitFor();
    await page.evaluate(`(() => {
      const el = document.querySelector('[data-testid="transcript"] span.seg[data-start-ms="200000"]');
      window.scrollTo({ top: window.scrollY + el.getBoundingClientRect().top - 300, behavior: 'instant' });
    })()`);
    await waitFor('the scroll to be seen', async () => ((await target.boundingBox())?.y ?? -1) > 0);
    const firstVisible = async () =>
      page.evaluate<{ ms: string | null; top: number }>(`(() => {
        for (const el of document.querySelectorAll('[data-testid="transcript"] [data-start-ms]')) {
          const r = el.getBoundingClientRect();
          if (r.bottom > 0) return { ms: el.getAttribute('data-start-ms'), top: Math.round(r.top) };
        }
        return { ms: null, top: 0 };
      })()`);
    const before = await firstVisible();
    assert.ok(
      before.ms !== null && Number(before.ms) > 0,
      `a line far down is first on screen: ${before.ms}`,
    );
    // Lines above it get longer (as finals replacing drafts would change them): a new revision.
    for (const startMs of [0, 5000, 10_000, 15_000, 20_000]) {
      const read = await h.request('GET', `/v1/meetings/${long}/transcript`);
      const lines = read.json.segments as Array<{ startMs: number; rawText: string }>;
      const res = await h.request('POST', `/v1/meetings/${long}/corrections`, {
        startMs,
        rawText: lines.find((l) => l.startMs === startMs)!.rawText,
        text: 'A much longer sentence than the one the recogniser heard, written out in full, '
          .repeat(4)
          .trim(),
      });
      assert.equal(res.status, 200, res.text);
    }
    await transcript
      .locator('span.seg[data-corrected="1"]')
      .first()
      .waitFor({ state: 'attached', timeout: 30_000 });
    const after = await firstVisible();
    assert.equal(after.ms, before.ms, 'the same line is first on screen');
    assert.ok(Math.abs(after.top - before.top) <= 2, `it did not move: ${before.top} → ${after.top} px`);
  });

  void it('L23/E1: pages left for another hold no event stream open (a browser opens six connections to a server): a meeting opened nine times in a row in one tab loads every time', async () => {
    const { page } = browser;
    for (let k = 0; k < 9; k++) {
      await page.goto('about:blank');
      await page.goto(`${web.url}/#/meetings/${id}`, { timeout: 10_000 });
      await page.getByTestId('transcript').locator('span.seg').first().waitFor({ timeout: 10_000 });
    }
  });

  for (const size of VIEWPORTS) {
    void it(`E3: at ${size.width}×${size.height} delete asks first, saying what goes; Keep it keeps it, Delete meeting deletes it`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width: size.width, height: size.height });
      const doomed = await seedMeeting(h, { title: 'Throwaway', lines: ['nothing to keep'] });
      await page.goto(`${web.url}/#/meetings/${doomed}`);
      await page.getByRole('button', { name: 'Delete…' }).click();
      const ask = page.getByRole('alertdialog');
      assert.match(
        (await ask.textContent()) ?? '',
        /transcript, corrections, speakers, minutes and share links/,
      );
      await screenshot(page, `web-e3-delete-confirm-${size.name}`);
      await ask.getByRole('button', { name: 'Keep it' }).click();
      assert.equal((await h.request('GET', `/v1/meetings/${doomed}`)).status, 200);
      await page.getByRole('button', { name: 'Delete…' }).click();
      await page.getByRole('alertdialog').getByRole('button', { name: 'Delete meeting' }).click();
      await page.getByRole('list', { name: 'Meetings' }).waitFor();
      assert.equal((await h.request('GET', `/v1/meetings/${doomed}`)).status, 404);
    });
  }

  void it('E6: the app is installable (a manifest); the operator and sign-in pages pass axe-core', async () => {
    const { page } = browser;
    const manifest = await fetch(`${web.url}/manifest.webmanifest`);
    assert.equal(manifest.status, 200);
    const json = (await manifest.json()) as { name: string; start_url: string; display: string };
    assert.deepEqual([json.name, json.start_url, json.display], ['Verbatim', '/', 'standalone']);
    await page.goto(`${web.url}/#/operator`);
    await page.getByRole('heading', { level: 2 }).first().waitFor();
    await assertAccessible(page, 'operator page');
    // And the sign-in page, last (the browser is signed out after it).
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page
      .getByRole('button', { name: /Sign in/ })
      .first()
      .waitFor();
    await assertAccessible(page, 'sign-in page');
  });
});
