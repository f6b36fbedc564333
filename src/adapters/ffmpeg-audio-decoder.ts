import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ffmpegInstaller from '@ffmpeg-installer/ffmpeg';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { AudioDecoder, DecodedAudio } from '../ports.ts';

export interface FfmpegAudioDecoderOptions {
  /** Path to the ffmpeg binary; defaults to the one bundled by `@ffmpeg-installer/ffmpeg`. */
  ffmpegPath?: string;
  /** Kill ffmpeg after this long (transient `audio.decode_timeout`). Default 10 minutes. */
  timeoutMs?: number;
}

const SAMPLE_RATE = 16_000;
const STDERR_KEEP = 4096;

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

  private run(input: string, signal: AbortSignal | undefined): Promise<Buffer> {
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
    return new Promise<Buffer>((resolve, reject) => {
      const child = spawn(this.ffmpegPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const chunks: Buffer[] = [];
      let stderr = '';
      let settled = false;

      const finish = (err: unknown, value?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined && value) resolve(value);
        else reject(err instanceof Error ? err : new Error(String(err)));
      };
      const onAbort = (): void => {
        child.kill('SIGKILL');
        finish(signal?.reason ?? new Error('aborted'));
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        finish(
          new AppError(
            ErrorKind.transient,
            'audio.decode_timeout',
            `ffmpeg did not finish within ${this.timeoutMs} ms`,
          ),
        );
      }, this.timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });

      child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEEP);
      });
      child.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' || err.code === 'EACCES') {
          finish(
            new AppError(
              ErrorKind.permanent,
              'audio.decoder_missing',
              `ffmpeg could not be started (${err.code}); check the ffmpeg path`,
              { cause: err },
            ),
          );
        } else {
          finish(new AppError(ErrorKind.transient, 'audio.decoder_failed', `ffmpeg failed: ${err.message}`));
        }
      });
      child.on('close', (code, sig) => {
        if (code === 0) {
          finish(undefined, Buffer.concat(chunks));
          return;
        }
        const reason = lastLine(stderr.split(input).join('input')) || `ffmpeg exited with ${code ?? sig}`;
        finish(new AppError(ErrorKind.permanent, 'audio.undecodable', reason.slice(0, 200)));
      });
    });
  }
}

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return lines[lines.length - 1] ?? '';
}
