/** A 16-bit PCM mono WAV file, as the chunk API takes it (L1: 16 kHz mono 16-bit). */
export function encodeWav(samples: Int16Array, sampleRate: number): ArrayBuffer {
  const data = samples.length * 2;
  const buf = new ArrayBuffer(44 + data);
  const v = new DataView(buf);
  const ascii = (offset: number, s: string) => {
    for (let i = 0; i < s.length; i++) v.setUint8(offset + i, s.charCodeAt(i));
  };
  ascii(0, 'RIFF');
  v.setUint32(4, 36 + data, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, sampleRate, true);
  v.setUint32(28, sampleRate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  ascii(36, 'data');
  v.setUint32(40, data, true);
  for (let i = 0; i < samples.length; i++) v.setInt16(44 + 2 * i, samples[i]!, true);
  return buf;
}

/** Our own WAVs (44-byte header, 16-bit mono) joined into one, for downloading kept audio. */
export function joinWavs(wavs: ArrayBuffer[], sampleRate: number): ArrayBuffer {
  const parts = wavs.map((w) => new Int16Array(w.slice(44)));
  const all = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return encodeWav(all, sampleRate);
}
