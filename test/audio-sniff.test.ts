import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SNIFF_BYTES, sniffAudioContainer } from '../src/domain/audio-sniff.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-sniff-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** One second of a tone, encoded by Debian's ffmpeg as a user's recorder would. */
function encoded(file: string, codec: string[]): Buffer {
  const out = path.join(dir, file);
  execFileSync('ffmpeg', [
    ...['-y', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=1'],
    ...codec,
    out,
  ]);
  return fs.readFileSync(out).subarray(0, 64);
}

void describe('E5: an upload is known for audio by its first bytes', () => {
  void it('E5: every container the decoder accepts, as ffmpeg writes it, is recognised', () => {
    const cases: Array<[string, string[], string]> = [
      ['a.wav', ['-c:a', 'pcm_s16le'], 'wav'],
      ['a.flac', ['-c:a', 'flac'], 'flac'],
      ['a.ogg', ['-c:a', 'libopus'], 'ogg'],
      ['a.webm', ['-c:a', 'libopus'], 'matroska'],
      ['a.m4a', ['-c:a', 'aac'], 'mp4'],
      ['a.aac', ['-c:a', 'aac', '-f', 'adts'], 'aac'],
      ['a.mp3', ['-c:a', 'libmp3lame'], 'mp3'],
      ['b.mp3', ['-c:a', 'libmp3lame', '-write_xing', '0', '-id3v2_version', '0'], 'mp3'],
    ];
    for (const [file, codec, kind] of cases) {
      assert.equal(sniffAudioContainer(encoded(file, codec)), kind, file);
    }
    // An MP3 stream after zero padding, as some recorders write it (ffmpeg reads it).
    const padded = Buffer.concat([
      Buffer.alloc(1000),
      encoded('c.mp3', ['-c:a', 'libmp3lame', '-write_xing', '0', '-id3v2_version', '0']),
    ]);
    assert.equal(
      sniffAudioContainer(padded.subarray(0, SNIFF_BYTES)),
      'mp3',
      'zero padding before the first frame',
    );
    assert.equal(sniffAudioContainer(Buffer.alloc(SNIFF_BYTES)), null, 'zeros alone are not audio');
  });

  void it('E5: a text file renamed .wav, a PDF, a PNG, HTML, an HLS playlist, a short or empty body are not audio', () => {
    const notAudio = [
      Buffer.from('Meeting notes: budget review on Monday\n'),
      Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3', 'latin1'),
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]),
      Buffer.from('<!doctype html><html>'),
      Buffer.from('#EXTM3U\n#EXT-X-VERSION:3\n'),
      Buffer.from('RIFF\x24\x00\x00\x00AVI ', 'latin1'),
      Buffer.from('RI'),
      Buffer.alloc(0),
    ];
    for (const head of notAudio)
      assert.equal(sniffAudioContainer(head), null, JSON.stringify(head.toString('latin1')));
  });
});
