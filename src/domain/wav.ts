import type { DecodedAudio } from '../ports.ts';

/**
 * WAV is little-endian: on such a machine samples are copied as bytes, not one by one. The byte
 * order is read from a 16-bit 1 (low byte first on little-endian), not from node:os.
 */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Encodes 16-bit mono PCM samples as a canonical 44-byte-header RIFF/WAVE file. */
export function encodeWav(samples: Int16Array, sampleRate: number): Buffer {
  const dataBytes = samples.length * 2;
  const buf = Buffer.alloc(44 + dataBytes);
  buf.write('RIFF', 0, 'ascii');
  buf.writeUInt32LE(36 + dataBytes, 4);
  buf.write('WAVE', 8, 'ascii');
  buf.write('fmt ', 12, 'ascii');
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(sampleRate, 24);
  buf.writeUInt32LE(sampleRate * 2, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36, 'ascii');
  buf.writeUInt32LE(dataBytes, 40);
  if (LITTLE_ENDIAN) buf.set(new Uint8Array(samples.buffer, samples.byteOffset, dataBytes), 44);
  else for (let i = 0; i < samples.length; i++) buf.writeInt16LE(samples[i] ?? 0, 44 + i * 2);
  return buf;
}

/** Reads a 16-bit PCM mono WAV, skipping unknown chunks (LIST, fact...); null for anything else. */
export function parseWav(buf: Buffer): DecodedAudio | null {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') {
    return null;
  }
  let sampleRate: number | null = null;
  let offset = 12;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('ascii', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + 16 > buf.length) return null;
      let format = buf.readUInt16LE(body);
      // WAVE_FORMAT_EXTENSIBLE carries the real format in the first two bytes of its sub-format GUID.
      if (format === 0xfffe && size >= 40 && body + 26 <= buf.length) format = buf.readUInt16LE(body + 24);
      const channels = buf.readUInt16LE(body + 2);
      const bits = buf.readUInt16LE(body + 14);
      if (format !== 1 || channels !== 1 || bits !== 16) return null;
      sampleRate = buf.readUInt32LE(body + 4);
      if (sampleRate <= 0) return null;
    } else if (id === 'data') {
      if (sampleRate === null) return null;
      // Streamed WAVs may carry a placeholder size (0 or 0xFFFFFFFF): clamp to what is present.
      const available = buf.length - body;
      const bytes = size === 0 || size > available ? available : size;
      const count = Math.floor(bytes / 2);
      const samples = new Int16Array(count);
      if (LITTLE_ENDIAN) new Uint8Array(samples.buffer).set(buf.subarray(body, body + count * 2));
      else for (let i = 0; i < count; i++) samples[i] = buf.readInt16LE(body + i * 2);
      return { sampleRate, samples };
    }
    offset = body + size + (size % 2); // chunks are padded to even length
  }
  return null;
}
