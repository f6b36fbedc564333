/**
 * The only module that reads `process.env`. Every installation setting is validated here once;
 * the rest of the code receives a typed `Config`. The README's settings table mirrors `SETTINGS`.
 */
import os from 'node:os';
import path from 'node:path';
import { parseEgressAllow } from './net/egress.ts';
import type { JobKind } from './domain/status.ts';

interface Setting {
  env: string;
  default: string;
  help: string;
}

export const SETTINGS = {
  databaseUrl: { env: 'DATABASE_URL', default: '', help: 'Postgres URL; empty starts an embedded Postgres' },
  dataDir: { env: 'VERBATIM_DATA_DIR', default: '.verbatim', help: 'embedded Postgres data and local blobs' },
  embeddedPgPort: {
    env: 'VERBATIM_EMBEDDED_PG_PORT',
    default: '',
    help: 'port of the embedded Postgres on 127.0.0.1; empty: a free one chosen at first start and kept in the data dir (S6)',
  },
  host: { env: 'VERBATIM_HOST', default: '127.0.0.1', help: 'API listen address' },
  port: { env: 'VERBATIM_PORT', default: '8080', help: 'API listen port' },
  logLevel: { env: 'VERBATIM_LOG_LEVEL', default: 'info', help: 'trace, debug, info, warn, error or silent' },
  maxUploadBytes: {
    env: 'VERBATIM_MAX_UPLOAD_BYTES',
    default: '524288000',
    help: 'largest recording accepted',
  },
  egressAllow: {
    env: 'VERBATIM_EGRESS_ALLOW',
    default: '',
    help: 'CIDRs tenant-supplied URLs (feeds, webhooks, recording links) may reach although internal (S5)',
  },
  ffmpegPath: {
    env: 'VERBATIM_FFMPEG_PATH',
    default: 'ffmpeg',
    help: "the ffmpeg binary (Debian's package, on PATH)",
  },
  maxAudioSeconds: {
    env: 'VERBATIM_MAX_AUDIO_SECONDS',
    default: '21600',
    help: 'most audio one recording may decode to (S4); longer fails audio.too_long',
  },
  windowSeconds: { env: 'VERBATIM_WINDOW_SECONDS', default: '60', help: 'transcription window length (L2)' },
  boundarySearchSeconds: {
    env: 'VERBATIM_BOUNDARY_SEARCH_SECONDS',
    default: '3',
    help: 'how far before a slot end a window boundary may move to a quiet stretch (L18)',
  },
  chunkSeconds: { env: 'VERBATIM_CHUNK_SECONDS', default: '5', help: 'nominal live chunk length (L1)' },
  gapPatienceSeconds: {
    env: 'VERBATIM_GAP_PATIENCE_SECONDS',
    default: '30',
    help: 'how long a missing chunk is waited for while later ones arrive, before the timeline goes on past it (L19)',
  },
  drafts: {
    env: 'VERBATIM_DRAFTS',
    default: 'on',
    help: 'on: each live chunk gets a quick provisional transcription, shown until its window is final (L22); off: finals only',
  },
  draftRecogniser: {
    env: 'VERBATIM_DRAFT_RECOGNISER',
    default: 'fast',
    help: "fast: drafts use pocketsphinx with a narrower search, quicker and a little less accurate (a Whisper server is asked as for the finals); same: the finals' settings (L22)",
  },
  draftLagSeconds: {
    env: 'VERBATIM_DRAFT_LAG_SECONDS',
    default: '10',
    help: 'drafts further behind real time than this are skipped and counted, so the finals keep their pace (L22)',
  },
  maxSeqAhead: {
    env: 'VERBATIM_MAX_SEQ_AHEAD',
    default: '720',
    help: 'how far a chunk seq may run ahead of the highest stored one (L21; 720 = one hour of 5 s chunks)',
  },
  lateAudioDays: {
    env: 'VERBATIM_LATE_AUDIO_DAYS',
    default: '7',
    help: 'days after a meeting ended during which a late chunk is still taken and spliced in (L19)',
  },
  maxChunkBytes: { env: 'VERBATIM_MAX_CHUNK_BYTES', default: '2097152', help: 'largest live chunk accepted' },
  maxJsonBytes: {
    env: 'VERBATIM_MAX_JSON_BYTES',
    default: '1048576',
    help: 'largest request body on every route but recordings and chunks (S7); larger gets 413',
  },
  maxProviderWebhookBytes: {
    env: 'VERBATIM_MAX_PROVIDER_WEBHOOK_BYTES',
    default: '65536',
    help: 'largest bot provider webhook body (S7); the route has no API key, so it is cut off unread',
  },
  headersTimeoutSeconds: {
    env: 'VERBATIM_HEADERS_TIMEOUT_SECONDS',
    default: '30',
    help: "a request's line and headers must arrive within this, or it gets 408 and is closed (S7)",
  },
  idleTimeoutSeconds: {
    env: 'VERBATIM_IDLE_TIMEOUT_SECONDS',
    default: '60',
    help: 'longest silence while a request arrives or its answer is read; the connection is closed (S7)',
  },
  requestTimeoutSeconds: {
    env: 'VERBATIM_REQUEST_TIMEOUT_SECONDS',
    default: '60',
    help: 'a request body must arrive whole within this after its headers, recordings and chunks aside (S7)',
  },
  uploadTimeoutSeconds: {
    env: 'VERBATIM_UPLOAD_TIMEOUT_SECONDS',
    default: '3600',
    help: 'a recording or chunk must arrive whole within this (S7); 500 MB in an hour needs 1.2 Mbit/s',
  },
  rateLimitRequests: {
    env: 'VERBATIM_RATE_LIMIT_REQUESTS',
    default: '1200',
    help: 'API calls per key per rate window, live chunks aside; more get 429 with Retry-After; 0 = no limit (S7)',
  },
  rateLimitChunks: {
    env: 'VERBATIM_RATE_LIMIT_CHUNKS',
    default: '1200',
    help: 'live chunk PUTs per key per rate window, counted apart (a meeting sends 12 a minute); 0 = no limit (S7)',
  },
  rateLimitWindowSeconds: {
    env: 'VERBATIM_RATE_LIMIT_WINDOW_SECONDS',
    default: '60',
    help: 'the period the rate limits count over, per API process (S7)',
  },
  leaseSeconds: { env: 'VERBATIM_LEASE_SECONDS', default: '15', help: 'job lease length (J2)' },
  heartbeatSeconds: { env: 'VERBATIM_HEARTBEAT_SECONDS', default: '5', help: 'lease renewal interval (J2)' },
  leaseGraceSeconds: { env: 'VERBATIM_LEASE_GRACE_SECONDS', default: '0', help: 'grace past lease expiry' },
  sweepSeconds: {
    env: 'VERBATIM_SWEEP_SECONDS',
    default: '5',
    help: 'fast sweep interval in each worker (J8)',
  },
  idleTransactionSeconds: {
    env: 'VERBATIM_DB_IDLE_TRANSACTION_SECONDS',
    default: '30',
    help: 'a database session idle inside a transaction this long (a paused process holding locks) is ended by Postgres; 0 = never',
  },
  deathCheckSeconds: {
    env: 'VERBATIM_DEATH_CHECK_SECONDS',
    default: '0.5',
    help: "how often each worker checks the other workers' life locks; a lock seen free on two checks is a death (J18)",
  },
  rescueAfterSeconds: {
    env: 'VERBATIM_RESCUE_AFTER_SECONDS',
    default: '30',
    help: 'a due pending job with no live delivery this long is re-driven (J9)',
  },
  jobTimeoutSeconds: {
    env: 'VERBATIM_JOB_TIMEOUT_SECONDS',
    default: '1800',
    help: 'an attempt running longer is abandoned and retried (job.timeout)',
  },
  drainSeconds: {
    env: 'VERBATIM_DRAIN_SECONDS',
    default: '25',
    help: 'on SIGTERM, how long running jobs may finish before they are handed back (J11)',
  },
  maxReclaims: {
    env: 'VERBATIM_MAX_RECLAIMS',
    default: '3',
    help: 'reclaims (its worker lost while running it) before a job is isolated: run alone, in a process of its own (J7, J20)',
  },
  isolationBackoffSeconds: {
    env: 'VERBATIM_ISOLATION_BACKOFF_SECONDS',
    default: '60',
    help: 'an isolated job whose run did not succeed runs again after this, doubled after each such run (J20)',
  },
  isolationBackoffCapSeconds: {
    env: 'VERBATIM_ISOLATION_BACKOFF_CAP_SECONDS',
    default: '3600',
    help: 'the longest wait between two runs of an isolated job (J20)',
  },
  poisonRunnerDeaths: {
    env: 'VERBATIM_POISON_RUNNER_DEATHS',
    default: '3',
    help: 'an isolated job whose runner process dies this many runs in a row is declared poison (J20)',
  },
  heldAudioDays: {
    env: 'VERBATIM_HELD_AUDIO_DAYS',
    default: '7',
    help: 'days after a meeting ended that the audio of a stretch with no transcript is kept for it (J20, L16)',
  },
  transcribeMaxErrors: {
    env: 'VERBATIM_TRANSCRIBE_MAX_ERRORS',
    default: '5',
    help: 'failed tries of one window before it is given up (L14)',
  },
  retryStepSeconds: {
    env: 'VERBATIM_RETRY_STEP_SECONDS',
    default: '15',
    help: 'backoff step: retries wait 1x, 2x, 3x… this (L7, L14)',
  },
  closeoutGraceSeconds: {
    env: 'VERBATIM_CLOSEOUT_GRACE_SECONDS',
    default: '10',
    help: 'wait before close-out (L3)',
  },
  closeoutPollSeconds: {
    env: 'VERBATIM_CLOSEOUT_POLL_SECONDS',
    default: '15',
    help: 'close-out requeue delay while windows retry (L4)',
  },
  closeoutWaitCapSeconds: {
    env: 'VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS',
    default: '600',
    help: 'longest close-out waits for retrying windows (L4)',
  },
  closeoutMaxErrors: {
    env: 'VERBATIM_CLOSEOUT_MAX_ERRORS',
    default: '2',
    help: 'close-out error budget (L7)',
  },
  closeoutMaxReclaims: {
    env: 'VERBATIM_CLOSEOUT_MAX_RECLAIMS',
    default: '3',
    help: 'close-out reclaim budget (L7)',
  },
  minutesRetrySeconds: {
    env: 'VERBATIM_MINUTES_RETRY_SECONDS',
    default: '60',
    help: 'requeue delay during a minutes-model outage (L8)',
  },
  minutesWaitCapSeconds: {
    env: 'VERBATIM_MINUTES_WAIT_CAP_SECONDS',
    default: '3600',
    help: 'longest wait for the minutes model (L8)',
  },
  transcriptionConcurrency: {
    env: 'VERBATIM_TRANSCRIPTION_CONCURRENCY',
    default: 'auto',
    help: 'windows transcribed at once per worker (L2); auto: one per CPU for pocketsphinx, 1 for a Whisper server',
  },
  closeoutConcurrency: {
    env: 'VERBATIM_CLOSEOUT_CONCURRENCY',
    default: '1',
    help: 'close-outs at once (L13)',
  },
  minutesConcurrency: { env: 'VERBATIM_MINUTES_CONCURRENCY', default: '2', help: 'minutes at once (L13)' },
  intakeConcurrency: { env: 'VERBATIM_INTAKE_CONCURRENCY', default: '1', help: 'recordings split at once' },
  botConcurrency: {
    env: 'VERBATIM_BOT_CONCURRENCY',
    default: '2',
    help: 'bot provider jobs (schedule, delete, leave, import) at once, on a queue of their own (R10)',
  },
  workspaceQuotaBytes: {
    env: 'VERBATIM_WORKSPACE_QUOTA_BYTES',
    default: '0',
    help: 'stored bytes a workspace may hold, pending deletions included; 0 = no limit (B6)',
  },
  globalQuotaBytes: {
    env: 'VERBATIM_GLOBAL_QUOTA_BYTES',
    default: '0',
    help: 'stored bytes the whole installation may hold; 0 = no limit (B6)',
  },
  stageDeadlineSeconds: {
    env: 'VERBATIM_STAGE_DEADLINE_SECONDS',
    default: '900',
    help: 'how long a staged write may take before its object counts as an orphan (B2)',
  },
  cleanupBackoffSeconds: {
    env: 'VERBATIM_CLEANUP_BACKOFF_SECONDS',
    default: '5',
    help: 'first retry delay of a failed object deletion; doubles per attempt (B5)',
  },
  cleanupBackoffCapSeconds: {
    env: 'VERBATIM_CLEANUP_BACKOFF_CAP_SECONDS',
    default: '3600',
    help: 'longest delay between object deletion retries (B5)',
  },
  webhookRetrySeconds: {
    env: 'VERBATIM_WEBHOOK_RETRY_SECONDS',
    default: '5',
    help: 'first retry delay of a failed webhook delivery; doubles per attempt, capped at an hour (O3)',
  },
  webhookRetryCapSeconds: {
    env: 'VERBATIM_WEBHOOK_RETRY_CAP_SECONDS',
    default: '3600',
    help: 'longest delay between two attempts of a webhook delivery (O3)',
  },
  webhookMaxAttempts: {
    env: 'VERBATIM_WEBHOOK_MAX_ATTEMPTS',
    default: '12',
    help: 'webhook delivery attempts before it is marked failed for an operator (O3)',
  },
  webhookTimeoutSeconds: {
    env: 'VERBATIM_WEBHOOK_TIMEOUT_SECONDS',
    default: '10',
    help: 'how long a webhook receiver may take to answer (O3)',
  },
  recallUrl: {
    env: 'VERBATIM_RECALL_URL',
    default: 'https://us-east-1.recall.ai',
    help: 'Recall.ai (or compatible) API base URL for meeting bots (R1)',
  },
  recallApiKey: { env: 'VERBATIM_RECALL_API_KEY', default: '', help: 'Recall.ai API key; empty: no bots' },
  recallWebhookSecrets: {
    env: 'VERBATIM_RECALL_WEBHOOK_SECRETS',
    default: '',
    help: 'comma-separated whsec_ secrets that may sign provider webhooks (R8)',
  },
  recallLimits: {
    env: 'VERBATIM_RECALL_LIMITS',
    default: 'bot.create=60,bot.list=60,bot.retrieve=300,bot.delete=300,bot.leave_call=300',
    help: "calls per rate window per provider endpoint, shared by every process (R2); Recall's documented limits",
  },
  recallRateWindowSeconds: {
    env: 'VERBATIM_RECALL_RATE_WINDOW_SECONDS',
    default: '60',
    help: 'the period VERBATIM_RECALL_LIMITS count over (the provider counts per minute)',
  },
  botTrustWindowSeconds: {
    env: 'VERBATIM_BOT_TRUST_WINDOW_SECONDS',
    default: '3300',
    help: "how long after a create attempt its idempotency key is re-sent without a list call (R4); below the provider's one-hour key retention",
  },
  botLookbackHours: {
    env: 'VERBATIM_BOT_LOOKBACK_HOURS',
    default: '168',
    help: 'how long an unresolved bot attempt is recovered before it is given up (R5)',
  },
  feedPlainHttpHosts: {
    env: 'VERBATIM_FEED_PLAIN_HTTP_HOSTS',
    default: '',
    help: 'hosts (comma-separated) whose calendar feeds may be read over plain http, e.g. a calendar server inside your network; others must be https or webcal',
  },
  feedMaxOccurrences: {
    env: 'VERBATIM_FEED_MAX_OCCURRENCES',
    default: '5000',
    help: 'most event occurrences one calendar feed may have in the next two weeks; a feed over it is refused as invalid_calendar (S8)',
  },
  feedMaxEventOccurrences: {
    env: 'VERBATIM_FEED_MAX_EVENT_OCCURRENCES',
    default: '500',
    help: 'most occurrences one recurring event may have in the next two weeks (its rule may take 50 times as many steps to get there); over it, invalid_calendar (S8)',
  },
  feedParseSeconds: {
    env: 'VERBATIM_FEED_PARSE_SECONDS',
    default: '5',
    help: 'longest a calendar feed may take to parse and expand, in a thread of its own that is stopped at this limit; over it, invalid_calendar (S8)',
  },
  botBackfillAfterSeconds: {
    env: 'VERBATIM_BOT_BACKFILL_AFTER_SECONDS',
    default: '120',
    help: "how long after a meeting's end a bot not yet reported done is asked about directly (R7)",
  },
  botImportPatienceSeconds: {
    env: 'VERBATIM_BOT_IMPORT_PATIENCE_SECONDS',
    default: '3600',
    help: "how long a bot recording's import waits out the provider's outage before its retries count (R7)",
  },
  botBackstopSeconds: {
    env: 'VERBATIM_BOT_BACKSTOP_SECONDS',
    default: '900',
    help: "period of each workspace's bot recovery backstop, run at the workspace's own offset in it (R6)",
  },
  storage: { env: 'VERBATIM_STORAGE', default: 'local', help: 'local (files under the data dir) or s3' },
  s3Bucket: { env: 'VERBATIM_S3_BUCKET', default: '', help: 'S3 bucket (VERBATIM_STORAGE=s3)' },
  s3Endpoint: {
    env: 'VERBATIM_S3_ENDPOINT',
    default: '',
    help: 'S3-compatible endpoint URL; empty for AWS',
  },
  s3Region: { env: 'VERBATIM_S3_REGION', default: 'us-east-1', help: 'S3 region' },
  s3AccessKeyId: { env: 'VERBATIM_S3_ACCESS_KEY_ID', default: '', help: 'S3 access key id' },
  s3SecretAccessKey: {
    env: 'VERBATIM_S3_SECRET_ACCESS_KEY',
    default: '',
    help: 'S3 secret (never logged)',
  },
  s3ForcePathStyle: {
    env: 'VERBATIM_S3_FORCE_PATH_STYLE',
    default: 'true',
    help: 'path-style bucket URLs (MinIO, s3rver); false for virtual-hosted AWS style',
  },
  asr: {
    env: 'VERBATIM_ASR',
    default: 'pocketsphinx',
    help: 'pocketsphinx (offline) or whisper (OpenAI-compatible server)',
  },
  whisperUrl: { env: 'VERBATIM_WHISPER_URL', default: '', help: 'OpenAI-compatible base URL for whisper' },
  whisperApiKey: { env: 'VERBATIM_WHISPER_API_KEY', default: '', help: 'API key for the whisper server' },
  whisperModel: { env: 'VERBATIM_WHISPER_MODEL', default: 'whisper-1', help: 'model name for whisper' },
  asrTimeoutSeconds: {
    env: 'VERBATIM_ASR_TIMEOUT_SECONDS',
    default: '120',
    help: 'one window recognition timeout',
  },
  minutesWriter: {
    env: 'VERBATIM_MINUTES',
    default: 'extractive',
    help: 'extractive (offline) or openai (OpenAI-compatible chat)',
  },
  llmUrl: { env: 'VERBATIM_LLM_URL', default: '', help: 'OpenAI-compatible base URL for minutes' },
  llmApiKey: { env: 'VERBATIM_LLM_API_KEY', default: '', help: 'API key for the minutes model' },
  llmModel: { env: 'VERBATIM_LLM_MODEL', default: 'gpt-4o-mini', help: 'model name for minutes' },
  llmTimeoutSeconds: { env: 'VERBATIM_LLM_TIMEOUT_SECONDS', default: '120', help: 'minutes request timeout' },
  metricsToken: {
    env: 'VERBATIM_METRICS_TOKEN',
    default: '',
    help: 'bearer token (16+ characters) a Prometheus scraper must send to /metrics; empty: /metrics answers 404 (S9)',
  },
  apiUrl: { env: 'VERBATIM_URL', default: '', help: 'for `verbatim transcribe`: a running API to use' },
  apiKey: { env: 'VERBATIM_API_KEY', default: '', help: 'for `verbatim transcribe`: its API key' },
  faults: { env: 'VERBATIM_FAULTS', default: '', help: 'test-only fault injection (JSON list)' },
  faultStateDir: { env: 'VERBATIM_FAULT_STATE_DIR', default: '', help: 'test-only fault counters' },
  isolatedRun: {
    env: 'VERBATIM_ISOLATED_RUN',
    default: '',
    help: 'internal: the one job a `verbatim isolated-run` process runs, set by the worker that starts it (J20)',
  },
} as const satisfies Record<string, Setting>;

