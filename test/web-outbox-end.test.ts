import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import {
  buildWebApp,
  fakeMicrophoneFile,
  launchChromium,
  screenshot,
  serveWebApp,
  signIn,
  signInWithKeyForm,
  type Browser,
  type WebServer,
  chunksCaptured,
  newWorkspaceKey,
  startLiveMeeting,
  storedChunkSeqs,
  storedMeetingStatus,
} from './support/browser.ts';
import { SPEECH, startHarness, waitFor, type Harness } from './support/harness.ts';

type Page = Browser['page'];

/**
 * The web app's outbox where a recording ends: no chunk after an End, no End past audio the
 * browser could not store, a recording that stops when the server closes its meeting, a failed
 * round that is shown and retried, a revoked key and a deleted meeting. Real Chromium against the
 * real API process; no worker is needed. Each test has its own workspace.
 */
void describe('web app outbox: ending and stopping', () => {
  let h: Harness;
  let web: WebServer;
  let mic: string;
  let browser: Browser | null = null;

  before(async () => {
    h = await startHarness({
      env: {
        VERBATIM_CHUNK_SECONDS: '5',
        VERBATIM_GAP_PATIENCE_SECONDS: '60',
        VERBATIM_CLOSEOUT_GRACE_SECONDS: '30',
      },
    });
    web = await serveWebApp(h, buildWebApp());
    mic = fakeMicrophoneFile(SPEECH);
  });
  beforeEach(async () => {
    await browser?.close();
    browser = null;
  });
  after(async () => {
    await browser?.close();
    await web?.stop();
    await h?.close();
  });

  const workspaceKey = (name: string) => newWorkspaceKey(h, name);

  const as = (apiKey: string) => ({ authorization: `Bearer ${apiKey}` });

  const chunkSeqs = (meetingId: string) => storedChunkSeqs(h, meetingId);

  const meetingStatus = (id: string) => storedMeetingStatus(h, id);

  const record = (page: Page, apiKey: string, title: string) =>
    startLiveMeeting(page, web.url, apiKey, title);

  const captured = chunksCaptured;

  /** The browser went back online (the page's `online` event), as after a network change. */
  const online = (page: Page) => page.evaluate('window.dispatchEvent(new Event("online"))');

  /** Stores one more chunk (a copy of the first) in the page's outbox, as another writer would; returns its seq. */
  const INJECT_CHUNK = (id: string) => `(async () => {
          const db = await new Promise((resolve, reject) => {
            const r = indexedDB.open('verbatim');
            r.onsuccess = () => resolve(r.result);
            r.onerror = () => reject(r.error);
          });
          const tx = db.transaction(['chunks', 'meetings'], 'readwrite');
          const get = (req) => new Promise((resolve) => (req.onsuccess = () => resolve(req.result)));
          const meeting = await get(tx.objectStore('meetings').get(${JSON.stringify(id)}));
          const [model] = await get(tx.objectStore('chunks').getAll(
            IDBKeyRange.bound([${JSON.stringify(id)}, 0], [${JSON.stringify(id)}, Infinity])));
          const seq = meeting.nextSeq;
          tx.objectStore('chunks').add({ meetingId: meeting.meetingId, seq, wav: model.wav, createdAt: Date.now() });
          tx.objectStore('meetings').put({ ...meeting, nextSeq: seq + 1 });
          await new Promise((resolve) => (tx.oncomplete = resolve));
          return seq;
        })()`;

  void it('L1: after a chunk could not be stored, the later chunks stay in memory with it (no reused seq), and End is refused until that audio is downloaded', async () => {
    const { apiKey } = await workspaceKey('unsaved');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Storage hiccup');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    // IndexedDB refuses one chunk through all its tries (the first and three retries), then works
    // again: the last partial chunk, stored when the recording stops, must not take that seq.
    await page.evaluate(`(() => {
      const original = IDBObjectStore.prototype.add;
      let refusals = 4;
      window.addsAfterRefusals = 0;
      IDBObjectStore.prototype.add = function (...args) {
        if (refusals > 0) {
          refusals--;
          throw new DOMException('The disk is full', 'QuotaExceededError');
        }
        window.addsAfterRefusals++;
        return original.apply(this, args);
      };
    })()`);
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /could not be stored/ })
      .waitFor({ timeout: 30_000 });
    await page.locator('article[data-phase="stopped"]').waitFor();
    await page
      .getByTestId('unsaved')
      .filter({ hasText: /^2 chunks/ })
      .waitFor();
    assert.equal(
      await page.evaluate('window.addsAfterRefusals'),
      0,
      'no chunk was stored after the refused one',
    );

    await page.getByRole('button', { name: /End meeting/ }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /could not be stored in this browser and would not reach the server/ })
      .waitFor();
    assert.equal(await meetingStatus(id), 'recording', 'End was not sent past the audio not stored');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: /Download the audio not stored/ }).click(),
    ]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-unsaved-')), 'unsaved.wav');
    await download.saveAs(file);
    assert.ok(fs.statSync(file).size > 44 + 5 * 32_000, 'the refused 5 s chunk and the partial one');
    await page.getByRole('button', { name: /I have downloaded it/ }).click();
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(await captured(page)).keys()], 'the stored ones, 0…n−1');
    await screenshot(page, 'web-outbox-unsaved-end');
  });

  void it('L3: a chunk stored after the sending round listed the meeting’s chunks still reaches the server before End', async () => {
    const { apiKey } = await workspaceKey('late-chunk');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Late chunk');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    // Chunks find no server, so End waits behind them. One handler throughout: swapping handlers
    // left a moment with none, in which a retry could send the last chunk unseen (found in CI).
    let mode: 'refuse' | 'inject' | 'pass' = 'refuse';
    let injected = -1;
    await page.route('**/v1/meetings/*/chunks/*', async (route) => {
      if (mode === 'refuse') return route.abort('connectionrefused');
      if (mode === 'inject') {
        mode = 'pass';
        injected = await page.evaluate<number>(INJECT_CHUNK(id));
      }
      await route.continue();
    });
    await page.getByRole('button', { name: /End meeting/ }).click();
    await page.locator('article[data-phase="stopped"]').waitFor();
    await page.getByText(/Ending the meeting: sending the last/).waitFor();

    // While the round that will send End is sending its first chunk, a chunk is stored behind it
    // (as another writer of the shared outbox would).
    mode = 'inject';
    await online(page);
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.ok(injected >= 0, 'a chunk was stored during the round');
    await waitFor(
      'the late chunk settled',
      async () =>
        (await chunkSeqs(id)).includes(injected) || (await page.getByTestId('rejected').count()) > 0,
      30_000,
    );
    assert.equal(await page.getByTestId('rejected').count(), 0, 'no chunk met an ended meeting');
    assert.deepEqual(await chunkSeqs(id), [...Array(injected + 1).keys()], 'every chunk before End');
    await screenshot(page, 'web-outbox-late-chunk');
  });

  void it('L3: End is stored holding the recording lock, and a meeting whose End waits in this browser cannot be recorded again, even from a tab that still shows Record', async () => {
    const { apiKey } = await workspaceKey('stale-tab');
    const id = (await h.request('POST', '/v1/meetings', { source: 'live', title: 'Stale tab' }, as(apiKey)))
      .json.id as string;
    browser = await launchChromium({ microphoneFile: mic });
    const { page: stale, context } = browser;
    // End stays pending in this browser: its POST finds no server.
    await context.route('**/v1/meetings/*/end', (route) => route.abort('connectionrefused'));
    // No pushed status in this tab (L23): it polls, and below it loses that too. A stream would
    // tell it that the other tab holds the recording lock (it checks on every tick it hears from
    // the server), and it would hide Record then: right for the product, but not the stale tab
    // this test is about (this raced, and failed in CI).
    await stale.route('**/v1/meetings/*/events', (route) => route.abort('connectionrefused'));
    await signIn(stale, web.url, apiKey);
    await stale.goto(`${web.url}/#/meetings/${id}`);
    await stale.getByRole('button', { name: /Record/ }).waitFor();
    // This tab stops hearing about the meeting, so it keeps showing Record.
    await stale.route(`**/v1/meetings/${id}`, (route) => route.abort('connectionrefused'));

    const other = await context.newPage();
    await signIn(other, web.url, apiKey);
    await other.goto(`${web.url}/#/meetings/${id}`);
    await other.getByRole('button', { name: /End meeting/ }).waitFor();
    await other.route(`**/v1/meetings/${id}`, (route) => route.abort('connectionrefused'));
    // In the ending tab, an answer about who holds which lock arrives late (taken now, handed over
    // when the test says): End must not rely on such an answer, but take the lock itself.
    await other.evaluate(`(() => {
      const locks = navigator.locks;
      const original = locks.query.bind(locks);
      const waiting = [];
      window.heldQueries = 0;
      window.releaseQueries = () => waiting.splice(0).forEach((resume) => resume());
      locks.query = async () => {
        const answer = await original();
        window.heldQueries++;
        await new Promise((resume) => waiting.push(resume));
        return answer;
      };
    })()`);
    await other.getByRole('button', { name: /End meeting/ }).click();
    await waitFor(
      'End stored, or waiting on a lock answer',
      async () =>
        (await other.getByText(/Ending the meeting/).count()) > 0 ||
        (await other.evaluate<number>('window.heldQueries')) > 0,
    );

    await stale.getByRole('button', { name: /Record/ }).click();
    const refused = stale.getByRole('alert').filter({ hasText: /End meeting was already pressed/ });
    await waitFor(
      'the Record click to be refused or to start recording',
      async () =>
        (await refused.count()) > 0 || (await stale.locator('article[data-phase="recording"]').count()) > 0,
    );
    await other.evaluate('window.releaseQueries()');
    await refused.waitFor();
    assert.notEqual(await stale.locator('article').getAttribute('data-phase'), 'recording');
    assert.deepEqual(await chunkSeqs(id), [], 'no audio after End');
    await screenshot(stale, 'web-outbox-stale-record');
  });

  void it('L3: a meeting ended elsewhere (the API) stops this tab’s recording with the reason', async () => {
    const { apiKey } = await workspaceKey('ended-elsewhere');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Ended elsewhere');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, undefined, as(apiKey))).status, 202);
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /ended elsewhere/ })
      .waitFor({ timeout: 30_000 });
    await page.locator('article[data-phase="stopped"]').waitFor();
    await screenshot(page, 'web-outbox-ended-elsewhere');
  });

  void it('L3/L19: a chunk sent after the meeting was ended elsewhere is kept by the server, and its answer stops the recording', async () => {
    const { apiKey } = await workspaceKey('not-recording');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    // No pushed status either (L23): the page polls, and below it loses that too.
    await page.route('**/v1/meetings/*/events', (route) => route.abort('connectionrefused'));
    const id = await record(page, apiKey, 'Chunks after End');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    // The page no longer hears the meeting's status; only the chunk answers say it was ended.
    await page.route(`**/v1/meetings/${id}`, (route) => route.abort('connectionrefused'));
    const before = (await chunkSeqs(id)).length;
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, undefined, as(apiKey))).status, 202);
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /no longer recording/ })
      .waitFor({ timeout: 30_000 });
    await page.locator('article[data-phase="stopped"]').waitFor();
    assert.ok((await chunkSeqs(id)).length > before, 'the chunk sent after End was stored, not refused');
    assert.equal(await page.getByTestId('rejected').count(), 0, 'nothing kept as refused');
    await screenshot(page, 'web-outbox-not-recording');
  });

  void it('L1: when this browser’s storage fails before the outbox could be read, the error is shown and the round is retried by itself', async () => {
    const { apiKey } = await workspaceKey('idb-broken');
    browser = await launchChromium();
    const { page } = browser;
    await page.addInitScript(`(() => {
      const original = IDBObjectStore.prototype.getAllKeys;
      window.storageBroken = true;
      IDBObjectStore.prototype.getAllKeys = function (...args) {
        if (window.storageBroken) throw new DOMException('storage is broken', 'UnknownError');
        return original.apply(this, args);
      };
    })()`);
    await signIn(page, web.url, apiKey);
    const problem = page.getByTestId('outbox-error').filter({ hasText: /storage failed/ });
    await problem.waitFor({ timeout: 30_000 });
    await page.evaluate('window.storageBroken = false');
    await problem.waitFor({ state: 'detached', timeout: 30_000 });
    await screenshot(page, 'web-outbox-storage-recovered');
  });

  void it('L3: an End refused with 401 (key revoked before it was delivered) stays pending, going back online does not retry the revoked key, and it is delivered after signing in again', async () => {
    const { workspaceId, keyId, apiKey } = await workspaceKey('end-401');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'End after revoke');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    await page.route('**/v1/meetings/*/end', (route) => route.abort('connectionrefused'));
    await page.getByRole('button', { name: /End meeting/ }).click();
    await page.locator('article[data-phase="stopped"]').waitFor();
    await page.getByText(/Ending the meeting: telling the server/).waitFor({ timeout: 30_000 });
    const n = await captured(page);

    await h.app.database.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('id', '=', keyId)
      .execute();
    // Listening before the route is lifted: the outbox may try End again at once.
    const refused = page.waitForResponse((r) => r.url().endsWith('/end') && r.status() === 401);
    await page.unroute('**/v1/meetings/*/end');
    await online(page);
    await refused;
    const prompt = page.getByTestId('sign-in-again');
    await prompt.filter({ hasText: /an End meeting/ }).waitFor();
    assert.equal(await meetingStatus(id), 'recording');

    // A reconnect forgets backoffs, not the refused key: nothing goes out with it. Proving that
    // nothing is sent takes a bounded wait.
    const retried = page.waitForRequest((r) => r.url().endsWith('/end'), { timeout: 3_000 });
    await online(page);
    await assert.rejects(retried, /Timeout/, 'the revoked key is not tried again');
    await prompt.waitFor();

    const fresh = await h.app.workspaces.createApiKey(workspaceId, 'fresh');
    await prompt.getByRole('button', { name: 'Sign in again' }).click();
    await page.locator('[data-testid="outbox-waiting"][data-ends="1"]').waitFor();
    await signInWithKeyForm(page, fresh.apiKey);
    await waitFor('the End to arrive', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(n).keys()]);
    await screenshot(page, 'web-outbox-end-401');
  });

  void it('L1: a meeting deleted on the server is said so; its kept audio can be downloaded, then discarded', async () => {
    const { apiKey } = await workspaceKey('deleted');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Deleted meanwhile');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    assert.equal((await h.request('DELETE', `/v1/meetings/${id}`, undefined, as(apiKey))).status, 204);
    const trouble = page.getByTestId('outbox-trouble').filter({ hasText: /deleted on the server/ });
    await trouble.waitFor({ timeout: 30_000 });
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /deleted on the server/ })
      .waitFor();
    await page.locator('article[data-phase="stopped"]').waitFor();
    assert.equal(await page.getByRole('button', { name: /Discard/ }).count(), 0, 'download comes first');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: /Download the kept audio/ }).click(),
    ]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-kept-')), 'kept.wav');
    await download.saveAs(file);
    assert.ok(fs.statSync(file).size > 44 + 5 * 32_000, 'at least the refused 5 s chunk');
    await page.getByRole('button', { name: /Discard it from this browser/ }).click();
    await trouble.waitFor({ state: 'detached' });
    await page.goto(`${web.url}/#/`);
    await page.getByRole('heading', { name: 'Meetings' }).waitFor();
    assert.equal(await page.getByTestId('outbox-summary').count(), 0, 'nothing kept any more');
    await screenshot(page, 'web-outbox-deleted');
  });
});
