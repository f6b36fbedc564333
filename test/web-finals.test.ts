import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  type Browser,
  VIEWPORTS,
} from './support/browser.ts';
import { markedChunk, startChunkRecognizer, type ChunkRecognizer } from './support/chunk-recognizer.ts';
import { startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';

const CHUNKS = 36;
const CHUNK_SAMPLES = 80_000;

/**
 * The first transcript line at least partly on screen: the stretch it holds, whether it is a
 * draft, and where it sits.
 */
async function firstVisible(
  page: Page,
): Promise<{ ms: number; endMs: number; top: number; draft: boolean } | null> {
  return page.evaluate(`(() => {
    for (const el of document.querySelectorAll('[data-testid="transcript"] [data-start-ms]')) {
      const r = el.getBoundingClientRect();
      if (r.bottom > 0)
        return {
          ms: Number(el.getAttribute('data-start-ms')),
          endMs: Number(el.getAttribute('data-end-ms')),
          top: Math.round(r.top),
          draft: el.closest('[data-draft="1"]') !== null,
        };
    }
    return null;
  })()`);
}

/**
 * E2 with real finals: a live meeting's drafts are on screen, the reader has scrolled up into
 * them, and then the windows' final words replace the drafts above and around the reader (other
 * nodes, other paragraphs). The recogniser is a local server at the HTTP boundary that answers a
 * chunk's draft at once and holds each window until the test lets it go.
 */
void describe('E2/E3 web: finals replacing drafts, and a repair under a correction', () => {
  let h: Harness;
  let recognizer: ChunkRecognizer;
  let web: Awaited<ReturnType<typeof serveWebApp>>;
  let browser: Browser;
  before(async () => {
    recognizer = await startChunkRecognizer({
      sentence: 'and then we went over the plan for the next quarter in some detail again.',
    });
    h = await startHarness({
      env: {
        VERBATIM_ASR: 'whisper',
        VERBATIM_WHISPER_URL: recognizer.url,
        VERBATIM_WINDOW_SECONDS: '20',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: '5',
        VERBATIM_GAP_PATIENCE_SECONDS: '0',
        VERBATIM_DRAFTS: 'on',
        // The drafts of 36 chunks put at once are all wanted on screen, none shed for lag.
        VERBATIM_DRAFT_LAG_SECONDS: '600',
      },
    });
    h.spawnWorker();
    web = await serveWebApp(h, buildWebApp());
    browser = await launchChromium();
    await signIn(browser.page, web.url, h.apiKey);
  });
  after(async () => {
    recognizer?.release();
    await browser?.close();
    await web?.stop();
    await h?.close();
    await recognizer?.close();
  });

  for (const size of VIEWPORTS) {
    void it(`E2: at ${size.width}×${size.height}, when the finals replace the drafts above and around the reader, the first line on screen is the same moment in the same place`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width: size.width, height: size.height });
      // Windows (more than a chunk's samples) wait; each chunk's draft is answered at once.
      recognizer.hold(CHUNK_SAMPLES * 2);
      const created = await h.request('POST', '/v1/meetings', {
        source: 'live',
        title: `Drafts ${size.name}`,
      });
      assert.equal(created.status, 201, created.text);
      const id = created.json.id as string;
      for (let seq = 0; seq < CHUNKS; seq++) {
        const put = await h.request(
          'PUT',
          `/v1/meetings/${id}/chunks/${seq}`,
          markedChunk(seq, CHUNK_SAMPLES),
          {
            'content-type': 'audio/wav',
          },
        );
        assert.equal(put.status, 201, put.text);
      }
      await page.goto(`${web.url}/#/meetings/${id}`);
      const transcript = page.getByTestId('transcript');
      // Every chunk's draft on screen, and no final yet.
      await waitFor(
        'a draft of every chunk',
        async () => (await transcript.locator('[data-draft="1"] [data-start-ms]').count()) >= CHUNKS - 1,
        90_000,
      );
      assert.equal(await transcript.locator('li:not([data-draft="1"])').count(), 0, 'no final yet');

      // The reader scrolls up into the middle of the drafts (away from the end: not following).
      await page.evaluate(`(() => {
        const drafts = document.querySelectorAll('[data-testid="transcript"] [data-draft="1"] [data-start-ms]');
        const el = drafts[Math.floor(drafts.length / 2)];
        window.scrollTo({ top: window.scrollY + el.getBoundingClientRect().top - 200, behavior: 'instant' });
      })()`);
      await waitFor('the scroll to be seen', async () => {
        const f = await firstVisible(page);
        return f !== null && f.ms > 0;
      });
      const before = await firstVisible(page);
      assert.ok(
        before && before.draft && before.ms >= 30_000,
        `a draft far down is first: ${JSON.stringify(before)}`,
      );
      await screenshot(page, `web-e2-drafts-${size.name}`);

      // The windows are let go: their finals replace the drafts (and make other paragraphs).
      recognizer.release();
      await waitFor('the finals to replace every draft above the reader', async () =>
        page.evaluate<boolean>(`(() => {
          for (const el of document.querySelectorAll('[data-testid="transcript"] [data-draft="1"] [data-start-ms]'))
            if (Number(el.getAttribute('data-start-ms')) <= ${before.ms}) return false;
          return true;
        })()`),
      );
      const after = await firstVisible(page);
      assert.ok(after && !after.draft, `a final line is first on screen now: ${JSON.stringify(after)}`);
      // A final line is cut where the window's audio says (a draft where its chunk ends), and a
      // paragraph of finals runs several segments along one line (the first segment whose box
      // reaches the screen may be one whose tail shares the top line): the final segment holding
      // the moment the draft held sits where the draft sat (from its first row, if the draft's
      // hidden rows above the top were more than it has), on the top line of the screen.
      const moment = Math.floor((before.ms + before.endMs) / 2);
      const holding = await page.evaluate<{
        ms: number;
        endMs: number;
        top: number;
        height: number;
      } | null>(`(() => {
        for (const el of document.querySelectorAll('[data-testid="transcript"] [data-start-ms]')) {
          const from = Number(el.getAttribute('data-start-ms'));
          const to = Number(el.getAttribute('data-end-ms'));
          if (el.closest('[data-draft="1"]') === null && from <= ${moment} && ${moment} < to) {
            const r = el.getBoundingClientRect();
            return { ms: from, endMs: to, top: Math.round(r.top), height: Math.round(r.height) };
          }
        }
        return null;
      })()`);
      assert.ok(holding, `a final segment holds the moment (${moment} ms)`);
      const expected = holding.height + before.top > 0 ? before.top : 0;
      assert.ok(
        Math.abs(holding.top - expected) <= 2,
        `the segment holding the moment did not move: the draft was at ${before.top} px, its final is at ${holding.top} px ${JSON.stringify(holding)}`,
      );
      assert.ok(
        holding.top <= 2 && holding.top + holding.height > 0,
        `the moment is on the top line of the screen: ${JSON.stringify(holding)}`,
      );
      await screenshot(page, `web-e2-finals-${size.name}`);
      assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    });
  }

  for (const size of VIEWPORTS) {
    void it(`E3: at ${size.width}×${size.height}, a sentence corrected in the app survives a late chunk's repair: the line moved, its correction kept as written`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width: size.width, height: size.height });
      const late = 3;
      const created = await h.request('POST', '/v1/meetings', {
        source: 'live',
        title: `Repair ${size.name}`,
      });
      const id = created.json.id as string;
      const put = (seq: number) =>
        // The late chunk is a second longer than the stretch kept for it: the lines after it move.
        h.request(
          'PUT',
          `/v1/meetings/${id}/chunks/${seq}`,
          markedChunk(seq, CHUNK_SAMPLES + (seq === late ? 16_000 : 0)),
          {
            'content-type': 'audio/wav',
          },
        );
      for (let seq = 0; seq < 8; seq++) if (seq !== late) assert.equal((await put(seq)).status, 201);
      assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: 8 })).status, 202);
      await waitForMeeting(h, id);
      const read = await h.request('GET', `/v1/meetings/${id}/transcript`);
      const target = (read.json.segments as Array<{ startMs: number; rawText: string }>).find((l) =>
        l.rawText.startsWith('c6x'),
      );
      assert.ok(target, 'a line of chunk 6');

      await page.goto(`${web.url}/#/meetings/${id}`);
      const transcript = page.getByTestId('transcript');
      await transcript.waitFor();
      await page.getByTestId('correct-toggle').click();
      await transcript.locator(`button.seg[data-start-ms="${target.startMs}"]`).click();
      const form = page.getByTestId('correction-form');
      await form.locator('textarea').fill('Chunk six, as the team said it.');
      await form.getByRole('button', { name: 'Save' }).click();
      await transcript.locator(`button.seg[data-corrected="1"][data-start-ms="${target.startMs}"]`).waitFor();
      await page.getByTestId('correct-toggle').click();

      // The missing chunk arrives (a phone that reconnected); the page is not reloaded.
      assert.equal((await put(late)).status, 201);
      await transcript.filter({ hasText: `c${late}x` }).waitFor({ timeout: 60_000 });
      const fixed = transcript.locator('span.seg[data-corrected="1"]');
      await waitFor(
        'the corrected line to move with its words',
        async () =>
          (await fixed.count()) === 1 && Number(await fixed.getAttribute('data-start-ms')) > target.startMs,
        60_000,
      );
      assert.equal((await fixed.textContent())?.trim(), 'Chunk six, as the team said it.');
      assert.match((await fixed.getAttribute('title')) ?? '', /c6x/);
      assert.equal(await page.getByTestId('needs-look').count(), 0, 'nothing needs a look');
      assert.match((await page.getByTestId('transcript-revision').textContent()) ?? '', /revision \d+/);
      await screenshot(page, `web-e3-repair-kept-${size.name}`);
    });
  }
});
