import type { Config } from '../config.ts';
import type { JobRow, Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind, QUEUE_OF, type QueueName } from '../domain/status.ts';
import type { JobSpec, PgJobStore } from './pg-job-store.ts';

/**
 * The job catalog: for every kind of job, what its payload holds, which queue runs it, what it is
 * about (its subject), how many failures and reclaims it may spend and how duplicates are told
 * apart. Every job is created through `createJob` below and every handler reads its payload with
 * `payloadOf`, so a kind's rules live here and nowhere else.
 */
export interface JobPayloads {
  [JobKind.splitRecording]: { meetingId: string };
  [JobKind.transcribeWindow]: { meetingId: string; windowId: string; windowIndex: number };
  [JobKind.closeOutMeeting]: { meetingId: string };
  [JobKind.writeMinutes]: { meetingId: string };
  [JobKind.importBotRecording]: { recordingId: string };
  [JobKind.scheduleBot]: { recordingId: string; workspaceId: string };
  /** `botId` null: the bot's id was never learnt; the recording's other bots are found by it. */
  [JobKind.deleteBot]: { recordingId: string; botId: string | null };
  [JobKind.leaveBot]: { recordingId: string; botId: string };
  [JobKind.repairTimeline]: { meetingId: string };
}

export type JobPayload<K extends JobKind> = JobPayloads[K];

/** The budgets a job kind spends before it fails (J6, J10). */
export interface JobBudget {
  maxErrors: number;
  maxReclaims: number;
}

interface JobKindRules<K extends JobKind> {
  queue: QueueName;
  subjectType: JobSpec['subjectType'];
  subjectId(payload: JobPayloads[K]): string;
  meetingId(payload: JobPayloads[K]): string | null;
  budget(config: Config): JobBudget;
  /**
   * Jobs with the same key are one job: a second create is a no-op (B3 retries, repeated
   * webhooks). `variant` tells apart jobs of one subject that are meant to coexist.
   */
  dedupeKey: ((payload: JobPayloads[K], variant?: string) => string) | null;
  parse(raw: Record<string, unknown>): JobPayloads[K];
  /**
   * J20: once its error budget is spent on errors that may pass, the job is isolated and keeps
   * trying on a slow backoff instead of failing: failing it would lose a window's words.
   */
  isolateOnErrors?: true;
}

/** Minutes: an LLM provider that fails three times is not going to succeed on the fourth (O3). */
export const MINUTES_MAX_ERRORS = 3;
/** Provider calls for bots: their own rate limits pace them, so they get many tries (R2). */
export const BOT_CALL_MAX_ERRORS = 20;

const standard = (config: Config): JobBudget => ({
  maxErrors: config.transcribeMaxErrors,
  maxReclaims: config.maxReclaims,
});
const botCalls = (config: Config): JobBudget => ({
  maxErrors: BOT_CALL_MAX_ERRORS,
  maxReclaims: config.maxReclaims,
});
const ofMeeting = {
  subjectType: 'meeting',
  subjectId: (p: { meetingId: string }) => p.meetingId,
  meetingId: (p: { meetingId: string }) => p.meetingId,
  parse: (raw: Record<string, unknown>) => ({ meetingId: text(raw, 'meetingId') }),
} as const;
const ofRecording = {
  subjectType: 'bot_recording',
  subjectId: (p: { recordingId: string }) => p.recordingId,
  meetingId: () => null,
} as const;

