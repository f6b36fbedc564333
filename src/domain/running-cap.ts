import { JobKind, QueueName } from './status.ts';

/**
 * F5: the queues whose batch jobs a workspace's running cap counts and holds back: an upload's
 * decode and split, and the windows (uploads' and repairs'). Live windows (fair class 0), drafts,
 * close-outs, minutes and bot calls are never capped, so a team's live meeting stays live.
 */
export const CAPPED_QUEUES: readonly QueueName[] = [QueueName.intake, QueueName.transcription];

/**
 * F2: the kind a workspace's split limit counts (VERBATIM_SPLITS_PER_WORKSPACE): an upload's decode
 * and split, which holds an intake slot for as long as its recording takes to decode, so one
 * workspace's uploads cannot take every intake slot of every worker.
 */
export const SPLIT_KIND: string = JobKind.splitRecording;

/** The fair class of batch work (migration 0053): the class a running cap applies to. */
export const BATCH_CLASS = 1;

export function isCappedWork(job: { queue: string; fair_class: number; isolated_at: Date | null }): boolean {
  return (
    job.isolated_at === null &&
    job.fair_class === BATCH_CLASS &&
    (CAPPED_QUEUES as readonly string[]).includes(job.queue)
  );
}

/**
 * F5: how long a claim refused by the workspace's running cap is put off. A job with `ahead`
 * jobs of its lane before it waits about one second per `cap` of them (its turn can hardly come
 * sooner), at least a second and at most a minute: the few jobs near the head come back every
 * second, the deep ones rarely, so a backlog of thousands costs about `cap × ln(backlog)` refused
 * claims a second, not thousands.
 */
export function cappedDeferMs(ahead: number, cap: number): number {
  const generations = Math.ceil((ahead + 1) / Math.max(1, cap));
  return Math.min(60_000, Math.max(1_000, generations * 1_000));
}

/** F2: a job the workspace's split limit applies to (an ordinary split; the isolated lane runs alone). */
export function isSplitWork(job: { kind: string; isolated_at: Date | null }): boolean {
  return job.isolated_at === null && job.kind === SPLIT_KIND;
}