export interface Config {
  databaseUrl: string | null;
  dataDir: string;
  /** S6: null uses the port recorded in the data dir (a free one chosen at first start). */
  embeddedPgPort: number | null;
  host: string;
  port: number;
  logLevel: string;
  maxUploadBytes: number;
  /** S5: CIDRs a tenant's URLs may reach although internal (src/net/egress.ts). */
  egressAllow: string;
  ffmpegPath: string;
  maxAudioSeconds: number;
  windowMs: number;
  boundarySearchMs: number;
  chunkMs: number;
  gapPatienceMs: number;
  /** L22: provisional transcriptions of live chunks, and how far behind they may fall. */
  drafts: boolean;
  draftRecogniser: 'fast' | 'same';
  draftLagMs: number;
  maxSeqAhead: number;
  lateAudioMs: number;
  maxChunkBytes: number;
  /** S7: body limits, timeouts and per-key rates of the HTTP API (src/api/request-limits.ts). */
  requestLimits: RequestLimits;
  leaseMs: number;
  heartbeatMs: number;
  leaseGraceMs: number;
  sweepMs: number;
  /** A paused process's open transaction is ended after this long (0: never). */
  idleTransactionMs: number;
  /** J18: the period of the death watch (life locks). */
  deathCheckMs: number;
  rescueAfterMs: number;
  jobTimeoutMs: number;
  drainMs: number;
  maxReclaims: number;
  /** J20: the isolated lane. */
  isolation: { backoffMs: number; backoffCapMs: number; poisonRunnerDeaths: number };
  heldAudioMs: number;
  transcribeMaxErrors: number;
  retryStepMs: number;
  closeoutGraceMs: number;
  closeoutPollMs: number;
  closeoutWaitCapMs: number;
  closeoutMaxErrors: number;
  closeoutMaxReclaims: number;
  minutesRetryMs: number;
  minutesWaitCapMs: number;
  workspaceQuotaBytes: number;
  globalQuotaBytes: number;
  stageDeadlineMs: number;
  cleanupBackoffMs: number;
  cleanupBackoffCapMs: number;
  webhookRetryMs: number;
  webhookRetryCapMs: number;
  webhookMaxAttempts: number;
  webhookTimeoutMs: number;
  recall: {
    url: string;
    apiKey: string;
    webhookSecrets: string[];
    limits: Record<string, number>;
    rateWindowMs: number;
  };
  bots: {
    trustWindowMs: number;
    lookbackMs: number;
    backstopMs: number;
    backfillAfterMs: number;
    importPatienceMs: number;
    feedPlainHttpHosts: string[];
    /** S8: a feed's parsing budget. */
    feedBudget: { maxOccurrences: number; maxEventOccurrences: number; parseMs: number };
  };
  storage: {
    kind: 'local' | 's3';
    bucket: string;
    endpoint: string;
    region: string;
    accessKeyId: string;
    secretAccessKey: string;
    forcePathStyle: boolean;
  };
  concurrency: { transcription: number; closeout: number; minutes: number; intake: number; bots: number };
  asr: { kind: 'pocketsphinx' | 'whisper'; url: string; apiKey: string; model: string; timeoutMs: number };
  minutes: { kind: 'extractive' | 'openai'; url: string; apiKey: string; model: string; timeoutMs: number };
  /** S9: what /metrics requires as `Authorization: Bearer`; null: /metrics is off. */
  metricsToken: string | null;
  client: { url: string; apiKey: string };
  faults: string;
  faultStateDir: string;
  /**
   * The settings as they were given (each variable of SETTINGS that was set), so that a process
   * this one starts for a job (J20's isolated runner) runs with the same installation settings.
   */
  givenSettings: Readonly<Record<string, string>>;
  /** J20: in an isolated runner process, the job it runs. */
  isolatedRun: IsolatedRun | null;
}

