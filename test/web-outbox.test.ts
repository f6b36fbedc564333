import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { encodeWav } from '../web/src/audio/wav.ts';
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

/**
 * The web app's outbox under the answers that must not lose audio: a full storage quota, an End
 * left pending by a closed tab, a second tab, a revoked key. Real Chromium against the real API
 * process; no worker is needed (nothing here waits for a transcript), which keeps these quick.
 * Each test has its own workspace, so the storage quota of one does not touch another.
 */
const QUOTA_BYTES = 2_500_000;

void describe('web app outbox', () => {
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
        VERBATIM_WORKSPACE_QUOTA_BYTES: String(QUOTA_BYTES),
      },
    });
    web = await serveWebApp(h, buildWebApp());
    mic = fakeMicrophoneFile(SPEECH);
  });
  beforeEach(async () => {
    await browser?.close();
    browser = null;
    await web.start();
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

  const record = (page: Browser['page'], apiKey: string, title: string) =>
    startLiveMeeting(page, web.url, apiKey, title);

  const captured = chunksCaptured;

  void it('L19: a reconnecting tab sends its backlog a few at a time and out of order; every chunk lands and none is kept as refused', async () => {
    const { apiKey } = await workspaceKey('reconnect');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Reconnecting');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    await web.stop();
    await page.locator('[data-testid="outbox"][data-pending="4"]').waitFor({ timeout: 40_000 });
    const before = await chunkSeqs(id);
    const first = Math.max(...before) + 1;
    // The first chunk of the backlog is held on its way until the three after it are stored.
    let held = false;
    await page.route(`**/v1/meetings/${id}/chunks/${first}`, async (route) => {
      held = true;
      await waitFor('the chunks after the held one to land', async () => {
        const seqs = await chunkSeqs(id);
        return [1, 2, 3].every((k) => seqs.includes(first + k));
      });
      await route.continue();
    });
    await web.start();
    await waitFor('the held chunk to land', async () => (await chunkSeqs(id)).includes(first), 60_000);
    assert.ok(held, 'the first chunk of the backlog was held back');
    const rows = await h.app.database.db
      .selectFrom('chunks')
      .select(['seq', 'created_at'])
      .where('meeting_id', '=', id)
      .where('seq', 'in', [first, first + 1])
      .execute();
    const at = (seq: number) => rows.find((r) => r.seq === seq)!.created_at.getTime();
    assert.ok(at(first + 1) < at(first), 'the server got the backlog out of order');

    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('End delivered', async () => (await meetingStatus(id)) === 'finalizing', 60_000);
    // End went after the last chunk, declaring how many were recorded (L20).
    const meeting = (await h.request('GET', `/v1/meetings/${id}`, undefined, as(apiKey))).json;
    const declared = meeting.declaredChunks as number;
    assert.ok(declared >= first + 4, `End declared ${declared} chunks`);
    assert.deepEqual(await chunkSeqs(id), [...Array(declared).keys()], 'every sequence number landed');
    assert.equal(await page.getByTestId('rejected').count(), 0, 'nothing kept as refused');
    await screenshot(page, 'web-outbox-reconnect');
  });

  void it('L1: chunks refused with 413 storage.quota_exceeded stay in the browser and are delivered once space is freed', async () => {
    // A real refusal: this workspace fills its quota through the API with another meeting's chunks.
    const { apiKey } = await workspaceKey('quota');
    const filler = (await h.request('POST', '/v1/meetings', { source: 'live', title: 'filler' }, as(apiKey)))
      .json.id as string;
    const fiveSeconds = Buffer.from(encodeWav(new Int16Array(80_000), 16_000));
    for (let seq = 0; ; seq++) {
      const res = await h.request('PUT', `/v1/meetings/${filler}/chunks/${seq}`, fiveSeconds, {
        ...as(apiKey),
        'content-type': 'audio/wav',
      });
      if (res.status === 413) {
        assert.equal(res.json.error.code, 'storage.quota_exceeded');
        break;
      }
      assert.equal(res.status, 201);
      assert.ok(seq < 40, 'the quota fills');
    }

    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Full workspace');
    await page
      .getByTestId('outbox-trouble')
      .filter({ hasText: /storage quota is full/ })
      .waitFor({ timeout: 30_000 });
    await page.locator('[data-testid="outbox"][data-pending="2"]').waitFor({ timeout: 30_000 });
    assert.deepEqual(await chunkSeqs(id), [], 'nothing was accepted while the quota was full');
    assert.equal(await page.getByTestId('rejected').count(), 0, 'a full quota does not reject a chunk');

    // Space is freed: the kept chunks go out, in order, without a hole.
    assert.equal((await h.request('DELETE', `/v1/meetings/${filler}`, undefined, as(apiKey))).status, 204);
    await waitFor('the kept chunks to arrive', async () => (await chunkSeqs(id)).length >= 2, 30_000);
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    const n = await captured(page);
    assert.deepEqual(await chunkSeqs(id), [...Array(n).keys()], 'every captured chunk, 0…n−1');
    await screenshot(page, 'web-outbox-quota');
  });

  void it('L3: an End left pending by a tab closed during an outage is delivered after the next sign-in, not before', async () => {
    const { apiKey } = await workspaceKey('end');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Ended offline');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    // The outage hits the End itself: every chunk gets through, the End's POST finds no server
    // (page.route refuses the connection for this tab only), so only the End is left pending.
    await page.route('**/v1/meetings/*/end', (route) => route.abort('connectionrefused'));
    await page.getByRole('button', { name: /End meeting/ }).click();
    await page.locator('article[data-phase="stopped"]').waitFor();
    // Closed only once the End is in this browser's store (a tab closed before that has no End to
    // keep) and, after it, every chunk is on the server.
    await page.locator('[data-testid="ending"][data-end-kept="1"]').waitFor({ timeout: 30_000 });
    await page.locator('[data-testid="outbox"][data-pending="0"]').waitFor({ timeout: 30_000 });
    await page.getByText(/Ending the meeting: telling the server/).waitFor();
    const n = await captured(page);
    await page.close();

    // A new tab has no key (it lives in the tab's session): the app says what waits and sends
    // nothing, so the End cannot be spent on a 401.
    const again = await browser.context.newPage();
    await again.goto(`${web.url}/`);
    await again.locator('[data-testid="outbox-waiting"][data-ends="1"][data-chunks="0"]').waitFor();
    assert.equal(await meetingStatus(id), 'recording', 'End is not sent without a key');
    await signInWithKeyForm(again, apiKey);
    await waitFor('the End to arrive', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(n).keys()], 'every chunk went before the End');
    await screenshot(again, 'web-outbox-end-after-sign-in');
  });

  void it('L1: the chunk being filled survives a killed browser (SIGKILL, no unload): it is sent as a short chunk after relaunch, then End', async () => {
    const { apiKey } = await workspaceKey('killed');
    const first = await launchChromium({ microphoneFile: mic });
    browser = first;
    const id = await record(first.page, apiKey, 'Killed mid-chunk');
    // One 5 s chunk on the server and at least 2 s of the next one in the browser's draft.
    const article = first.page.locator('article');
    const { n, draft } = await waitFor(
      'a chunk on the server and a draft of at least 2 s',
      async () => {
        const n = Number(await article.getAttribute('data-chunks-captured'));
        const draft = Number(await article.getAttribute('data-draft-seconds'));
        return n >= 1 && draft >= 2 && (await chunkSeqs(id)).length === n ? { n, draft } : null;
      },
      30_000,
    );
    await first.kill();

    // The same profile again, as after a crash: the draft's tab is gone, so its chunk is sent.
    browser = await launchChromium({ microphoneFile: mic, userDataDir: first.userDataDir });
    const { page } = browser;
    await signIn(page, web.url, apiKey);
    await waitFor('the drafted chunk to arrive', async () => (await chunkSeqs(id)).length > n, 20_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(n + 1).keys()], 'chunks 0…n, the draft as chunk n');
    const last = await h.app.database.db
      .selectFrom('chunks')
      .select('samples')
      .where('meeting_id', '=', id)
      .where('seq', '=', n)
      .executeTakeFirstOrThrow();
    const samples = last.samples ?? 0;
    assert.ok(
      samples >= draft * 16_000 && samples < 80_000,
      `chunk ${n} holds the ${draft}+ s drafted before the kill, less than a full chunk: ${samples / 16_000} s`,
    );

    // End goes after it, and the meeting has no hole.
    await page.goto(`${web.url}/#/meetings/${id}`);
    await page.getByRole('button', { name: /Continue recording/ }).waitFor();
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(n + 1).keys()]);
    assert.deepEqual(
      (await h.request('GET', `/v1/meetings/${id}`, undefined, as(apiKey))).json.missingChunks,
      [],
    );
    await screenshot(page, 'web-outbox-killed-draft');
  });

  void it('L1: a second tab cannot record or end a meeting another tab is recording, and says why', async () => {
    const { apiKey } = await workspaceKey('tabs');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Two tabs');
    const second = await browser.context.newPage();
    await signIn(second, web.url, apiKey);
    await second.goto(`${web.url}/#/meetings/${id}`);
    await second.getByTestId('recording-elsewhere').waitFor();
    assert.equal(await second.getByRole('button', { name: /Continue recording/ }).count(), 0);
    await second.getByRole('button', { name: /End meeting/ }).click();
    await second
      .getByRole('alert')
      .filter({ hasText: /recorded in another tab/ })
      .waitFor();
    assert.ok(['created', 'recording'].includes(await meetingStatus(id)), 'the second tab did not end it');

    // The first tab goes on; its End ends the meeting with every chunk, numbered without a hole.
    await waitFor('two chunks from the first tab', async () => (await captured(page)) >= 2, 30_000);
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(await captured(page)).keys()]);
    await screenshot(second, 'web-outbox-second-tab');
  });

  void it('L1: a 401 (key revoked) keeps every chunk in the browser and asks to sign in again; after it they are sent', async () => {
    const { workspaceId, keyId, apiKey } = await workspaceKey('revoked');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Revoked key');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    await h.app.database.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('id', '=', keyId)
      .execute();
    const prompt = page.getByTestId('sign-in-again');
    await prompt.waitFor({ timeout: 30_000 });
    await page.locator('[data-testid="outbox"][data-pending="2"]').waitFor({ timeout: 30_000 });
    const onServer = await chunkSeqs(id);

    // Sign in again with a new key of the same workspace: the kept chunks go out, recording went on.
    const fresh = await h.app.workspaces.createApiKey(workspaceId, 'fresh');
    await prompt.getByRole('button', { name: 'Sign in again' }).click();
    await page.locator('[data-testid="outbox-waiting"]').waitFor();
    await signInWithKeyForm(page, fresh.apiKey);
    await waitFor(
      'the kept chunks to arrive',
      async () => (await chunkSeqs(id)).length >= onServer.length + 2,
    );
    await page.goto(`${web.url}/#/meetings/${id}`);
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(await captured(page)).keys()]);
    await screenshot(page, 'web-outbox-signed-in-again');
  });

  void it("L1: signing out keeps the chunks; another workspace's key gets 404 and they stay, shown; its own workspace's key sends them", async () => {
    const own = await workspaceKey('own');
    const other = await workspaceKey('other');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, own.apiKey, 'Signed out');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    await page.getByRole('button', { name: 'Sign out' }).click();
    // The recording goes on behind the sign-in screen; its chunks wait for a key.
    await page.locator('[data-testid="outbox-waiting"][data-chunks="1"]').waitFor({ timeout: 30_000 });

    await signInWithKeyForm(page, other.apiKey);
    await page
      .getByTestId('outbox-summary')
      .locator(`li[data-meeting-id="${id}"]`)
      .filter({ hasText: /another workspace/ })
      .waitFor({ timeout: 30_000 });
    assert.equal(
      await page
        .getByTestId('outbox-summary')
        .getByText(/refused by the server/)
        .count(),
      0,
      'a 404 rejects nothing',
    );

    // Signed in again in place (a reload would end this tab's recording).
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signInWithKeyForm(page, own.apiKey);
    await page.getByRole('heading', { name: 'Meetings' }).waitFor();
    await page.goto(`${web.url}/#/meetings/${id}`);
    await page.getByRole('button', { name: /End meeting/ }).click();
    await waitFor('the meeting to end', async () => (await meetingStatus(id)) === 'finalizing', 30_000);
    assert.deepEqual(await chunkSeqs(id), [...Array(await captured(page)).keys()]);
    await screenshot(page, 'web-outbox-other-workspace');
  });

  void it('L1: when IndexedDB refuses a chunk the recording stops with an error and the audio can be downloaded', async () => {
    const { apiKey } = await workspaceKey('idb');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    const id = await record(page, apiKey, 'Full disk');
    await waitFor('a first chunk acknowledged', async () => (await chunkSeqs(id)).length >= 1, 30_000);
    // The browser's storage boundary fails as a full disk does: every chunk write throws.
    await page.evaluate(() => {
      // Runs in the page; the test program has no DOM types.
      const g = globalThis as unknown as {
        IDBObjectStore: { prototype: { add: () => never } };
        DOMException: new (message: string, name: string) => Error;
      };
      g.IDBObjectStore.prototype.add = () => {
        throw new g.DOMException('The disk is full', 'QuotaExceededError');
      };
    });
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /could not be stored/ })
      .waitFor({ timeout: 30_000 });
    await page.locator('article[data-phase="stopped"]').waitFor();
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: /Download the audio not stored/ }).click(),
    ]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-unsaved-')), 'unsaved.wav');
    await download.saveAs(file);
    const wav = fs.readFileSync(file);
    assert.equal(wav.subarray(0, 4).toString(), 'RIFF');
    assert.ok(wav.length > 44 + 16_000, `the chunk not stored is in the download (${wav.length} bytes)`);
    assert.deepEqual(
      await chunkSeqs(id),
      [...Array(await captured(page)).keys()],
      'what was stored went out',
    );
    await screenshot(page, 'web-outbox-idb-refused');
  });

  void it('L1: when the microphone goes away the recording stops with the reason and keeps what was captured', async () => {
    const { apiKey } = await workspaceKey('unplugged');
    browser = await launchChromium({ microphoneFile: mic });
    const { page } = browser;
    // Keeps a handle on the microphone track so the test can end it as an unplugged device does.
    interface Track {
      dispatchEvent(e: unknown): boolean;
    }
    interface Stream {
      getAudioTracks(): Track[];
    }
    interface PageGlobals {
      micTracks: Track[];
      Event: new (type: string) => unknown;
      navigator: { mediaDevices: { getUserMedia: (c: unknown) => Promise<Stream> } };
    }
    await page.addInitScript(() => {
      const g = globalThis as unknown as PageGlobals;
      const devices = g.navigator.mediaDevices;
      const original = devices.getUserMedia.bind(devices);
      devices.getUserMedia = async (c: unknown) => {
        const stream = await original(c);
        g.micTracks = stream.getAudioTracks();
        return stream;
      };
    });
    const id = await record(page, apiKey, 'Unplugged');
    await waitFor('a first chunk captured', async () => (await captured(page)) >= 1, 30_000);
    await page.evaluate(() => {
      const g = globalThis as unknown as PageGlobals;
      for (const t of g.micTracks) t.dispatchEvent(new g.Event('ended'));
    });
    await page
      .getByTestId('recording-error')
      .filter({ hasText: /microphone stopped/ })
      .waitFor();
    await page.locator('article[data-phase="stopped"]').waitFor();
    const n = await captured(page);
    assert.ok(n >= 2, `the partial chunk after the last full one was kept (${n} chunks)`);
    await waitFor(
      'every captured chunk on the server',
      async () => (await chunkSeqs(id)).length === n,
      30_000,
    );
    assert.deepEqual(await chunkSeqs(id), [...Array(n).keys()]);
    await screenshot(page, 'web-outbox-unplugged');
  });
});
