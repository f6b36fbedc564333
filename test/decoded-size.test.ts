import assert from 'node:assert/strict';
import { it } from 'node:test';
import { durationFromHead, windowBytesFor } from '../src/domain/decoded-size.ts';
import { SNIFF_BYTES } from '../src/domain/audio-sniff.ts';
import { silenceFile } from './support/harness.ts';

/** A file of `seconds` of stereo 44.1 kHz silence made with `args`: its head and its size. */
function made(name: string, seconds: number, args: string[]): { head: Buffer; bytes: number } {
  const data = silenceFile(name, seconds, args, { rate: 44_100, channels: 'stereo' });
  return { head: data.subarray(0, SNIFF_BYTES), bytes: data.length };
}

void it('F1: the duration an upload holds is read from its head: WAV, FLAC and MP3 (framed or constant bitrate); other containers say nothing', () => {
  const within = (got: number | undefined, want: number) =>
    assert.ok(got !== undefined && Math.abs(got - want) < 0.5, `${got} s, want ${want} s`);
  const wav = made('a.wav', 30, ['-ar', '16000', '-ac', '1']);
  within(durationFromHead(wav.head, wav.bytes)?.seconds, 30);
  const flac = made('a.flac', 600, ['-ac', '2']);
  const f = durationFromHead(flac.head, flac.bytes);
  within(f?.seconds, 600);
  assert.equal(f?.channels, 2);
  assert.ok(flac.bytes < 400_000, `ten minutes of silence is small as FLAC: ${flac.bytes} bytes`);
  assert.equal(windowBytesFor(f, false), 600 * 32_000, 'and 19.2 MB as windows');
  assert.equal(windowBytesFor(f, true), 2 * 600 * 32_000, 'twice that, a set per channel');
  const framed = made('a.mp3', 120, ['-b:a', '32k']);
  within(durationFromHead(framed.head, null)?.seconds, 120);
  const bare = made('b.mp3', 120, ['-b:a', '32k', '-write_xing', '0', '-id3v2_version', '0']);
  within(durationFromHead(bare.head, bare.bytes)?.seconds, 120);
  assert.equal(durationFromHead(bare.head, null), null, 'no frame count and no length: unknown');
  const ogg = made('a.ogg', 30, ['-c:a', 'libopus']);
  assert.equal(durationFromHead(ogg.head, ogg.bytes), null);
  assert.equal(durationFromHead(Buffer.from('not audio at all, just text'), 27), null);
});
