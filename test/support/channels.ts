/** B11: multichannel test audio: channels interleaved into one WAV, and the bleed of one into another. */

/** A 16-bit PCM WAV of several channels, interleaved. */
export function multichannelWav(channels: Int16Array[], sampleRate: number): Buffer {
  const n = channels.length;
  const frames = Math.min(...channels.map((c) => c.length));
  const data = Buffer.alloc(frames * n * 2);
  for (let i = 0; i < frames; i++)
    for (let c = 0; c < n; c++) data.writeInt16LE(channels[c]![i]!, (i * n + c) * 2);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'ascii');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8, 'ascii');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(n, 22);
  head.writeUInt32LE(sampleRate, 24);
  head.writeUInt32LE(sampleRate * n * 2, 28);
  head.writeUInt16LE(n * 2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36, 'ascii');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/** `own` plus `bleed` × `other`: what one channel of a two-person recording hears. */
export function withBleed(own: Int16Array, other: Int16Array, bleed: number): Int16Array {
  const out = new Int16Array(own.length);
  for (let i = 0; i < own.length; i++)
    out[i] = Math.max(-32768, Math.min(32767, Math.round(own[i]! + bleed * (other[i] ?? 0))));
  return out;
}

export function samplesOf(wav: Buffer): Int16Array {
  return new Int16Array(wav.buffer.slice(wav.byteOffset + 44, wav.byteOffset + wav.length));
}

/**
 * A two-person conversation's voices apart: the first and third utterances (`first`), the second
 * (`second`), each silent where the other speaks; and where the second speaker talks.
 */
export function conversationVoices(conversation: {
  wav: Buffer;
  sampleRate: number;
  spans: Array<{ startMs: number; endMs: number }>;
}): { first: Int16Array; second: Int16Array; secondSpan: { startMs: number; endMs: number } } {
  const { wav, spans, sampleRate } = conversation;
  const mix = samplesOf(wav);
  const first = mix.slice();
  const second = new Int16Array(mix.length);
  const secondSpan = spans[1]!;
  const from = Math.round((secondSpan.startMs / 1000) * sampleRate);
  const to = Math.round((secondSpan.endMs / 1000) * sampleRate);
  second.set(mix.subarray(from, to), from);
  first.fill(0, from, to);
  return { first, second, secondSpan };
}

/**
 * A two-person conversation as a stereo WAV with 10 % bleed: the first and third utterances on the
 * left channel, the second on the right; and where the right channel's speaker talks.
 */
export function stereoConversation(conversation: {
  wav: Buffer;
  sampleRate: number;
  spans: Array<{ startMs: number; endMs: number }>;
}): { wav: Buffer; second: { startMs: number; endMs: number } } {
  const { first: left, second: right, secondSpan } = conversationVoices(conversation);
  return {
    wav: multichannelWav([withBleed(left, right, 0.1), withBleed(right, left, 0.1)], conversation.sampleRate),
    second: secondSpan,
  };
}
