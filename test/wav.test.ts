import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { encodeWav, parseWav } from '../src/domain/wav.ts';

function chunk(id: string, body: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.write(id, 0, 'ascii');
  header.writeUInt32LE(body.length, 4);
  return Buffer.concat([header, body, body.length % 2 ? Buffer.alloc(1) : Buffer.alloc(0)]);
}

function fmt(channels: number, bits: number, rate = 16_000): Buffer {
  const b = Buffer.alloc(16);
  b.writeUInt16LE(1, 0);
  b.writeUInt16LE(channels, 2);
  b.writeUInt32LE(rate, 4);
  b.writeUInt32LE((rate * channels * bits) / 8, 8);
  b.writeUInt16LE((channels * bits) / 8, 12);
  b.writeUInt16LE(bits, 14);
  return b;
}

function riff(...chunks: Buffer[]): Buffer {
  const body = Buffer.concat([Buffer.from('WAVE'), ...chunks]);
  const header = Buffer.alloc(8);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(body.length, 4);
  return Buffer.concat([header, body]);
}

void describe('wav', () => {
  void it('round-trips samples through encode and parse', () => {
    const samples = Int16Array.from([0, 1, -1, 32767, -32768, 1234, -4321]);
    const wav = encodeWav(samples, 16_000);
    assert.equal(wav.length, 44 + samples.length * 2);
    const parsed = parseWav(wav);
    assert.ok(parsed);
    assert.equal(parsed.sampleRate, 16_000);
    assert.deepEqual(Array.from(parsed.samples), Array.from(samples));
  });

  void it('skips extra chunks such as LIST, including odd-sized ones', () => {
    const data = Buffer.alloc(6);
    data.writeInt16LE(5, 0);
    data.writeInt16LE(-6, 2);
    data.writeInt16LE(7, 4);
    const wav = riff(
      chunk('fmt ', fmt(1, 16, 8000)),
      chunk('LIST', Buffer.from('INFOabc')),
      chunk('data', data),
    );
    assert.deepEqual(parseWav(wav), { sampleRate: 8000, samples: Int16Array.from([5, -6, 7]) });
  });

  void it('returns null for anything that is not a readable 16-bit mono PCM WAV', () => {
    assert.equal(parseWav(Buffer.from('definitely not audio at all')), null);
    assert.equal(parseWav(Buffer.alloc(0)), null);
    assert.equal(parseWav(riff(chunk('fmt ', fmt(2, 16)), chunk('data', Buffer.alloc(8)))), null);
    assert.equal(parseWav(riff(chunk('fmt ', fmt(1, 8)), chunk('data', Buffer.alloc(8)))), null);
    assert.equal(parseWav(riff(chunk('data', Buffer.alloc(8)))), null);
  });
});
