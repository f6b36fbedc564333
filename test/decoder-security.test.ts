import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FfmpegAudioDecoder } from '../src/adapters/ffmpeg-audio-decoder.ts';
import { AppError } from '../src/domain/errors.ts';
import { ACCEPTED_AUDIO_TYPES } from '../src/meetings/intake.ts';
import { SPEECH, speechWav, startHarness, waitForMeeting, type Harness } from './support/harness.ts';

/*
 * S4: an upload is read as itself and nothing else. Files that name other inputs — HLS playlists,
 * DASH manifests, ffconcat lists — pointing at a file on the server or at a loopback service are
 * refused as undecodable whatever content type they arrive as: the named file is never read and
 * the listener never hears from ffmpeg. A recording that decodes to more audio than the cap stops
 * there.
 */
void describe('S4: decoding reads only the upload', () => {
  let dir: string;
  let secretWav: string;
  let secretTs: string;
  let listener: http.Server;
  let base: string;
  const heard: string[] = [];
  let h: Harness;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-s4-'));
    // A file on the server a tenant would like transcribed: speech whose words we can look for.
    secretWav = path.join(dir, 'other-tenant.wav');
    fs.writeFileSync(secretWav, speechWav(SPEECH));
    // The same as an MPEG-TS segment, which an HLS playlist may name (ffmpeg checks a segment's
    // extension against its format, so `.ts` is what an attacker would use).
    secretTs = path.join(dir, 'other-tenant.ts');
    execFileSync('ffmpeg', [
      '-y',
      '-loglevel',
      'error',
      '-i',
      secretWav,
      '-c:a',
      'aac',
      '-f',
      'mpegts',
      secretTs,
    ]);
    listener = http.createServer((req, res) => {
      heard.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'audio/wav' }).end(fs.readFileSync(secretWav));
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    h = await startHarness({ env: { VERBATIM_MAX_AUDIO_SECONDS: '60' } });
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await new Promise<void>((r) => listener.close(() => r()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const hostile = (): Record<string, string> => ({
    'an HLS playlist naming a local file': [
      '#EXTM3U',
      '#EXT-X-TARGETDURATION:10',
      '#EXTINF:10,',
      `file://${secretTs}`,
      '#EXT-X-ENDLIST',
      '',
    ].join('\n'),
    'an HLS playlist naming a local path': [
      '#EXTM3U',
      '#EXT-X-TARGETDURATION:10',
      '#EXTINF:10,',
      secretTs,
      '#EXT-X-ENDLIST',
      '',
    ].join('\n'),
    'an HLS playlist naming a loopback URL': [
      '#EXTM3U',
      '#EXT-X-TARGETDURATION:10',
      '#EXTINF:10,',
      `${base}/hls/segment.wav`,
      '#EXT-X-ENDLIST',
      '',
    ].join('\n'),
    'a DASH manifest naming a loopback URL': [
      '<?xml version="1.0" encoding="UTF-8"?>',
      '<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT1S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">',
      `  <BaseURL>${base}/dash/</BaseURL>`,
      '  <Period><AdaptationSet mimeType="audio/mp4"><Representation id="a" bandwidth="64000" codecs="mp4a.40.2">',
      '    <BaseURL>audio.mp4</BaseURL>',
      '  </Representation></AdaptationSet></Period>',
      '</MPD>',
      '',
    ].join('\n'),
    'an ffconcat list naming a local file': ['ffconcat version 1.0', `file '${secretTs}'`, ''].join('\n'),
  });

  void it('S4: playlists, manifests and concat lists are undecodable to the decoder itself; nothing they name is opened', async () => {
    const decoder = new FfmpegAudioDecoder();
    for (const [name, text] of Object.entries(hostile())) {
      const err = await decoder.decode(Buffer.from(text)).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(err instanceof AppError, `${name}: refused`);
      assert.equal(err.code, 'audio.undecodable', `${name}: ${err.message}`);
    }
    assert.deepEqual(heard, [], 'the loopback listener heard nothing');
    // The same decoder still reads what it should.
    const ok = await decoder.decode(speechWav(SPEECH));
    assert.ok(ok.samples.length > 16_000);
  });

  void it('S4/E5: uploaded as each accepted content type, every such file is refused before it is stored (415 recording.not_audio, in plain words); the listener sees no request and the meeting waits for a recording', async () => {
    for (const [name, text] of Object.entries(hostile())) {
      for (const type of ACCEPTED_AUDIO_TYPES) {
        const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: name });
        assert.equal(created.status, 201, created.text);
        const id = created.json.id as string;
        const put = await h.request('PUT', `/v1/meetings/${id}/recording`, Buffer.from(text), {
          'content-type': type,
        });
        assert.equal(put.status, 415, `${name} as ${type}: ${put.text}`);
        assert.equal(put.json.error.code, 'recording.not_audio');
        assert.match(put.json.error.message, /not a recording Verbatim can read/);
        const meeting = await h.request('GET', `/v1/meetings/${id}`);
        assert.equal(
          meeting.json.status,
          'created',
          `${name} as ${type}: nothing stored, a recording may still come`,
        );
      }
    }
    const stored = await h.db
      .owner()
      .selectFrom('blobs')
      .innerJoin('meetings', 'meetings.id', 'blobs.meeting_id')
      .where('meetings.title', 'in', Object.keys(hostile()))
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(stored.n), 0, 'no recording of theirs was stored');
    assert.deepEqual(heard, [], 'the loopback listener heard nothing');
  });

  void it('S4: a decompression bomb (a small FLAC of hours of silence) stops at the cap with audio.too_long', async () => {
    const bomb = path.join(dir, 'bomb.flac');
    execFileSync('ffmpeg', [
      '-y',
      '-loglevel',
      'error',
      '-f',
      'lavfi',
      '-i',
      'anullsrc=r=48000:cl=stereo',
      '-t',
      '7200',
      '-c:a',
      'flac',
      bomb,
    ]);
    const bytes = fs.readFileSync(bomb);
    // Two hours at 48 kHz stereo would be 1.4 GB of PCM; the file is a small fraction of that.
    assert.ok(bytes.length < 20 * 1024 * 1024, `${bytes.length} bytes`);
    const err = await new FfmpegAudioDecoder({ maxSeconds: 60 }).decode(bytes).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof AppError);
    assert.equal(err.code, 'audio.too_long');
    assert.match(err.message, /60 s/);

    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'bomb' });
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/recording`, bytes, {
      'content-type': 'audio/flac',
    });
    assert.equal(put.status, 202, put.text);
    const meeting = await waitForMeeting(h, id, 'failed');
    assert.equal(meeting.failure.code, 'audio.too_long');
  });
});
