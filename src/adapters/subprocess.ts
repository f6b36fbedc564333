import { spawn, type ChildProcess } from 'node:child_process';
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

/** What a run of a child waits with: its time limit, the caller's abort, its output's cap. */
export type WaitOptions = Pick<
  RunProcessOptions,
  'timeoutMs' | 'signal' | 'timeoutError' | 'spawnError' | 'maxStdoutBytes' | 'overflowError'
>;

/**
 * Runs a child process to completion and resolves with its exit status and output, whatever the
 * exit code. Rejects when it cannot start, times out, or the caller aborts; the child is killed.
 */
export function runProcess(opts: RunProcessOptions): Promise<ProcessResult> {
  opts.signal?.throwIfAborted();
  const child = spawn(opts.command, opts.args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
    ...(opts.env === undefined ? {} : { env: opts.env }),
  });
  return waitFor(collect(child), opts);
}

/** A child's output gathered from its start, and its end (or its failure to start). */
interface Collected {
  child: ChildProcess;
  kill(): void;
  onOutput(limit: number | undefined, overflow: (() => void) | undefined): void;
  output(): { stdout: Buffer; stderr: string };
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: NodeJS.ErrnoException }>;
  hasEnded(): boolean;
}

function collect(child: ChildProcess, kill = () => void child.kill('SIGKILL')): Collected {
  const chunks: Buffer[] = [];
  let size = 0;
  let stderr = '';
  let limit: number | undefined;
  let overflow: (() => void) | undefined;
  let done = false;
  child.stdout!.on('data', (chunk: Buffer) => {
    if (limit !== undefined && size + chunk.length > limit) {
      if (overflow) {
        overflow();
        return;
      }
      if (size >= limit) return;
    }
    chunks.push(chunk);
    size += chunk.length;
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEEP);
  });
  const ended = new Promise<
    { code: number | null; signal: NodeJS.Signals | null } | { error: NodeJS.ErrnoException }
  >((resolve) => {
    child.on('error', (error: NodeJS.ErrnoException) => resolve({ error }));
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  void ended.then(() => (done = true));
  return {
    child,
    kill,
    onOutput: (l, o) => {
      limit = l;
      overflow = o;
    },
    output: () => ({ stdout: Buffer.concat(chunks), stderr }),
    ended,
    hasEnded: () => done || child.exitCode !== null || child.signalCode !== null,
  };
}

/** Waits for a collected child within the options' limits; kills it on a timeout, abort or overflow. */
function waitFor(c: Collected, opts: WaitOptions): Promise<ProcessResult> {
  const { signal } = opts;
  return new Promise<ProcessResult>((resolve, reject) => {
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
      c.kill();
      finish(signal?.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(() => {
      c.kill();
      finish(opts.timeoutError());
    }, opts.timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    c.onOutput(
      opts.maxStdoutBytes,
      opts.overflowError
        ? () => {
            c.kill();
            finish(opts.overflowError!());
          }
        : undefined,
    );
    void c.ended.then((end) => {
      if ('error' in end) finish(opts.spawnError(end.error));
      else finish(undefined, { ...end, ...c.output() });
    });
  });
}

/**
 * A child started ahead of need, holding its input until it is given: a recogniser that loads its
 * model while nobody waits, then reads the audio from `/dev/stdin`. Node's stdin for a child is a
 * socket, which a program cannot open by that name, so `cat` passes it on through a real pipe; the
 * two run in a process group of their own, killed together. While it waits it does not keep the
 * caller's process alive, and the end of that process closes its stdin, which ends it.
 */
export class SpareProcess {
  readonly #c: Collected;

  constructor(command: string, args: string[]) {
    const child = spawn('sh', ['-c', 'cat | "$0" "$@"', command, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    // Its failure to start is told by its end (collect); never an unhandled 'error' meanwhile.
    child.on('error', () => undefined);
    // Out of descriptors, Node makes no pipes (its types say otherwise): then there is no spare.
    if ([child.stdin, child.stdout, child.stderr].some((p) => (p as unknown) == null)) {
      child.kill('SIGKILL');
      throw new Error('the spare process got no pipes');
    }
    // A child that dies before its input is written would fail the write: its end says why.
    child.stdin.on('error', () => undefined);
    this.#c = collect(child, () => {
      // Once Node has seen it end, its group id may belong to another process: no signal then.
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    });
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as Unref).unref?.();
  }

  /** Whether it still waits for its input (one that died, or was used, is no spare). */
  get ready(): boolean {
    return !this.#c.hasEnded() && this.#c.child.stdin!.writable;
  }

  /** Writes `input`, closes stdin and waits for the child as runProcess does. */
  run(input: Buffer, opts: WaitOptions): Promise<ProcessResult> {
    opts.signal?.throwIfAborted();
    const child = this.#c.child;
    child.ref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as Unref).ref?.();
    const result = waitFor(this.#c, opts);
    child.stdin!.end(input);
    return result;
  }

  kill(): void {
    this.#c.kill();
  }
}

interface Unref {
  ref?: () => void;
  unref?: () => void;
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