export const JOB_CATALOG: { [K in JobKind]: JobKindRules<K> } = {
  [JobKind.splitRecording]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.splitRecording],
    budget: standard,
    dedupeKey: (p) => `split-recording:${p.meetingId}`,
  },
  [JobKind.transcribeWindow]: {
    queue: QUEUE_OF[JobKind.transcribeWindow],
    subjectType: 'window',
    subjectId: (p) => p.windowId,
    meetingId: (p) => p.meetingId,
    budget: standard,
    dedupeKey: null,
    isolateOnErrors: true,
    parse: (raw) => ({
      meetingId: text(raw, 'meetingId'),
      windowId: text(raw, 'windowId'),
      windowIndex: integer(raw, 'windowIndex'),
    }),
  },
  [JobKind.closeOutMeeting]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.closeOutMeeting],
    budget: (config) => ({
      maxErrors: config.closeoutMaxErrors,
      maxReclaims: config.closeoutMaxReclaims,
    }),
    dedupeKey: (p) => `close-out:${p.meetingId}`,
  },
  [JobKind.writeMinutes]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.writeMinutes],
    budget: (config) => ({ maxErrors: MINUTES_MAX_ERRORS, maxReclaims: config.maxReclaims }),
    // The variant is why the minutes are written (the first transcript, a revision, a request).
    dedupeKey: (p, variant) => `write-minutes:${p.meetingId}:${variant ?? ''}`,
  },
  [JobKind.importBotRecording]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.importBotRecording],
    budget: standard,
    dedupeKey: (p) => `import-bot:${p.recordingId}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId') }),
  },
  [JobKind.scheduleBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.scheduleBot],
    budget: botCalls,
    dedupeKey: null,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), workspaceId: text(raw, 'workspaceId') }),
  },
  [JobKind.deleteBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.deleteBot],
    budget: botCalls,
    dedupeKey: (p) => `delete-bot:${p.botId ?? `recording:${p.recordingId}`}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), botId: optionalText(raw, 'botId') }),
  },
  [JobKind.leaveBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.leaveBot],
    budget: botCalls,
    dedupeKey: (p) => `leave-bot:${p.botId}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), botId: text(raw, 'botId') }),
  },
  [JobKind.repairTimeline]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.repairTimeline],
    budget: standard,
    dedupeKey: null,
    // It recognises late audio: given up, that audio's words would be lost.
    isolateOnErrors: true,
  },
};

/** J20: the kinds whose spent error budget isolates them instead of failing them. */
export const ISOLATE_ON_ERRORS: ReadonlySet<string> = new Set(
  (Object.keys(JOB_CATALOG) as JobKind[]).filter((k) => JOB_CATALOG[k].isolateOnErrors),
);

export interface CreateJobOptions {
  workspaceId: string;
  /** Run no earlier than this many milliseconds from now. */
  delayMs?: number;
  /** Tells apart jobs of one subject that may coexist (see `dedupeKey`). */
  dedupeVariant?: string;
  inputRevision?: number;
}

/** The row a job of `kind` is created with, by the catalog's rules. */
export function jobSpec<K extends JobKind>(
  config: Config,
  kind: K,
  payload: JobPayloads[K],
  options: CreateJobOptions,
): JobSpec {
  return { workspaceId: options.workspaceId, ...workspacelessSpec(config, kind, payload, options) };
}

/**
 * The same row for a job that SQL creates in the workspace of the row it locks (the close-out,
 * which verbatim_start_close_out inserts through verbatim_insert_job): everything but the workspace.
 */
export function workspacelessSpec<K extends JobKind>(
  config: Config,
  kind: K,
  payload: JobPayloads[K],
  options: Omit<CreateJobOptions, 'workspaceId'> = {},
): Omit<JobSpec, 'workspaceId'> {
  const rules = JOB_CATALOG[kind] as JobKindRules<K>;
  return {
    kind,
    subjectType: rules.subjectType,
    subjectId: rules.subjectId(payload),
    meetingId: rules.meetingId(payload),
    payload: { ...payload },
    ...rules.budget(config),
    delayMs: options.delayMs,
    dedupeKey: rules.dedupeKey?.(payload, options.dedupeVariant),
    inputRevision: options.inputRevision,
  };
}

/**
 * Creates a job of `kind` in the caller's transaction (J1): it runs only if that transaction
 * commits. Null when a job with the same dedupe key already exists.
 */
export function createJob<K extends JobKind>(
  deps: { jobs: Pick<PgJobStore, 'createJob'>; config: Config },
  trx: Tx,
  kind: K,
  payload: JobPayloads[K],
  options: CreateJobOptions,
  actor: string,
): Promise<JobRow | null> {
  return deps.jobs.createJob(trx, jobSpec(deps.config, kind, payload, options), actor);
}

/** A claimed job's payload, checked against its kind's shape. */
export function payloadOf<K extends JobKind>(job: Pick<JobRow, 'kind' | 'payload'>, kind: K): JobPayloads[K] {
  if (job.kind !== kind) {
    throw new AppError(
      ErrorKind.permanent,
      'job.wrong_kind',
      `a ${job.kind} job was given to the ${kind} handler`,
    );
  }
  return (JOB_CATALOG[kind] as JobKindRules<K>).parse(job.payload);
}

function text(raw: Record<string, unknown>, field: string): string {
  const value = raw[field];
  if (typeof value === 'string' && value !== '') return value;
  throw badPayload(field, 'a non-empty string');
}

function optionalText(raw: Record<string, unknown>, field: string): string | null {
  const value = raw[field];
  if (value === undefined || value === null) return null;
  return text(raw, field);
}

function integer(raw: Record<string, unknown>, field: string): number {
  const value = raw[field];
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  throw badPayload(field, 'a whole number');
}

function badPayload(field: string, expected: string): AppError {
  return new AppError(
    ErrorKind.permanent,
    'job.bad_payload',
    `the job's payload field "${field}" is not ${expected}`,
  );
}
