/**
 * P4: storage faults as a user meets them. The local store's file system turned read-only under a
 * running service (a disk remounted after errors): an upload is refused with 503 and Retry-After,
 * never answered 202 and then lost; what was stored stays; once storage is back the same request
 * is accepted and the meeting transcribed.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { SPEECH, spawnVerbatim, speechWav, startHarness, waitForMeeting } from './support/harness.ts';

void it('P4: while the local store is read-only an upload is refused with 503 and Retry-After, nothing is half-stored, and the same upload is accepted and transcribed once storage is back', async () => {
  const h = await startHarness();
  const blobs = path.join(h.dataDir, 'blobs');
  fs.mkdirSync(blobs, { recursive: true });
  let mounted = false;
  try {
    h.spawnWorker();
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'on a bad disk' });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    // The blob root remounted read-only, as a file system after disk errors.
    execFileSync('mount', ['--bind', blobs, blobs]);
    mounted = true;
    execFileSync('mount', ['-o', 'remount,bind,ro', blobs]);
    const audio = speechWav(SPEECH);
    const refused = await h.request('PUT', `/v1/meetings/${id}/recording`, audio, {
      'content-type': 'audio/wav',
    });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, 'storage.unavailable');
    assert.ok(Number(refused.headers['retry-after']) > 0, 'it says when to try again');
    const meeting = await h.request('GET', `/v1/meetings/${id}`);
    assert.notEqual(meeting.json.status, 'failed', 'the meeting waits for its recording');
    assert.notEqual(meeting.json.status, 'processing', 'no upload was taken in');

    execFileSync('umount', [blobs]);
    mounted = false;
    const accepted = await h.request('PUT', `/v1/meetings/${id}/recording`, audio, {
      'content-type': 'audio/wav',
    });
    assert.equal(accepted.status, 202, accepted.text);
    await waitForMeeting(h, id);
    const transcript = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    for (const word of ['budget', 'marketing'])
      assert.ok(transcript.text.toLowerCase().includes(word), transcript.text);
  } finally {
    if (mounted) execFileSync('umount', [blobs]);
    await h.close();
  }
});

void it('S6: a shared folder given as the data dir (sticky and writable by all, as /tmp) is refused and left as it was, never narrowed to the service', async () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-shared-'));
  const shared = path.join(parent, 'tmp');
  fs.mkdirSync(shared);
  fs.chmodSync(shared, 0o1777);
  try {
    const run = spawnVerbatim(['keys', 'list'], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres',
      VERBATIM_DATA_DIR: shared,
    });
    assert.equal(await run.exited, 2, run.output());
    assert.match(
      run.output(),
      /is a shared folder \(mode 1777, as \/tmp\): give Verbatim a folder of its own/,
    );
    assert.equal(fs.statSync(shared).mode & 0o7777, 0o1777, 'its mode is untouched');
  } finally {
    fs.rmSync(parent, { recursive: true, force: true });
  }
});
