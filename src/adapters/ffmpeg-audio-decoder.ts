import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathOnlyEnv } from '../config.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { AudioDecoder, DecodedAudio } from '../ports.ts';
import { lastStderrLine, runProcess } from './subprocess.ts';

export interface FfmpegAudioDecoderOptions {
  /** The ffmpeg binary: Debian's package (`/usr/bin/ffmpeg`, found on PATH) by default. */
  ffmpegPath?: string;
  /** Kill ffmpeg after this long (transient `audio.decode_timeout`). Default 10 minutes. */
  timeoutMs?: number;
  /** The most audio one file may decode to, in seconds (`audio.too_long` past it). Default 6 h. */
  maxSeconds?: number;
}

const SAMPLE_RATE = 16_000;

/**
 * S4: the demuxers an upload may be read with — the containers of the accepted content types
 * (WAV, MP3, MP4/M4A, AAC, WebM/Matroska, Ogg/Opus, FLAC) and nothing else. Playlists (HLS),
 * manifests (DASH), concat lists and every other format that names further inputs are refused,
 * so a file cannot make ffmpeg read anything but itself.
 */
export const DEMUXER_ALLOWLIST = ['wav', 'mp3', 'mov', 'aac', 'matroska', 'ogg', 'flac'] as const;

/**
 * Decodes an upload to 16 kHz mono s16le with Debian's ffmpeg, reading only the file itself: the
 * demuxer allowlist, the `file` protocol alone (no network, no nested protocols; MP4 external
 * references stay off, ffmpeg's default), a private temporary directory as its working directory and an empty
 * environment; output is capped at `maxSeconds` of audio (a decompression bomb stops there).
 */
export class FfmpegAudioDecoder implements AudioDecoder {
  /** B11: the channels of the file's first audio stream (1 when unknown). */
  channelsOf(input: string, signal?: AbortSignal): Promise<number> {
    return probeChannels(this.ffmpegPath, input, signal);
  }

  private readonly ffmpegPath: string;
  private readonly timeoutMs: number;
  private readonly maxSeconds: number;

