/**
 * (r) the pages a team opens every morning (issue 37, E1/E2): the meetings page with 500 meetings,
 * and the transcript of a 3-hour meeting, each loaded fresh in Debian's Chromium 5 times: time to
 * first render (the first meeting, or the first sentence, on screen) and to interactive (the page
 * answers: the search box takes a word; "Correct the text" turns on), from the navigation's start.
 * Beside each, the same page with a small workspace (5 meetings) and a 5-minute meeting: the baseline
 * of the same run. Targets: the list ≤ 500 ms and the long transcript ≤ 1 s, at p95.
 */
import { buildWebApp, launchChromium, serveWebApp, signIn, type Browser } from '../test/support/browser.ts';
import { startHarness } from '../test/support/harness.ts';
import { seedMeeting } from '../test/support/search.ts';

export interface PageTimes {
  label: string;
  firstRenderMs: number[];
  interactiveMs: number[];
}

const LOADS = 5;
const WORDS = ['budget', 'roadmap', 'hiring', 'vendor', 'launch', 'pricing', 'security', 'support'];

function lines(minutes: number): string[] {
  return Array.from(
    { length: (minutes * 60) / 5 },
    (_, i) => `we talked about the ${WORDS[i % WORDS.length]} plan and what comes after it`,
  );
}

async function load(
  browser: Browser,
  url: string,
  firstSelector: string,
  interact: () => Promise<void>,
): Promise<{ first: number; interactive: number }> {
  const { page } = browser;
  await page.goto('about:blank');
  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'commit' });
  await page.locator(firstSelector).first().waitFor();
  const first = Date.now() - t0;
  await interact();
  return { first, interactive: Date.now() - t0 };
}

export async function webPages(): Promise<PageTimes[]> {
  const h = await startHarness();
  const web = await serveWebApp(h, buildWebApp());
  const browser = await launchChromium();
  try {
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 800 });
    await signIn(page, web.url, h.apiKey);
    const small = await seedMeeting(h, { title: 'Five-minute sync', lines: lines(5) });
    for (let i = 0; i < 4; i++) await seedMeeting(h, { title: `Standup ${i}`, lines: lines(1) });
    const out: PageTimes[] = [];
    const listTimes = async (label: string) => {
      const t: PageTimes = { label, firstRenderMs: [], interactiveMs: [] };
      for (let i = 0; i < LOADS; i++) {
        const r = await load(browser, `${web.url}/#/`, 'ul.meetings > li', async () => {
          await page.getByRole('searchbox').fill('standup');
          await page.getByRole('searchbox').fill('');
        });
        t.firstRenderMs.push(r.first);
        t.interactiveMs.push(r.interactive);
      }
      out.push(t);
    };
    const transcriptTimes = async (label: string, id: string) => {
      const t: PageTimes = { label, firstRenderMs: [], interactiveMs: [] };
      for (let i = 0; i < LOADS; i++) {
        const r = await load(
          browser,
          `${web.url}/#/meetings/${id}`,
          '[data-testid="transcript"] span.seg',
          async () => {
            const toggle = page.getByTestId('correct-toggle');
            await toggle.click();
            await page.locator('[data-testid="correct-toggle"][aria-pressed="true"]').waitFor();
            await toggle.click();
          },
        );
        t.firstRenderMs.push(r.first);
        t.interactiveMs.push(r.interactive);
      }
      out.push(t);
    };
    await listTimes('meetings page, 5 meetings (baseline)');
    for (let i = 0; i < 495; i++)
      await seedMeeting(h, {
        title: `Weekly review ${i}`,
        lines: lines(1),
        createdAt: new Date(Date.now() - i * 3_600_000),
      });
    await listTimes('meetings page, 500 meetings');
    await transcriptTimes('transcript, 5-minute meeting (baseline)', small);
    const long = await seedMeeting(h, { title: 'Three-hour planning day', lines: lines(180) });
    await h.app.database.db
      .updateTable('meetings')
      .set({ duration_ms: 180 * 60_000 })
      .where('id', '=', long)
      .execute();
    await transcriptTimes('transcript, 3-hour meeting (2,160 segments)', long);
    return out;
  } finally {
    await browser.close();
    await web.stop();
    await h.close();
  }
}
