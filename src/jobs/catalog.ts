import type { Config } from '../config.ts';
import type { JobRow, Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { OUTAGE_WAITS, type FailurePolicy } from '../domain/retry-policy.ts';
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
  /** R11: the recording's participants and speaker timeline, for the meeting made from it. */
  [JobKind.importBotSpeakers]: { recordingId: string; meetingId: string };
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
  /** What a failed attempt of this kind means beyond its budget (J6, L7, R7, J20): see FailurePolicy. */
  failure(config: Config): FailurePolicy;
  /**
   * Locked before the other active jobs of a meeting when several are ended together (a repair
   * commit holds its own job, then locks the window jobs it supersedes).
   */
  locksFirst?: true;
}

/** The database went away under the attempt: a restart, a failover, a cut connection. */
const DATABASE_OUTAGE_CODES = [
  'db.connection_lost',
  // A raw socket error no adapter named (each names its own: asr.unreachable, …): in a job, the
  // database's socket reset under it, as a terminated backend or a failover does.
  'internal.network',
  'db.transient',
];

/** Speech-provider answers that say "not now" rather than "never" (src/adapters/provider-http.ts). */
const SPEECH_OUTAGE_CODES = [
  'asr.rate_limited',
  'asr.overloaded',
  'asr.server_error',
  'asr.unreachable',
  'asr.timeout',
  'asr.quota_exhausted',
];

/** The bot provider's answers that say "not now" (src/adapters/recall-bot-provider.ts). */
const BOT_PROVIDER_OUTAGE_CODES = new Set([
  'bot.server_error',
  'bot.unreachable',
  'bot.timeout',
  'bot.rate_limited',
  // the recording's storage: 5xx, 408, 429, no connection (a 4xx of another kind is permanent)
  'bot.recording_unavailable',
]);

/** R11: the speaker timeline is not made yet, or its link expired: asked again later. */
const BOT_SPEAKER_WAIT_CODES: ReadonlySet<string> = new Set([
  ...BOT_PROVIDER_OUTAGE_CODES,
  'bot.speakers_unavailable',
  'bot.recording_link_expired',
  'bot.bad_response',
]);

/** Outside outages: waited out without spending retries (L7), up to OUTAGE_WAITS, by every kind. */
const OUTSIDE_OUTAGE_CODES: ReadonlySet<string> = new Set([...DATABASE_OUTAGE_CODES, ...SPEECH_OUTAGE_CODES]);

/** Fails once its budget is spent; rides out the database's and the speech provider's outages. */
const waitsOutOutages = (): FailurePolicy => ({
  outageCodes: OUTSIDE_OUTAGE_CODES,
  outageWaits: OUTAGE_WAITS,
  patience: null,
  isolateOnErrors: false,
});
/** J20: once its budget is spent on errors that may pass, isolated and kept trying, never failed: it holds words. */
const holdsWords = (): FailurePolicy => ({ ...waitsOutOutages(), isolateOnErrors: true });

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
    failure: waitsOutOutages,
    dedupeKey: (p) => `split-recording:${p.meetingId}`,
  },
  [JobKind.transcribeWindow]: {
    queue: QUEUE_OF[JobKind.transcribeWindow],
    subjectType: 'window',
    subjectId: (p) => p.windowId,
    meetingId: (p) => p.meetingId,
    budget: standard,
    failure: holdsWords,
    dedupeKey: null,
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
    failure: waitsOutOutages,
    dedupeKey: (p) => `close-out:${p.meetingId}`,
  },
  [JobKind.writeMinutes]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.writeMinutes],
    budget: (config) => ({ maxErrors: MINUTES_MAX_ERRORS, maxReclaims: config.maxReclaims }),
    failure: waitsOutOutages,
    // The variant is why the minutes are written (the first transcript, a revision, a request).
    dedupeKey: (p, variant) => `write-minutes:${p.meetingId}:${variant ?? ''}`,
  },
  [JobKind.importBotRecording]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.importBotRecording],
    budget: standard,
    // R7: the provider keeps a recording for days; its outages are waited out for the patience
    // (VERBATIM_BOT_IMPORT_PATIENCE_SECONDS) since the import was asked for, however many waits.
    failure: (config) => ({
      ...waitsOutOutages(),
      patience: { codes: BOT_PROVIDER_OUTAGE_CODES, ms: config.bots.importPatienceMs },
    }),
    dedupeKey: (p) => `import-bot:${p.recordingId}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId') }),
  },
  [JobKind.scheduleBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.scheduleBot],
    budget: botCalls,
    failure: waitsOutOutages,
    dedupeKey: null,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), workspaceId: text(raw, 'workspaceId') }),
  },
  [JobKind.deleteBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.deleteBot],
    budget: botCalls,
    failure: waitsOutOutages,
    dedupeKey: (p) => `delete-bot:${p.botId ?? `recording:${p.recordingId}`}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), botId: optionalText(raw, 'botId') }),
  },
  [JobKind.leaveBot]: {
    ...ofRecording,
    queue: QUEUE_OF[JobKind.leaveBot],
    budget: botCalls,
    failure: waitsOutOutages,
    dedupeKey: (p) => `leave-bot:${p.botId}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), botId: text(raw, 'botId') }),
  },
  [JobKind.importBotSpeakers]: {
    queue: QUEUE_OF[JobKind.importBotSpeakers],
    subjectType: 'meeting',
    subjectId: (p) => p.meetingId,
    meetingId: (p) => p.meetingId,
    budget: botCalls,
    // R11: the provider makes the participant events after the recording; its outages and a
    // timeline not made yet are waited out for the import's patience, as the recording's are.
    failure: (config) => ({
      ...waitsOutOutages(),
      patience: { codes: BOT_SPEAKER_WAIT_CODES, ms: config.bots.importPatienceMs },
    }),
    dedupeKey: (p) => `import-bot-speakers:${p.meetingId}`,
    parse: (raw) => ({ recordingId: text(raw, 'recordingId'), meetingId: text(raw, 'meetingId') }),
  },
  [JobKind.repairTimeline]: {
    ...ofMeeting,
    queue: QUEUE_OF[JobKind.repairTimeline],
    budget: standard,
    // It recognises late audio: given up, that audio's words would be lost.
    failure: holdsWords,
    dedupeKey: null,
    locksFirst: true,
  },
};

/** A kind's failure policy under this configuration (the job store applies its verdicts). */
export function failurePolicyOf(config: Config, kind: string): FailurePolicy {
  const rules = JOB_CATALOG[kind as JobKind] as JobKindRules<JobKind> | undefined;
  // A kind this version does not know (a newer one's, during a rolling upgrade) gets the default.
  return rules ? rules.failure(config) : waitsOutOutages();
}

/** The kinds locked first when several active jobs of a meeting are ended together. */
export const LOCKED_FIRST: readonly string[] = (Object.keys(JOB_CATALOG) as JobKind[]).filter(
  (k) => JOB_CATALOG[k].locksFirst,
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