/** J20: what a worker tells the runner process it starts for one isolated job. */
export interface IsolatedRun {
  kind: JobKind;
  jobId: string;
  deliveryId: string;
  /** The attempt's owner: the worker's id and the runner's, so that the worker knows its runner's attempt. */
  owner: string;
}

/**
 * The environment of a process this one starts to run part of its work (J20's isolated runner):
 * this one's, with exactly the settings this process was given (none read from elsewhere), and
 * `extra` over them.
 */
export function childProcessEnv(config: Config, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const setting of Object.values(SETTINGS)) delete env[setting.env];
  return { ...env, ...config.givenSettings, ...extra };
}

export interface RequestLimits {
  maxJsonBytes: number;
  maxProviderWebhookBytes: number;
  headersTimeoutMs: number;
  idleTimeoutMs: number;
  requestTimeoutMs: number;
  uploadTimeoutMs: number;
  /** 0: no limit. */
  rateLimitRequests: number;
  /** 0: no limit. */
  rateLimitChunks: number;
  rateWindowMs: number;
}

export class ConfigError extends Error {}

/**
 * Windows transcribed at once per worker. `auto` uses the machine: the local recogniser is CPU
 * bound and single-threaded, so one per CPU; a Whisper server's capacity is not ours to guess, so
 * one until the operator says more.
 */
