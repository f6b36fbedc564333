// Issue 38 (F1): the quota counts what will be stored. A recording becomes 16 kHz windows for
// transcription (a ten-minute FLAC of silence, 114 KB, is 19 MB of windows): a recording whose
// head says its length is refused before it is kept when those would not fit, and the split admits
// each window it cuts, so a workspace never holds more than its quota.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { storedBytes } from '../src/storage/objects.ts';
import { silenceFile, startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';

const QUOTA = 2_000_000;

void describe('F1: the quota counts the windows a recording becomes', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ env: { VERBATIM_WORKSPACE_QUOTA_BYTES: String(QUOTA) } });
  });
  after(async () => {
    await h?.close();
  });

  const used = () => storedBytes(h.app.database.db, h.workspaceId);
  const upload = async (data: Buffer, type: string) => {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'probe' });
    const id = created.json.id as string;
    return {
      id,
      res: await h.request('PUT', `/v1/meetings/${id}/recording`, data, { 'content-type': type }),
    };
  };

  void it('F1: two ten-minute FLACs of silence (about 100 KB each) against a 2 MB quota are each refused with 413 before anything is stored, saying why', async () => {
    const flac = silenceFile('ten.flac', 600, []);
    assert.ok(flac.length < 200_000, `small as FLAC: ${flac.length} bytes`);
    for (let k = 0; k < 2; k++) {
      const { id, res } = await upload(flac, 'audio/flac');
      assert.equal(res.status, 413, res.text);
      assert.equal(res.json.error.code, 'storage.quota_exceeded');
      assert.match(
        res.json.error.message,
        /about 10 minutes of audio, which becomes 19200000 bytes of windows/,
      );
      assert.equal((await h.request('GET', `/v1/meetings/${id}`)).json.status, 'created');
    }
    assert.equal(await used(), 0, 'nothing stored');
  });

  void it('F1: a recording whose head does not say its length (Ogg/Opus) is taken; the split admits each window, stops at the quota, and the meeting fails saying so; the workspace never holds more than its quota', async () => {
    const ogg = silenceFile('five.ogg', 300, ['-c:a', 'libopus', '-b:a', '8k']);
    const { id, res } = await upload(ogg, 'audio/ogg');
    assert.equal(res.status, 202, res.text);
    let most = 0;
    const watching = (async () => {
      for (;;) {
        most = Math.max(most, await used());
        const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
        if (m.status === 'failed' || m.status === 'complete') return;
      }
    })();
    h.spawnWorker();
    const failed = await waitForMeeting(h, id, 'failed');
    await watching;
    assert.equal(failed.failure.code, 'storage.quota_exceeded');
    assert.match(failed.failure.plain, /did not fit the workspace's storage quota/);
    assert.ok(most > 0 && most <= QUOTA, `held at most the quota: ${most} of ${QUOTA} bytes`);
    await waitFor('the audio to be deleted', async () => (await used()) === 0);
  });
});

void it('F1: a six-hour compressed recording (22 MB) whose windows (691 MB) would pass a 100 MB quota is refused before its body is stored', async () => {
  // A constant-bitrate MP3 without a frame count: its length is its size over its bitrate.
  const minute = silenceFile('minute.mp3', 60, ['-b:a', '8k', '-write_xing', '0', '-id3v2_version', '0']);
  const sixHours = Buffer.concat(Array.from({ length: 360 }, () => minute));
  const h = await startHarness({ env: { VERBATIM_WORKSPACE_QUOTA_BYTES: String(100_000_000) } });
  try {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'six hours' });
    const res = await h.request('PUT', `/v1/meetings/${created.json.id}/recording`, sixHours, {
      'content-type': 'audio/mpeg',
    });
    assert.equal(res.status, 413, res.text);
    assert.match(res.json.error.message, /about 36\d minutes of audio/);
    assert.ok(sixHours.length < 100_000_000, 'the file itself fits the quota');
    assert.equal(await storedBytes(h.app.database.db, h.workspaceId), 0, 'nothing stored');
  } finally {
    await h.close();
  }
});

void it('F1: a recording accepted reserves its windows: the next upload is admitted against them before the split has stored any, and the reservation ends with the split', async () => {
  const h = await startHarness({ env: { VERBATIM_WORKSPACE_QUOTA_BYTES: String(QUOTA) } });
  try {
    // 40 s of silence: about 7 KB as FLAC, 1,280,000 bytes of windows. One fits the 2 MB quota, two do not.
    const flac = silenceFile('forty.flac', 40, []);
    const upload = async () => {
      const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'forty' });
      const id = created.json.id as string;
      const res = await h.request('PUT', `/v1/meetings/${id}/recording`, flac, {
        'content-type': 'audio/flac',
      });
      return { id, res };
    };
    const reserved = async () => (await h.request('GET', '/v1/operator/overview')).json.usage.reservedBytes;
    // No worker yet: the first recording waits for its split with its windows reserved.
    const first = await upload();
    assert.equal(first.res.status, 202, first.res.text);
    assert.equal(await reserved(), 1_280_000, 'its windows are reserved');
    const second = await upload();
    assert.equal(second.res.status, 413, second.res.text);
    assert.equal(second.res.json.error.code, 'storage.quota_exceeded');
    assert.match(second.res.json.error.message, /1280000 more are reserved for recordings being split/);
    assert.equal((await h.request('GET', `/v1/meetings/${second.id}`)).json.status, 'created');

    h.spawnWorker();
    await waitForMeeting(h, first.id, 'complete');
    assert.equal(await reserved(), 0, 'the split spent its reservation');
    await waitFor(
      'its audio to be deleted',
      async () => (await storedBytes(h.app.database.db, h.workspaceId)) === 0,
    );
    const again = await h.request('PUT', `/v1/meetings/${second.id}/recording`, flac, {
      'content-type': 'audio/flac',
    });
    assert.equal(again.status, 202, again.text);
    await waitForMeeting(h, second.id, 'complete');
  } finally {
    await h.close();
  }
});
