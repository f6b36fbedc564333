/**
 * E5: what kind of file an upload is, from its first bytes, before it is answered: the containers
 * the decoder's allowlist reads (src/adapters/ffmpeg-audio-decoder.ts, DEMUXER_ALLOWLIST) each
 * begin with a signature of their own. A file with none of them (a text file renamed `.wav`, a
 * PDF, an image) is refused at once in words a person understands, instead of being stored and
 * failing minutes later in the decoder's words. A file that begins right and is broken further on
 * is still found by the decoder, and its meeting fails with a reason.
 */

/**
 * Bytes enough to tell every accepted container apart, after the zero bytes some recorders and
 * stream dumps put before an MP3 or AAC stream's first frame (ffmpeg skips them too).
 */
export const SNIFF_BYTES = 4096;

export type SniffedContainer = 'wav' | 'flac' | 'ogg' | 'matroska' | 'mp4' | 'mp3' | 'aac';

const ascii = (head: Buffer, at: number, text: string) =>
  head.length >= at + text.length && head.toString('latin1', at, at + text.length) === text;

/** The accepted container `head` (the file's first SNIFF_BYTES bytes, or all of a shorter file) begins, or null. */
export function sniffAudioContainer(file: Buffer): SniffedContainer | null {
  const container = containerAt(file);
  if (container) return container;
  // A frame-synced stream (MP3, ADTS AAC) may come after zero padding.
  let start = 0;
  while (start < file.length && file[start] === 0) start++;
  const synced = start > 0 ? containerAt(file.subarray(start)) : null;
  return synced === 'mp3' || synced === 'aac' ? synced : null;
}

function containerAt(head: Buffer): SniffedContainer | null {
  if ((ascii(head, 0, 'RIFF') || ascii(head, 0, 'RF64')) && ascii(head, 8, 'WAVE')) return 'wav';
  if (ascii(head, 0, 'fLaC')) return 'flac';
  if (ascii(head, 0, 'OggS')) return 'ogg';
  if (head.length >= 4 && head.readUInt32BE(0) === 0x1a45dfa3) return 'matroska';
  // ISO base media (MP4, M4A, MOV): a box size, then its type; `ftyp` first, or older files' boxes.
  if (['ftyp', 'moov', 'mdat', 'free', 'wide', 'skip'].some((box) => ascii(head, 4, box))) return 'mp4';
  if (ascii(head, 0, 'ID3')) return 'mp3';
  if (ascii(head, 0, 'ADIF')) return 'aac';
  // Frame sync: 11 set bits. ADTS (AAC) has layer 00 after its version bit; MPEG audio does not.
  if (head.length >= 2 && head[0] === 0xff && (head[1]! & 0xe0) === 0xe0) {
    return (head[1]! & 0x06) === 0 ? 'aac' : 'mp3';
  }
  return null;
}

/** What an upload that is not audio is told: what is wrong, and what to do. */
export const NOT_AUDIO_MESSAGE =
  'This file is not a recording Verbatim can read: it does not begin like WAV, MP3, M4A/MP4, AAC, WebM, Ogg/Opus or FLAC audio. Check that you chose the right file, or export the recording again in one of those formats.';