  constructor(options: FfmpegAudioDecoderOptions = {}) {
    this.ffmpegPath = options.ffmpegPath ?? 'ffmpeg';
    this.timeoutMs = options.timeoutMs ?? 600_000;
    this.maxSeconds = options.maxSeconds ?? 6 * 3600;
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
      const pcm = await this.run(dir, input, signal);
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

  private async run(dir: string, input: string, signal: AbortSignal | undefined): Promise<Buffer> {
    const args = argsFor(input);
    const maxBytes = this.maxSeconds * SAMPLE_RATE * 2;
    const result = await runProcess({
      command: this.ffmpegPath,
      args,
      timeoutMs: this.timeoutMs,
      signal,
      cwd: dir,
      env: pathOnlyEnv(),
      maxStdoutBytes: maxBytes,
      overflowError: () => this.tooLong(),
      timeoutError: () => this.timedOut(),
      spawnError: spawnError,
    });
    if (result.code === 0) return result.stdout;
    throw exitError(result.code, result.signal, result.stderr, input);
  }

  /**
   * J19: decodes the file at `input` as a stream of samples, in pieces of whatever size ffmpeg
   * writes, so a recording of any length is decoded in constant memory. ffmpeg waits while the
   * caller works on a piece (the pipe fills); `timeoutMs` is then the longest ffmpeg may go without
   * giving a piece. Stopping the iteration early kills ffmpeg. The same errors as `decode`.
   */
  async *decodeFile(input: string, signal?: AbortSignal, channels = 1): AsyncGenerator<Int16Array> {
    signal?.throwIfAborted();
    const dir = await mkdtemp(join(tmpdir(), 'verbatim-decode-'));
    const child = spawn(this.ffmpegPath, argsFor(input, channels), {
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: dir,
      env: pathOnlyEnv(),
    });
    let stderr = '';
    const state: { failure: Error | null } = { failure: null };
    const fail = (err: Error): void => {
      state.failure ??= err;
      child.kill('SIGKILL');
      child.stdout.destroy();
    };
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
      child.on('close', (code, sig) => resolve([code, sig]));
      child.on('error', (err: NodeJS.ErrnoException) => {
        fail(spawnError(err));
        resolve([null, null]);
      });
    });
    child.stderr.on('data', (piece: Buffer) => {
      stderr = (stderr + piece.toString('utf8')).slice(-4096);
    });
    const timer = setTimeout(() => fail(this.timedOut()), this.timeoutMs);
    const onAbort = (): void => fail(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    const maxBytes = this.maxSeconds * SAMPLE_RATE * 2 * channels;
    let total = 0;
    let carry: Buffer | null = null;
    let any = false;
    try {
      try {
        for await (const piece of child.stdout as AsyncIterable<Buffer>) {
          timer.refresh();
          total += piece.length;
          if (total > maxBytes) {
            fail(this.tooLong());
            break;
          }
          const bytes: Buffer = carry ? Buffer.concat([carry, piece]) : piece;
          const even = bytes.length - (bytes.length % 2);
          carry = even < bytes.length ? Buffer.from(bytes.subarray(even)) : null;
          if (even === 0) continue;
          any = true;
          yield toSamples(bytes.subarray(0, even));
        }
      } catch (err) {
        if (state.failure === null) throw err;
      }
      if (state.failure !== null) throw state.failure;
      const [code, sig] = await exited;
      // Set by a callback while this waited (a spawn error, the deadline, an abort).
      const late = state.failure as Error | null;
      if (late !== null) throw late;
      if (code !== 0) throw exitError(code, sig, stderr, input);
      if (!any)
        throw new AppError(ErrorKind.permanent, 'audio.undecodable', 'the file contains no audio samples');
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }

  private tooLong(): AppError {
    return new AppError(
      ErrorKind.permanent,
      'audio.too_long',
      `the recording decodes to more than ${this.maxSeconds} s of audio (VERBATIM_MAX_AUDIO_SECONDS)`,
    );
  }

  private timedOut(): AppError {
    return new AppError(
      ErrorKind.transient,
      'audio.decode_timeout',
      `ffmpeg did not finish within ${this.timeoutMs} ms`,
    );
  }
}

/**
 * B11: how many channels the first audio stream of the file at `input` has (ffprobe, under the
 * same allowlist as the decoder). 1 when it cannot tell.
 */
export async function probeChannels(
  ffmpegPath: string,
  input: string,
  signal?: AbortSignal,
): Promise<number> {
  const ffprobe = ffmpegPath.replace(/ffmpeg(?=[^/]*$)/, 'ffprobe');
  const result = await runProcess({
    command: ffprobe,
    args: [
      '-hide_banner',
      '-loglevel',
      'error',
      '-protocol_whitelist',
      'file',
      '-format_whitelist',
      DEMUXER_ALLOWLIST.join(','),
      '-select_streams',
      'a:0',
      '-show_entries',
      'stream=channels',
      '-of',
      'csv=p=0',
      `file:${input}`,
    ],
    timeoutMs: 60_000,
    signal,
    env: pathOnlyEnv(),
    maxStdoutBytes: 4096,
    overflowError: () => new AppError(ErrorKind.permanent, 'audio.undecodable', 'ffprobe said too much'),
    timeoutError: () => new AppError(ErrorKind.transient, 'audio.decode_timeout', 'ffprobe did not finish'),
    spawnError: spawnError,
  }).catch(() => null);
  const n = result?.code === 0 ? Number.parseInt(result.stdout.toString('utf8').trim(), 10) : NaN;
  return Number.isInteger(n) && n > 0 ? n : 1;
}

function argsFor(input: string, channels = 1): string[] {
  return [
    '-hide_banner',
    '-loglevel',
    'error',
    '-nostdin',
    // Input options: what may be opened, and how.
    '-protocol_whitelist',
    'file',
    '-format_whitelist',
    DEMUXER_ALLOWLIST.join(','),
    '-i',
    `file:${input}`,
    '-vn',
    '-f',
    's16le',
    '-acodec',
    'pcm_s16le',
    '-ac',
    String(channels),
    '-ar',
    String(SAMPLE_RATE),
    'pipe:1',
  ];
}

function spawnError(err: NodeJS.ErrnoException): AppError {
  return err.code === 'ENOENT' || err.code === 'EACCES'
    ? new AppError(
        ErrorKind.permanent,
        'audio.decoder_missing',
        `ffmpeg could not be started (${err.code}); check the ffmpeg path`,
        { cause: err },
      )
    : new AppError(ErrorKind.transient, 'audio.decoder_failed', `ffmpeg failed: ${err.message}`);
}

function exitError(code: number | null, sig: NodeJS.Signals | null, stderr: string, input: string): AppError {
  if (code === null) {
    // Killed by a signal (the OOM killer, a shutdown): says nothing about the file.
    return new AppError(ErrorKind.transient, 'audio.decoder_killed', `ffmpeg was killed by ${sig}`);
  }
  const reason = lastStderrLine(stderr, input) || `ffmpeg exited with ${code}`;
  return new AppError(ErrorKind.permanent, 'audio.undecodable', reason);
}

const LITTLE_ENDIAN = endianness() === 'LE';

/** s16le bytes (an even count) as samples. */
function toSamples(bytes: Buffer): Int16Array {
  const samples = new Int16Array(bytes.length / 2);
  if (LITTLE_ENDIAN) Buffer.from(samples.buffer).set(bytes);
  else for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
  return samples;
}
