import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { encodeWav, parseWav } from '../domain/wav.ts';
import type { TranscribeRequest, Transcriber, TranscriptSegment } from '../ports.ts';
import {
  lastStderrLine,
  runProcess,
  SpareProcess,
  type ProcessResult,
  type WaitOptions,
} from './subprocess.ts';

export interface PocketsphinxTranscriberOptions {
  /** Default `pocketsphinx_continuous` (looked up on PATH). */
  binary?: string;
  /** Directory holding `en-us/` (acoustic model), `en-us.lm.bin` and `cmudict-en-us.dict`. */
  modelDir?: string;
  /** Default 120 000. */
  timeoutMs?: number;
  /** L22: a quicker, narrower search (FAST_SEARCH), for drafts. */
  fast?: boolean;
  /**
   * L22: after each run, the next process is started at once and waits, its model loaded, for the
   * audio on its stdin: a run then costs its decode only (on a 5 s draft 0.53 s instead of 0.90 s,
   * the same words), at the price of one idle process (about 100 MB). For drafts, where that time
   * is what a user waits for; the finals, whose decode dwarfs the load, start theirs when needed.
   */
  warm?: boolean;
}

/**
 * A narrower beam, fewer active models per frame and a single decoding pass. Measured on 119 s
 * of synthetic speech (the bench sentences), 2 CPUs: 10.0 s instead of 14.8 s, word error 15.3 %
 * instead of 14.6 %; on a 5 s chunk 0.63 s instead of 0.85 s. Drafts use it; the finals never do.
 */
export const FAST_SEARCH = [
  '-maxhmmpf',
  '3000',
  '-maxwpf',
  '10',
  '-pl_window',
  '10',
  '-fwdflat',
  'no',
  '-bestpath',
  'no',
];

const SUPPORTED_LANGUAGES = new Set(['en', 'en-us']);
const SEGMENT_GAP_SECONDS = 0.6;
const SEGMENT_MAX_WORDS = 20;
const OUTPUT_LIMIT = 16 * 1024 * 1024;

/** Offline English speech recognition with CMU PocketSphinx (0.8 `pocketsphinx_continuous`). */
export class PocketsphinxTranscriber implements Transcriber {
  readonly name = 'pocketsphinx';
  private readonly binary: string;
  private readonly modelDir: string | undefined;
  private readonly timeoutMs: number;
  private readonly fast: boolean;
  private readonly warm: boolean;
  private spare: SpareProcess | null = null;
  private closed = false;

