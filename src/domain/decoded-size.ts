import { SAMPLE_RATE } from './timeline.ts';

/**
 * F1: how much audio an upload holds, read from its first bytes (and its announced length), so a
 * recording whose windows could not fit the quota is refused before its body is stored. The split
 * stores the recording as 16 kHz mono 16-bit windows: about 32,000 bytes a second, whatever the
 * container (a ten-minute FLAC of 114 KB becomes 19 MB of windows).
 *
 * Known from the head: WAV (the data chunk's size, or the body's), FLAC (STREAMINFO's sample
 * count), MP3 (a Xing/Info frame count, else the first frame's bitrate over the body's length, as
 * a constant-bitrate file). Anything else (Ogg, WebM, MP4, AAC, an MP3 behind a large tag, a FLAC
 * written to a pipe) is null: its windows are still admitted one by one as the split cuts them.
 */

/** Bytes of window audio per second of recording. */
export const WINDOW_BYTES_PER_SECOND = SAMPLE_RATE * 2;

export interface HeadDuration {
  seconds: number;
  channels: number;
}

/** The duration (and channel count) `head` says its file holds, or null when it does not say. */
export function durationFromHead(head: Buffer, totalBytes: number | null): HeadDuration | null {
  if (head.length < 12) return null;
  const tag = head.toString('latin1', 0, 4);
  if ((tag === 'RIFF' || tag === 'RF64') && head.toString('latin1', 8, 12) === 'WAVE')
    return wav(head, totalBytes);
  if (tag === 'fLaC') return flac(head);
  return mp3(head, totalBytes);
}

/** The window bytes a recording of `d` becomes (one set per channel when channels are speakers). */
export function windowBytesFor(d: HeadDuration, perChannel: boolean): number {
  return Math.ceil(d.seconds * WINDOW_BYTES_PER_SECOND) * (perChannel ? d.channels : 1);
}

function wav(head: Buffer, totalBytes: number | null): HeadDuration | null {
  let at = 12;
  let byteRate = 0;
  let channels = 1;
  while (at + 8 <= head.length) {
    const id = head.toString('latin1', at, at + 4);
    const size = head.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= head.length) {
      channels = head.readUInt16LE(at + 10);
      byteRate = head.readUInt32LE(at + 16);
    }
    if (id === 'data') {
      if (byteRate === 0) return null;
      // A streamed WAV says 0 or 0xFFFFFFFF: the body's own length says then.
      const known = size > 0 && size < 0xffffffff ? size : totalBytes === null ? null : totalBytes - at - 8;
      return known === null || known <= 0
        ? null
        : { seconds: known / byteRate, channels: Math.max(1, channels) };
    }
    at += 8 + size + (size % 2);
  }
  return null;
}

function flac(head: Buffer): HeadDuration | null {
  // STREAMINFO is the first metadata block: 4 bytes of header, then 34 bytes.
  if (head.length < 8 + 18 || (head[4]! & 0x7f) !== 0) return null;
  const info = 8;
  const rate = (head[info + 10]! << 12) | (head[info + 11]! << 4) | (head[info + 12]! >> 4);
  const channels = ((head[info + 12]! >> 1) & 0x07) + 1;
  const samples = (head[info + 13]! & 0x0f) * 2 ** 32 + head.readUInt32BE(info + 14);
  if (rate === 0 || samples === 0) return null;
  return { seconds: samples / rate, channels };
}

const MP3_BITRATES: Record<'1' | '2', number[]> = {
  // MPEG-1 Layer III, and MPEG-2/2.5 Layer III, in kbit/s by index.
  '1': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  '2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const MP3_RATES: Record<number, number[]> = {
  3: [44100, 48000, 32000],
  2: [22050, 24000, 16000],
  0: [11025, 12000, 8000],
};

function mp3(head: Buffer, totalBytes: number | null): HeadDuration | null {
  let at = 0;
  if (head.toString('latin1', 0, 3) === 'ID3' && head.length >= 10) {
    // A syncsafe size: 7 bits a byte.
    at = 10 + ((head[6]! << 21) | (head[7]! << 14) | (head[8]! << 7) | head[9]!);
  }
  while (at < head.length && head[at] === 0) at++;
  if (at + 4 > head.length || head[at] !== 0xff || (head[at + 1]! & 0xe0) !== 0xe0) return null;
  const version = (head[at + 1]! >> 3) & 0x03; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
  const layer = (head[at + 1]! >> 1) & 0x03; // 1: Layer III
  if (version === 1 || layer !== 1) return null;
  const bitrate = MP3_BITRATES[version === 3 ? '1' : '2'][head[at + 2]! >> 4] ?? 0;
  const rate = MP3_RATES[version]?.[(head[at + 2]! >> 2) & 0x03] ?? 0;
  const channels = head[at + 3]! >> 6 === 3 ? 1 : 2;
  if (bitrate === 0 || rate === 0) return null;
  const perFrame = version === 3 ? 1152 : 576;
  // A Xing or Info frame (LAME writes one) counts the frames.
  for (const tag of ['Xing', 'Info']) {
    const found = head.indexOf(tag, at + 4, 'latin1');
    if (
      found > 0 &&
      found < at + 64 &&
      found + 12 <= head.length &&
      (head.readUInt32BE(found + 4) & 1) === 1
    ) {
      const frames = head.readUInt32BE(found + 8);
      if (frames > 0) return { seconds: (frames * perFrame) / rate, channels };
    }
  }
  if (totalBytes === null) return null;
  return { seconds: ((totalBytes - at) * 8) / (bitrate * 1000), channels };
}
