import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ffmpegInstaller from '@ffmpeg-installer/ffmpeg';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { AudioDecoder, DecodedAudio } from '../ports.ts';
import { lastStderrLine, runProcess } from './subprocess.ts';

export interface FfmpegAudioDecoderOptions {
  /** Path to the ffmpeg binary; defaults to the one bundled by `@ffmpeg-installer/ffmpeg`. */
  ffmpegPath?: string;
  /** Kill ffmpeg after this long (transient `audio.decode_timeout`). Default 10 minutes. */
  timeoutMs?: number;
}

const SAMPLE_RATE = 16_000;

/** Decodes anything ffmpeg understands to 16 kHz mono s16le. */
export class FfmpegAudioDecoder implements AudioDecoder {
  private readonly ffmpegPath: string;
  private readonly timeoutMs: number;

  constructor(options: FfmpegAudioDecoderOptions = {}) {
    this.ffmpegPath = options.ffmpegPath ?? ffmpegInstaller.path;
    this.timeoutMs = options.timeoutMs ?? 600_000;
  }

  async decode(data: Buffer, signal?: AbortSignal): Promise<DecodedAudio> {
    signal?.throwIfAborted();
    if (data.length === 0)
      throw new AppError(ErrorKind.permanent, 'audio.undecodable', 'the upload is empty');
    // A file rather than stdin: MP4/M4A with the moov atom at the end needs a seekable input.
    const dir = await mkdtemp(join(tmpdir(), 'verbatim-decode-'));
    const input = join(dir, 'input');
    try {
      await writeFile(input, data);
      const pcm = await this.run(input, signal);
      const count = Math.floor(pcm.length / 2);
      if (count === 0) {
        throw new AppError(ErrorKind.permanent, 'audio.undecodable', 'the file contains no audio samples');
      }
      const samples = new Int16Array(count);
      for (let i = 0; i < count; i++) samples[i] = pcm.readInt16LE(i * 2);
      return { sampleRate: SAMPLE_RATE, samples };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async run(input: string, signal: AbortSignal | undefined): Promise<Buffer> {
    const args = [
      '-hide_banner',
      '-loglevel',
      'error',
      '-nostdin',
      '-i',
      input,
      '-vn',
      '-f',
      's16le',
      '-acodec',
      'pcm_s16le',
      '-ac',
      '1',
      '-ar',
      String(SAMPLE_RATE),
      'pipe:1',
    ];
    const result = await runProcess({
      command: this.ffmpegPath,
      args,
      timeoutMs: this.timeoutMs,
      signal,
      timeoutError: () =>
        new AppError(
          ErrorKind.transient,
          'audio.decode_timeout',
          `ffmpeg did not finish within ${this.timeoutMs} ms`,
        ),
      spawnError: (err) =>
        err.code === 'ENOENT' || err.code === 'EACCES'
          ? new AppError(
              ErrorKind.permanent,
              'audio.decoder_missing',
              `ffmpeg could not be started (${err.code}); check the ffmpeg path`,
              { cause: err },
            )
          : new AppError(ErrorKind.transient, 'audio.decoder_failed', `ffmpeg failed: ${err.message}`),
    });
    if (result.code === 0) return result.stdout;
    if (result.code === null) {
      // Killed by a signal (the OOM killer, a shutdown): says nothing about the file.
      throw new AppError(
        ErrorKind.transient,
        'audio.decoder_killed',
        `ffmpeg was killed by ${result.signal}`,
      );
    }
    const reason =
      lastStderrLine(result.stderr, input) || `ffmpeg exited with ${result.code ?? result.signal}`;
    throw new AppError(ErrorKind.permanent, 'audio.undecodable', reason);
  }
}
