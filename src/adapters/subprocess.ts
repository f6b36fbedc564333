import { spawn } from 'node:child_process';
import type { AppError } from '../domain/errors.ts';

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  /** The tail of stderr, for error messages. */
  stderr: string;
}

export interface RunProcessOptions {
  command: string;
  args: string[];
  timeoutMs: number;
  signal?: AbortSignal;
  /** The error for a process that did not finish in time (it is killed). */
  timeoutError: () => AppError;
  /** The error for a process that could not be started at all. */
  spawnError: (err: NodeJS.ErrnoException) => AppError;
  maxStdoutBytes?: number;
  /**
   * With `maxStdoutBytes`: the error for a process whose output passes it (it is killed then).
   * Without, output past the cap is dropped and the process runs on.
   */
  overflowError?: () => AppError;
  /** Working directory and environment of the child (default: inherited). */
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

const STDERR_KEEP = 4096;

/**
 * Runs a child process to completion and resolves with its exit status and output, whatever the
 * exit code. Rejects when it cannot start, times out, or the caller aborts; the child is killed.
 */
export function runProcess(opts: RunProcessOptions): Promise<ProcessResult> {
  const { signal } = opts;
  signal?.throwIfAborted();
  return new Promise<ProcessResult>((resolve, reject) => {
    const child = spawn(opts.command, opts.args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      ...(opts.env === undefined ? {} : { env: opts.env }),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let stderr = '';
    let settled = false;

    const finish = (err: unknown, value?: ProcessResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (value) resolve(value);
      else reject(err instanceof Error ? err : new Error(String(err)));
    };
    const onAbort = (): void => {
      child.kill('SIGKILL');
      finish(signal?.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(opts.timeoutError());
    }, opts.timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', (chunk: Buffer) => {
      if (opts.maxStdoutBytes !== undefined && size + chunk.length > opts.maxStdoutBytes) {
        if (opts.overflowError) {
          child.kill('SIGKILL');
          finish(opts.overflowError());
          return;
        }
        if (size >= opts.maxStdoutBytes) return;
      }
      chunks.push(chunk);
      size += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEEP);
    });
    child.on('error', (err: NodeJS.ErrnoException) => finish(opts.spawnError(err)));
    child.on('close', (code, sig) =>
      finish(undefined, { code, signal: sig, stdout: Buffer.concat(chunks), stderr }),
    );
  });
}

/** The last non-empty line of a process's stderr, with a temporary path replaced by a word. */
export function lastStderrLine(stderr: string, path: string, placeholder = 'input'): string {
  const lines = stderr
    .split(path)
    .join(placeholder)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return (lines[lines.length - 1] ?? '').slice(0, 200);
}
