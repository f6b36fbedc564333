/**
 * A worker's proof that it holds a job's current attempt. The token is a private field: it is not
 * enumerable, so neither JSON.stringify nor a logger can print it (J12). Only the job store reads it.
 */
export class AttemptHandle {
  readonly #token: string;

  constructor(
    readonly jobId: string,
    readonly attemptId: string,
    readonly attemptNo: number,
    token: string,
  ) {
    this.#token = token;
  }

  /** For the job store's fenced writes only. */
  static tokenOf(handle: AttemptHandle): string {
    return handle.#token;
  }

  toJSON(): Record<string, unknown> {
    return { jobId: this.jobId, attemptId: this.attemptId, attemptNo: this.attemptNo };
  }
}

/** The writer's token is no longer the job's current running attempt (J3): stop working on it. */
export class LostLeaseError extends Error {
  constructor(readonly jobId: string) {
    super(`attempt no longer holds job ${jobId}`);
    this.name = 'LostLeaseError';
  }
}
