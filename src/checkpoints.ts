/**
 * Named checkpoints where tests inject faults into real processes. Nothing happens unless
 * VERBATIM_FAULTS names the checkpoint, so production code pays one map lookup per call.
 *
 * A fault: {"at": "transcribe.after-claim", "action": "kill", "times": 1, "match": {"windowIndex": 1}}
 * `times` is counted across processes in VERBATIM_FAULT_STATE_DIR, so "kill the first worker that
 * gets here" survives the restart it causes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { AppError, type ErrorKind } from './domain/errors.ts';

/**
 * Every named checkpoint in the code, and whether the simulation may kill a process there
 * (sim/faults.ts draws from those): a typo in a name is a type error, not a fault that never fires.
 */
export const CHECKPOINT_CATALOG = {
  'close-out-meeting.after-last-stretch': { simulated: true },
  'close-out-meeting.transcribe-directly': { simulated: true },
  'dispatcher.after-deliver': { simulated: true },
  'draft.recognise': { simulated: false },
  enqueue: { simulated: true },
  'recording.processing': { simulated: true },
  'recording.referenced': { simulated: true },
  'repair-timeline.before-commit': { simulated: true },
  'search-index.before-commit': { simulated: false },
  'split.window-committed': { simulated: false },
  'storage.before-delete': { simulated: true },
  'storage.fencing': { simulated: true },
  'storage.get': { simulated: true },
  'storage.staged': { simulated: true },
  'storage.written': { simulated: true },
  'transcribe-window.before-commit': { simulated: true },
  'transcribe-window.before-close-out-start': { simulated: true },
  // Not a step of any piece of work.
  'worker.started': { simulated: false },
} as const satisfies Record<string, { simulated: boolean }>;

/** A checkpoint's name: one of the catalog's, or `<job kind>.after-claim` (src/jobs/job-runner.ts). */
export type CheckpointName = keyof typeof CHECKPOINT_CATALOG | `${string}.after-claim`;

export const FaultAction = {
  kill: 'kill',
  throw: 'throw',
  hang: 'hang',
  stop: 'stop',
  reject: 'reject',
  /** Waits `ms` (default 1 s), then goes on: a slow step, not a stuck one. */
  delay: 'delay',
} as const;
export type FaultAction = (typeof FaultAction)[keyof typeof FaultAction];

interface Fault {
  at: string;
  action: FaultAction;
  times?: number;
  match?: Record<string, string | number | boolean>;
  message?: string;
  /** With action `delay`: how long. */
  ms?: number;
  /** With action `throw`: throw an AppError of this kind and code instead of a plain Error. */
  kind?: ErrorKind;
  code?: string;
}

export type CheckpointContext = Record<string, string | number | boolean | null | undefined>;

export class Checkpoints {
  private readonly faults: Fault[];

  constructor(
    spec: string,
    private readonly stateDir: string,
  ) {
    this.faults = spec ? (JSON.parse(spec) as Fault[]) : [];
  }

  static none(): Checkpoints {
    return new Checkpoints('', '');
  }

  get active(): boolean {
    return this.faults.length > 0;
  }

  async hit(name: CheckpointName, context: CheckpointContext = {}): Promise<void> {
    if (this.faults.length === 0) return;
    for (const [i, fault] of this.faults.entries()) {
      if (fault.at !== name) continue;
      if (fault.match && !Object.entries(fault.match).every(([k, v]) => context[k] === v)) continue;
      if (fault.times !== undefined && !this.take(i, fault.times)) continue;
      await this.fire(fault, name);
    }
  }

  /** Counts a firing in the shared state dir; false once the fault has fired `times` times. */
  private take(index: number, times: number): boolean {
    if (!this.stateDir) throw new Error('VERBATIM_FAULT_STATE_DIR is required for counted faults');
    fs.mkdirSync(this.stateDir, { recursive: true });
    for (let n = 0; n < times; n++) {
      try {
        fs.writeFileSync(path.join(this.stateDir, `fault-${index}-${n}`), String(process.pid), {
          flag: 'wx',
        });
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    return false;
  }

  private async fire(fault: Fault, name: string): Promise<void> {
    switch (fault.action) {
      case FaultAction.kill:
        process.stderr.write(`checkpoint ${name}: SIGKILL\n`);
        process.kill(process.pid, 'SIGKILL');
        await new Promise(() => {});
        return;
      case FaultAction.throw:
        if (fault.kind) {
          throw new AppError(
            fault.kind,
            fault.code ?? 'injected',
            fault.message ?? `injected fault at ${name}`,
          );
        }
        throw new Error(fault.message ?? `injected fault at ${name}`);
      case FaultAction.stop:
        // A real SIGSTOP of this process; the test resumes it with SIGCONT.
        process.stderr.write(`checkpoint ${name}: SIGSTOP\n`);
        process.kill(process.pid, 'SIGSTOP');
        return;
      case FaultAction.hang:
        await new Promise(() => {});
        return;
      case FaultAction.delay:
        await new Promise((r) => setTimeout(r, fault.ms ?? 1000));
        return;
      case FaultAction.reject:
        void Promise.reject(new Error(fault.message ?? `injected unhandled rejection at ${name}`));
        return;
    }
  }
}
