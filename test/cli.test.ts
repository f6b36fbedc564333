import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { createTestDatabase } from './support/db.ts';
import {
  FAST_ENV,
  SPEECH,
  speechWav,
  spawnVerbatim,
  startHarness,
  uploadMeeting,
  waitForMeeting,
} from './support/harness.ts';

void it('CLI: `verbatim transcribe FILE` prints the transcript and the minutes through the API path', async () => {
  const db = await createTestDatabase();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-cli-'));
  try {
    const file = path.join(dir, 'meeting.wav');
    fs.writeFileSync(file, speechWav(SPEECH));
    const run = spawnVerbatim(['transcribe', file], {
      ...FAST_ENV,
      DATABASE_URL: db.url,
      VERBATIM_DATA_DIR: dir,
    });
    assert.equal(await run.exited, 0, run.output());
    const out = run.output().toLowerCase();
    assert.match(out, /# transcript/);
    for (const word of ['budget', 'marketing', 'finance']) assert.ok(out.includes(word), `missing "${word}"`);
    assert.match(out, /# minutes \(extractive\)/);
    assert.match(out, /windows\s+complete/, 'the progress line reached complete');
  } finally {
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

void it('CLI: keys create prints a working key once and stores only its hash (S1)', async () => {
  const h = await startHarness();
  try {
    const run = spawnVerbatim(['keys', 'create', '--workspace', 'ops'], h.env());
    assert.equal(await run.exited, 0, run.output());
    const key = /API key \(shown once\): (\S+)/.exec(run.output())?.[1];
    assert.ok(key);
    const stored = await h.app.database.db.selectFrom('api_keys').select('key_hash').execute();
    assert.ok(stored.every((k) => k.key_hash !== key && !k.key_hash.includes(key)));
    const res = await h.api.inject({
      method: 'GET',
      url: '/v1/meetings',
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(res.statusCode, 200);
  } finally {
    await h.close();
  }
});

void it('X1: `verbatim status` shows per-queue pending counts and the age of the oldest', async () => {
  const h = await startHarness();
  try {
    await uploadMeeting(h, speechWav('hello there'));
    const run = spawnVerbatim(['status'], h.env());
    assert.equal(await run.exited, 0, run.output());
    assert.match(run.output(), /queue\s+pending\s+due\s+running\s+oldest due/);
    assert.match(run.output(), /intake\s+1\s+1\s+0/);
  } finally {
    await h.close();
  }
});

void it('upload formats: Ogg/Opus, MP3, WebM/Opus and M4A recordings go through the same pipeline', async () => {
  const h = await startHarness();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-fmt-'));
  try {
    h.spawnWorker();
    const wavFile = path.join(dir, 'in.wav');
    fs.writeFileSync(wavFile, speechWav(SPEECH));
    for (const [ext, type, codec] of [
      ['ogg', 'audio/ogg', 'libopus'],
      ['mp3', 'audio/mpeg', 'libmp3lame'],
      ['webm', 'audio/webm', 'libopus'],
      ['m4a', 'audio/mp4', 'aac'],
    ] as const) {
      const out = path.join(dir, `in.${ext}`);
      execFileSync('ffmpeg', ['-y', '-loglevel', 'error', '-i', wavFile, '-c:a', codec, out]);
      const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: ext });
      const put = await h.request('PUT', `/v1/meetings/${created.json.id}/recording`, fs.readFileSync(out), {
        'content-type': type,
      });
      assert.equal(put.status, 202);
      await waitForMeeting(h, created.json.id);
      const text = (
        await h.request('GET', `/v1/meetings/${created.json.id}/transcript?format=txt`)
      ).text.toLowerCase();
      assert.ok(text.includes('budget') && text.includes('finance'), `${ext}: ${text}`);
    }
  } finally {
    await h.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
