import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { it } from 'node:test';
import { startFakeWhisper } from './support/fake-openai.ts';
import {
  memoryOf,
  SPEECH,
  speechWav,
  startHarness,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const MiB = 1024 * 1024;
const MINUTES = 120;
const WARM_MINUTES = 10;
/** What the whole recording decodes to: 16 kHz mono s16le, as the split's decoder yields it. */
const DECODED_BYTES = MINUTES * 60 * 16_000 * 2;
/**
 * What the worker's peak resident size may grow by from the 10-minute recording to the 2-hour one.
 * Generous for a streaming split, which holds one window (1.9 MB) and the second after its slot, the
 * pipe's piece and two windows in transcription, whatever the length; far under what holding the
 * decode takes: 200 MiB more samples for the longer recording, 220 MiB in all. Measured on the
 * 2-CPU machine (2026-12-05): 33 MiB alone, 10 to 55 MiB with other tests running; with the split
 * collecting every decoded piece before cutting, 322 MiB.
 */
const BOUND = 128 * MiB;

/** `minutes` of flite speech, repeated, as FLAC (about 66 MB an hour): a real upload format. */
function longFlac(minutes: number): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-long-'));
  try {
    const speech = path.join(dir, 'speech.wav');
    fs.writeFileSync(speech, speechWav(SPEECH));
    const out = path.join(dir, 'long.flac');
    execFileSync('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-stream_loop',
      '-1',
      '-i',
      speech,
      '-t',
      String(minutes * 60),
      '-ac',
      '1',
      '-ar',
      '16000',
      '-c:a',
      'flac',
      out,
    ]);
    return fs.readFileSync(out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function uploadFlac(h: Harness, flac: Buffer, title: string): Promise<string> {
  const created = await h.request('POST', '/v1/meetings', { source: 'upload', title });
  assert.equal(created.status, 201, created.text);
  const id = created.json.id as string;
  const put = await h.request('PUT', `/v1/meetings/${id}/recording`, flac, { 'content-type': 'audio/flac' });
  assert.equal(put.status, 202, put.text);
  return id;
}

void it('J19: a worker that split a 10-minute recording splits a 2-hour one (230 MB once decoded) with its peak resident size grown by less than 128 MiB: memory does not grow with the recording’s length', async (t) => {
  const whisper = await startFakeWhisper(() => 'ok');
  const h = await startHarness({
    env: {
      // An instant recogniser, so the time goes to decoding and cutting, and the production window.
      VERBATIM_ASR: 'whisper',
      VERBATIM_WHISPER_URL: whisper.url,
      VERBATIM_WINDOW_SECONDS: '60',
    },
  });
  try {
    const worker = h.spawnWorker();
    // The same worker splits a 10-minute recording first: its code is loaded, its pools are open
    // and V8's heap and malloc's arenas are at the size splitting and transcribing work at. What
    // the peak grows by from there, for a recording 12 times as long, is memory that grows with
    // the length (a split holding the decode would need 200 MiB more for the samples alone).
    const warm = await uploadFlac(h, longFlac(WARM_MINUTES), 'ten minutes');
    await waitForMeeting(h, warm);
    const before = memoryOf(worker.pid);

    const id = await uploadFlac(h, longFlac(MINUTES), 'two hours');
    const meeting = await waitForMeeting(h, id);
    const after = memoryOf(worker.pid);

    // The whole recording went through the split: every window cut and transcribed.
    assert.equal(meeting.status, 'complete');
    const db = h.app.database.db;
    const row = await db
      .selectFrom('meetings')
      .select('duration_ms')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.equal(row.duration_ms, MINUTES * 60_000);
    const windows = await db.selectFrom('windows').select('status').where('meeting_id', '=', id).execute();
    assert.equal(windows.length, MINUTES);
    assert.ok(windows.every((w) => w.status === 'transcribed'));

    const growth = after.peak - Math.max(before.peak, before.rss);
    assert.ok(
      growth < BOUND,
      `the worker's peak resident size grew by ${(growth / MiB).toFixed(1)} MiB while splitting ` +
        `${MINUTES} minutes (bound ${BOUND / MiB} MiB; the decoded recording is ` +
        `${(DECODED_BYTES / MiB).toFixed(0)} MiB): before ${(before.peak / MiB).toFixed(0)} MiB peak, ` +
        `${(before.rss / MiB).toFixed(0)} MiB resident; after ${(after.peak / MiB).toFixed(0)} MiB peak`,
    );
    t.diagnostic(
      `peak resident size grew by ${(growth / MiB).toFixed(1)} MiB (before: peak ${(before.peak / MiB).toFixed(0)} MiB, ` +
        `resident ${(before.rss / MiB).toFixed(0)} MiB; after: peak ${(after.peak / MiB).toFixed(0)} MiB)`,
    );
  } finally {
    await h.close();
    await whisper.close();
  }
});