export function transcriptionConcurrency(
  setting: string,
  asr: string,
  cpus = os.availableParallelism(),
): number {
  if (setting === 'auto') return asr === 'pocketsphinx' ? Math.max(1, cpus) : 1;
  const value = Number(setting);
  if (!Number.isInteger(value) || value < 1) {
    throw new ConfigError(
      `${SETTINGS.transcriptionConcurrency.env} must be a whole number >= 1 or auto, got "${setting}"`,
    );
  }
  return value;
}

type Env = Record<string, string | undefined>;

function isolatedRunOf(text: string): IsolatedRun | null {
  if (text === '') return null;
  const run = JSON.parse(text) as Partial<IsolatedRun>;
  if (
    typeof run.kind !== 'string' ||
    typeof run.jobId !== 'string' ||
    typeof run.deliveryId !== 'string' ||
    typeof run.owner !== 'string'
  ) {
    throw new ConfigError('VERBATIM_ISOLATED_RUN is not a run a worker wrote');
  }
  return run as IsolatedRun;
}

function givenSettingsOf(env: Env): Record<string, string> {
  const given: Record<string, string> = {};
  for (const setting of Object.values(SETTINGS)) {
    const value = env[setting.env];
    if (value !== undefined) given[setting.env] = value;
  }
  return given;
}