  constructor(options: PocketsphinxTranscriberOptions = {}) {
    this.fast = options.fast ?? false;
    this.warm = options.warm ?? false;
    this.binary = options.binary ?? 'pocketsphinx_continuous';
    this.modelDir = options.modelDir;
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  async transcribe(request: TranscribeRequest): Promise<TranscriptSegment[]> {
    const { signal } = request;
    signal?.throwIfAborted();
    const language = request.language?.toLowerCase().replace('_', '-') ?? null;
    if (language !== null && !SUPPORTED_LANGUAGES.has(language)) {
      throw new AppError(
        ErrorKind.permanent,
        'asr.unsupported_language',
        `pocketsphinx only recognises English, not "${request.language}"`,
      );
    }
    const audio = parseWav(request.wav);
    if (!audio || audio.sampleRate !== 16_000) {
      throw new AppError(ErrorKind.permanent, 'asr.bad_input', 'pocketsphinx needs a 16 kHz mono 16-bit WAV');
    }
    if (audio.samples.length === 0) return [];
    if (!this.warm) return this.transcribeCold(audio.samples, signal);
    const spare = this.spare;
    this.spare = null;
    try {
      if (spare?.ready) {
        try {
          return parsePocketsphinxOutput(await this.runSpare(spare, audio.samples, signal));
        } catch (err) {
          // A spare that died while it waited (killed, out of memory) is no fault of the audio:
          // a cold run answers, and says what is wrong if something is.
          if (!(err instanceof AppError && err.code === 'asr.crashed')) throw err;
        }
      } else spare?.kill();
      return await this.transcribeCold(audio.samples, signal);
    } finally {
      // The next one loads its model now, in the time before the next draft.
      if (!this.closed && this.spare === null) this.startSpare();
    }
  }

  private async transcribeCold(samples: Int16Array, signal: AbortSignal | undefined) {
    const dir = await mkdtemp(join(tmpdir(), 'verbatim-asr-'));
    const file = join(dir, 'window.wav');
    try {
      // Re-encoded because pocketsphinx 0.8 assumes the canonical 44-byte header.
      await writeFile(file, encodeWav(samples, 16_000));
      const stdout = await this.run(file, signal);
      return parsePocketsphinxOutput(stdout);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** The next spare; one that cannot be started (out of memory or descriptors) is simply not there. */
  private startSpare(): void {
    try {
      this.spare = new SpareProcess(this.binary, ['-infile', '/dev/stdin', ...this.searchArgs()]);
    } catch {
      this.spare = null;
    }
  }

  /** Stops the waiting process, if any (the app's close). */
  close(): Promise<void> {
    this.closed = true;
    this.spare?.kill();
    this.spare = null;
    return Promise.resolve();
  }

  /** Everything but the input: output with times, no log, the search and the model. */
  private searchArgs(): string[] {
    const args = ['-time', 'yes', '-logfn', '/dev/null', ...(this.fast ? FAST_SEARCH : [])];
    if (this.modelDir !== undefined) {
      args.push(
        '-hmm',
        join(this.modelDir, 'en-us'),
        '-lm',
        join(this.modelDir, 'en-us.lm.bin'),
        '-dict',
        join(this.modelDir, 'cmudict-en-us.dict'),
      );
    }
    return args;
  }

  /** Raw 16-bit samples on its stdin: a name without `.wav` has no header to skip. */
  private async runSpare(spare: SpareProcess, samples: Int16Array, signal: AbortSignal | undefined) {
    const pcm = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
    return this.outcome(await spare.run(pcm, this.waitOptions(signal)), 'input');
  }

  private async run(file: string, signal: AbortSignal | undefined): Promise<string> {
    const result = await runProcess({
      command: this.binary,
      args: ['-infile', file, ...this.searchArgs()],
      ...this.waitOptions(signal),
    });
    return this.outcome(result, file);
  }

  private waitOptions(signal: AbortSignal | undefined): WaitOptions {
    return {
      timeoutMs: this.timeoutMs,
      signal,
      maxStdoutBytes: OUTPUT_LIMIT,
      timeoutError: () =>
        new AppError(
          ErrorKind.transient,
          'asr.timeout',
          `pocketsphinx did not finish within ${this.timeoutMs} ms`,
        ),
      spawnError: (err: NodeJS.ErrnoException) =>
        err.code === 'ENOENT' || err.code === 'EACCES'
          ? new AppError(
              ErrorKind.permanent,
              'asr.unavailable',
              `${this.binary} could not be started (${err.code}); install pocketsphinx (apt-get install pocketsphinx pocketsphinx-en-us) or configure another transcriber`,
              { cause: err },
            )
          : new AppError(ErrorKind.transient, 'asr.crashed', `pocketsphinx failed: ${err.message}`),
    };
  }

  private outcome(result: ProcessResult, file: string): string {
    if (result.code === 0) return result.stdout.toString('utf8');
    const detail = lastStderrLine(result.stderr, file);
    throw new AppError(
      ErrorKind.transient,
      'asr.crashed',
      `pocketsphinx exited with ${result.code ?? result.signal}${detail ? `: ${detail}` : ''}`,
    );
  }
}

const WORD_LINE = /^(\S+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(-?\d+(?:\.\d+)?(?:e-?\d+)?)$/i;

function isFiller(token: string): boolean {
  return /^<.*>$/.test(token) || /^\[.*\]$/.test(token) || /^\+\+.*\+\+$/.test(token);
}

/**
 * Turns `-time yes` output (hypothesis lines, then `word start end confidence` lines with absolute
 * times in seconds) into segments, split at pauses of 0.6 s or every 20 words.
 */
export function parsePocketsphinxOutput(stdout: string): TranscriptSegment[] {
  const words: Array<{ word: string; start: number; end: number }> = [];
  for (const raw of stdout.split('\n')) {
    const match = WORD_LINE.exec(raw.trim());
    if (!match) continue;
    const [, token = '', start = '0', end = '0'] = match;
    if (isFiller(token)) continue;
    const word = token.replace(/\(\d+\)$/, '');
    if (word === '') continue;
    words.push({ word, start: Number(start), end: Number(end) });
  }

  const segments: TranscriptSegment[] = [];
  let current: typeof words = [];
  const flush = (): void => {
    const first = current[0];
    const last = current[current.length - 1];
    if (first && last) {
      segments.push({
        startMs: Math.round(first.start * 1000),
        endMs: Math.round(last.end * 1000),
        text: current.map((w) => w.word).join(' '),
        words: current.map((w) => ({
          startMs: Math.round(w.start * 1000),
          endMs: Math.round(w.end * 1000),
          text: w.word,
        })),
      });
    }
    current = [];
  };
  for (const w of words) {
    const prev = current[current.length - 1];
    if (prev && (w.start - prev.end >= SEGMENT_GAP_SECONDS || current.length >= SEGMENT_MAX_WORDS)) flush();
    current.push(w);
  }
  flush();
  return segments;
}