export function loadConfig(env: Env = process.env): Config {
  const raw = (key: keyof typeof SETTINGS): string => {
    const value = env[SETTINGS[key].env];
    return value === undefined || value === '' ? SETTINGS[key].default : value;
  };
  const num = (key: keyof typeof SETTINGS, min: number): number => {
    const text = raw(key);
    const value = Number(text);
    if (!Number.isFinite(value) || value < min) {
      throw new ConfigError(`${SETTINGS[key].env} must be a number >= ${min}, got "${text}"`);
    }
    return value;
  };
  const int = (key: keyof typeof SETTINGS, min: number): number => {
    const value = num(key, min);
    if (!Number.isInteger(value)) throw new ConfigError(`${SETTINGS[key].env} must be a whole number`);
    return value;
  };
  const ms = (key: keyof typeof SETTINGS, min = 0): number => Math.round(num(key, min) * 1000);
  const oneOf = <T extends string>(key: keyof typeof SETTINGS, allowed: readonly T[]): T => {
    const value = raw(key);
    if (!(allowed as readonly string[]).includes(value)) {
      throw new ConfigError(`${SETTINGS[key].env} must be one of ${allowed.join(', ')}, got "${value}"`);
    }
    return value as T;
  };

  const config: Config = {
    databaseUrl: raw('databaseUrl') || null,
    dataDir: path.resolve(raw('dataDir')),
    embeddedPgPort: raw('embeddedPgPort') === '' ? null : int('embeddedPgPort', 1),
    host: raw('host'),
    port: int('port', 0),
    logLevel: oneOf('logLevel', ['trace', 'debug', 'info', 'warn', 'error', 'silent']),
    maxUploadBytes: int('maxUploadBytes', 1),
    egressAllow: raw('egressAllow'),
    ffmpegPath: raw('ffmpegPath') || 'ffmpeg',
    maxAudioSeconds: int('maxAudioSeconds', 1),
    windowMs: ms('windowSeconds', 1),
    boundarySearchMs: ms('boundarySearchSeconds'),
    chunkMs: ms('chunkSeconds', 0.1),
    gapPatienceMs: ms('gapPatienceSeconds'),
    drafts: oneOf('drafts', ['on', 'off']) === 'on',
    draftRecogniser: oneOf('draftRecogniser', ['fast', 'same']),
    draftLagMs: ms('draftLagSeconds'),
    maxSeqAhead: int('maxSeqAhead', 1),
    lateAudioMs: ms('lateAudioDays') * 86_400,
    maxChunkBytes: int('maxChunkBytes', 1024),
    requestLimits: {
      maxJsonBytes: int('maxJsonBytes', 1024),
      maxProviderWebhookBytes: int('maxProviderWebhookBytes', 1024),
      headersTimeoutMs: ms('headersTimeoutSeconds', 0.05),
      idleTimeoutMs: ms('idleTimeoutSeconds', 0.05),
      requestTimeoutMs: ms('requestTimeoutSeconds', 0.05),
      uploadTimeoutMs: ms('uploadTimeoutSeconds', 0.05),
      rateLimitRequests: int('rateLimitRequests', 0),
      rateLimitChunks: int('rateLimitChunks', 0),
      rateWindowMs: ms('rateLimitWindowSeconds', 0.05),
    },
    leaseMs: ms('leaseSeconds', 0.2),
    heartbeatMs: ms('heartbeatSeconds', 0.05),
    leaseGraceMs: ms('leaseGraceSeconds'),
    sweepMs: ms('sweepSeconds', 0.05),
    deathCheckMs: ms('deathCheckSeconds', 0.05),
    idleTransactionMs: ms('idleTransactionSeconds'),
    rescueAfterMs: ms('rescueAfterSeconds'),
    jobTimeoutMs: ms('jobTimeoutSeconds', 1),
    drainMs: ms('drainSeconds'),
    maxReclaims: int('maxReclaims', 0),
    isolation: {
      backoffMs: ms('isolationBackoffSeconds', 0.05),
      backoffCapMs: ms('isolationBackoffCapSeconds', 0.05),
      poisonRunnerDeaths: int('poisonRunnerDeaths', 1),
    },
    heldAudioMs: ms('heldAudioDays') * 86_400,
    transcribeMaxErrors: int('transcribeMaxErrors', 1),
    retryStepMs: ms('retryStepSeconds'),
    closeoutGraceMs: ms('closeoutGraceSeconds'),
    closeoutPollMs: ms('closeoutPollSeconds', 0.05),
    closeoutWaitCapMs: ms('closeoutWaitCapSeconds'),
    closeoutMaxErrors: int('closeoutMaxErrors', 1),
    closeoutMaxReclaims: int('closeoutMaxReclaims', 0),
    minutesRetryMs: ms('minutesRetrySeconds', 0.05),
    minutesWaitCapMs: ms('minutesWaitCapSeconds'),
    workspaceQuotaBytes: int('workspaceQuotaBytes', 0),
    globalQuotaBytes: int('globalQuotaBytes', 0),
    stageDeadlineMs: ms('stageDeadlineSeconds', 0.1),
    cleanupBackoffMs: ms('cleanupBackoffSeconds', 0.01),
    cleanupBackoffCapMs: ms('cleanupBackoffCapSeconds', 0.01),
    webhookRetryMs: ms('webhookRetrySeconds', 0.01),
    webhookRetryCapMs: ms('webhookRetryCapSeconds', 0.01),
    webhookMaxAttempts: int('webhookMaxAttempts', 1),
    webhookTimeoutMs: ms('webhookTimeoutSeconds', 0.1),
    recall: {
      url: raw('recallUrl'),
      apiKey: raw('recallApiKey'),
      webhookSecrets: raw('recallWebhookSecrets')
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x.length > 0),
      limits: parseLimits(raw('recallLimits')),
      rateWindowMs: ms('recallRateWindowSeconds', 0.1),
    },
    bots: {
      trustWindowMs: ms('botTrustWindowSeconds', 1),
      lookbackMs: ms('botLookbackHours', 0.001) * 3600,
      backstopMs: ms('botBackstopSeconds', 1),
      backfillAfterMs: ms('botBackfillAfterSeconds'),
      importPatienceMs: ms('botImportPatienceSeconds'),
      feedPlainHttpHosts: raw('feedPlainHttpHosts')
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter((x) => x.length > 0),
      feedBudget: {
        maxOccurrences: int('feedMaxOccurrences', 1),
        maxEventOccurrences: int('feedMaxEventOccurrences', 1),
        parseMs: ms('feedParseSeconds', 0.1),
      },
    },
    storage: {
      kind: oneOf('storage', ['local', 's3']),
      bucket: raw('s3Bucket'),
      endpoint: raw('s3Endpoint'),
      region: raw('s3Region'),
      accessKeyId: raw('s3AccessKeyId'),
      secretAccessKey: raw('s3SecretAccessKey'),
      forcePathStyle: oneOf('s3ForcePathStyle', ['true', 'false']) === 'true',
    },
    concurrency: {
      transcription: transcriptionConcurrency(raw('transcriptionConcurrency'), raw('asr')),
      closeout: int('closeoutConcurrency', 1),
      minutes: int('minutesConcurrency', 1),
      intake: int('intakeConcurrency', 1),
      bots: int('botConcurrency', 1),
    },
    asr: {
      kind: oneOf('asr', ['pocketsphinx', 'whisper']),
      url: raw('whisperUrl'),
      apiKey: raw('whisperApiKey'),
      model: raw('whisperModel'),
      timeoutMs: ms('asrTimeoutSeconds', 0.1),
    },
    minutes: {
      kind: oneOf('minutesWriter', ['extractive', 'openai']),
      url: raw('llmUrl'),
      apiKey: raw('llmApiKey'),
      model: raw('llmModel'),
      timeoutMs: ms('llmTimeoutSeconds', 0.1),
    },
    metricsToken: raw('metricsToken') || null,
    client: { url: raw('apiUrl'), apiKey: raw('apiKey') },
    faults: raw('faults'),
    faultStateDir: raw('faultStateDir'),
    givenSettings: givenSettingsOf(env),
    isolatedRun: isolatedRunOf(raw('isolatedRun')),
  };
  if (config.heartbeatMs >= config.leaseMs) {
    throw new ConfigError('VERBATIM_HEARTBEAT_SECONDS must be shorter than VERBATIM_LEASE_SECONDS');
  }
  const limits = config.requestLimits;
  if (limits.headersTimeoutMs > limits.requestTimeoutMs || limits.requestTimeoutMs > limits.uploadTimeoutMs) {
    // Node refuses a header timeout longer than its request timeout (here the upload one).
    throw new ConfigError(
      'VERBATIM_HEADERS_TIMEOUT_SECONDS <= VERBATIM_REQUEST_TIMEOUT_SECONDS <= VERBATIM_UPLOAD_TIMEOUT_SECONDS must hold',
    );
  }
  if (config.bots.trustWindowMs >= 3_600_000) {
    // The provider keeps an idempotency key for an hour; a re-send after that could make a twin.
    throw new ConfigError('VERBATIM_BOT_TRUST_WINDOW_SECONDS must be below 3600');
  }
  for (const secret of config.recall.webhookSecrets) {
    // An empty key would let anyone sign a webhook.
    if (Buffer.from(secret.replace(/^whsec_/, ''), 'base64').length < 16) {
      throw new ConfigError(
        'each VERBATIM_RECALL_WEBHOOK_SECRETS entry must be a whsec_ secret of at least 16 bytes',
      );
    }
  }
  try {
    parseEgressAllow(config.egressAllow);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  if (config.metricsToken !== null && config.metricsToken.length < 16) {
    // A short token can be guessed by a scraper-shaped brute force.
    throw new ConfigError('VERBATIM_METRICS_TOKEN must be at least 16 characters');
  }
  if (config.embeddedPgPort !== null && config.embeddedPgPort > 65535) {
    throw new ConfigError(`VERBATIM_EMBEDDED_PG_PORT must be a port (1-65535), got ${config.embeddedPgPort}`);
  }
  if (config.storage.kind === 's3' && !config.storage.bucket) {
    throw new ConfigError('VERBATIM_STORAGE=s3 needs VERBATIM_S3_BUCKET');
  }
  if (config.asr.kind === 'whisper' && !config.asr.url) {
    throw new ConfigError('VERBATIM_ASR=whisper needs VERBATIM_WHISPER_URL');
  }
  if (config.minutes.kind === 'openai' && !config.minutes.url) {
    throw new ConfigError('VERBATIM_MINUTES=openai needs VERBATIM_LLM_URL');
  }
  return config;
}

const BOT_ENDPOINTS = ['bot.create', 'bot.list', 'bot.retrieve', 'bot.delete', 'bot.leave_call'];

/** `bot.create=60,bot.list=60,...`: every endpoint must be given, each a whole number above 0. */
function parseLimits(text: string): Record<string, number> {
  const limits: Record<string, number> = {};
  for (const part of text.split(',')) {
    const [name, value] = part.split('=').map((x) => x.trim());
    const n = Number(value);
    if (!name || !BOT_ENDPOINTS.includes(name) || !Number.isInteger(n) || n < 1) {
      throw new ConfigError(
        `VERBATIM_RECALL_LIMITS must be endpoint=calls pairs for ${BOT_ENDPOINTS.join(', ')}, got "${part}"`,
      );
    }
    limits[name] = n;
  }
  const missing = BOT_ENDPOINTS.filter((e) => !(e in limits));
  if (missing.length > 0) throw new ConfigError(`VERBATIM_RECALL_LIMITS lacks ${missing.join(', ')}`);
  return limits;
}
