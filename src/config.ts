/**
 * The only module that reads `process.env`. Every installation setting is declared once, in
 * SETTINGS (variable, kind of value with its bounds, default, README line); `Config` is the type
 * of what they parse to, `loadConfig` parses and validates them, and `npm run docs:settings` writes
 * the README's settings tables from them (test/settings-readme.test.ts fails when those differ).
 * To add a setting, add one entry where its value belongs in `Config`.
 */
import os from 'node:os';
import { parseEgressAllow } from './net/egress.ts';
import type { JobKind } from './domain/status.ts';
import {
  ConfigError,
  commaList,
  directory,
  duration,
  group,
  internal,
  type Env,
  type Kind,
  listSettings,
  onOff,
  oneOf,
  optionalText,
  parseSettings,
  setting,
  text,
  type ValuesOf,
  wholeNumber,
} from './settings.ts';

export { ConfigError } from './settings.ts';

const seconds = (min: number, below?: number): Kind<number> =>
  duration('seconds', below === undefined ? { min } : { min, below });

// Kinds of value that only one setting takes.

/** S6: a port on 127.0.0.1, or empty for the one recorded in the data dir. */
const embeddedPort: Kind<number | null> = {
  values: 'port 1–65535, or empty',
  parse(value, env, read) {
    if (value === '') return null;
    const port = wholeNumber({ min: 1 }).parse(value, env, read);
    if (port > 65535) throw new ConfigError(`${env} must be a port (1-65535), got ${port}`);
    return port;
  },
};

/** S5: kept as text; src/net/egress.ts parses it again where it is used. */
const egressCidrs: Kind<string> = {
  values: 'comma-separated CIDRs',
  parse(value) {
    try {
      parseEgressAllow(value);
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
    return value;
  },
};

/** S9: empty turns /metrics off. */
const metricsToken: Kind<string | null> = {
  values: 'text of 16+ characters, or empty',
  parse(value, env) {
    if (value === '') return null;
    // A short token can be guessed by a scraper-shaped brute force.
    if (value.length < 16) throw new ConfigError(`${env} must be at least 16 characters`);
    return value;
  },
};

/** R8: the secrets that may sign provider webhooks. */
const webhookSecrets: Kind<string[]> = {
  values: 'comma-separated `whsec_` secrets',
  parse(value, env, read) {
    const secrets = commaList('secrets').parse(value, env, read);
    for (const secret of secrets) {
      // An empty key would let anyone sign a webhook.
      if (Buffer.from(secret.replace(/^whsec_/, ''), 'base64').length < 16) {
        throw new ConfigError(`each ${env} entry must be a whsec_ secret of at least 16 bytes`);
      }
    }
    return secrets;
  },
};

const BOT_ENDPOINTS = ['bot.create', 'bot.list', 'bot.retrieve', 'bot.delete', 'bot.leave_call'];

/** R2: `bot.create=60,bot.list=60,...`: every endpoint must be given, each a whole number above 0. */
const recallLimits: Kind<Record<string, number>> = {
  values: 'comma-separated `endpoint=calls`',
  parse(value, env) {
    const limits: Record<string, number> = {};
    for (const part of value.split(',')) {
      const [name, calls] = part.split('=').map((x) => x.trim());
      const n = Number(calls);
      if (!name || !BOT_ENDPOINTS.includes(name) || !Number.isInteger(n) || n < 1) {
        throw new ConfigError(
          `${env} must be endpoint=calls pairs for ${BOT_ENDPOINTS.join(', ')}, got "${part}"`,
        );
      }
      limits[name] = n;
    }
    const missing = BOT_ENDPOINTS.filter((e) => !(e in limits));
    if (missing.length > 0) throw new ConfigError(`${env} lacks ${missing.join(', ')}`);
    return limits;
  },
};

const TRANSCRIPTION_CONCURRENCY = 'VERBATIM_TRANSCRIPTION_CONCURRENCY';
const ASR = 'VERBATIM_ASR';

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
      `${TRANSCRIPTION_CONCURRENCY} must be a whole number >= 1 or auto, got "${setting}"`,
    );
  }
  return value;
}

const transcriptionWindows: Kind<number> = {
  values: 'whole number ≥ 1, or `auto`',
  parse: (value, _env, read) => transcriptionConcurrency(value, read(ASR)),
};

/** J20: what a worker tells the runner process it starts for one isolated job. */
export interface IsolatedRun {
  kind: JobKind;
  jobId: string;
  deliveryId: string;
  /** The attempt's owner: the worker's id and the runner's, so that the worker knows its runner's attempt. */
  owner: string;
}

const isolatedRun: Kind<IsolatedRun | null> = {
  values: 'JSON',
  parse(value, env) {
    if (value === '') return null;
    const run = JSON.parse(value) as Partial<IsolatedRun>;
    if (
      typeof run.kind !== 'string' ||
      typeof run.jobId !== 'string' ||
      typeof run.deliveryId !== 'string' ||
      typeof run.owner !== 'string'
    ) {
      throw new ConfigError(`${env} is not a run a worker wrote`);
    }
    return run as IsolatedRun;
  },
};

/**
 * Every installation setting, nested as `Config` is. Each README table lists its group's
 * settings in this order.
 */
export const SETTINGS = {
  ...group('Server and database', {
    databaseUrl: setting({
      env: 'DATABASE_URL',
      kind: optionalText('URL'),
      help: "Postgres URL of the app's login role (one that owns nothing: docs/security.md, Database roles); empty starts an embedded Postgres",
    }),
    migrationDatabaseUrl: setting({
      env: 'VERBATIM_MIGRATION_DATABASE_URL',
      kind: optionalText('URL'),
      help: 'Postgres URL of the role that owns the schema and runs the migrations at start; empty: DATABASE_URL (S10)',
    }),
    dataDir: setting({
      env: 'VERBATIM_DATA_DIR',
      kind: directory(),
      default: '.verbatim',
      help: 'embedded Postgres data and local blobs (private: dirs 0700, files 0600)',
    }),
    /** S6: null uses the port recorded in the data dir (a free one chosen at first start). */
    embeddedPgPort: setting({
      env: 'VERBATIM_EMBEDDED_PG_PORT',
      kind: embeddedPort,
      help: 'embedded Postgres port on 127.0.0.1; empty: a free one picked at first start, kept in the data dir (S6, docs/security.md)',
    }),
    host: setting({
      env: 'VERBATIM_HOST',
      kind: text('address'),
      default: '127.0.0.1',
      help: 'API listen address',
    }),
    port: setting({
      env: 'VERBATIM_PORT',
      kind: wholeNumber({ min: 0 }),
      default: '8080',
      help: 'API listen port',
    }),
    logLevel: setting({
      env: 'VERBATIM_LOG_LEVEL',
      kind: oneOf(['trace', 'debug', 'info', 'warn', 'error', 'silent']),
      default: 'info',
      help: 'the least severe log lines written',
    }),
    /** A paused process's open transaction is ended after this long (0: never). */
    idleTransactionMs: setting({
      env: 'VERBATIM_DB_IDLE_TRANSACTION_SECONDS',
      kind: seconds(0),
      default: '30',
      help: 'a database session idle inside a transaction this long (a paused process holding locks) is ended by Postgres; 0 = never',
    }),
    /** U7: seals the secrets kept in the database (src/secrets/secret-box.ts). */
    secretKey: setting({
      env: 'VERBATIM_SECRET_KEY',
      kind: optionalText('secret'),
      help: 'the 32-byte key (64 hex digits or base64) that seals webhook signing secrets in the database; empty: one made in the data dir (`secret-key`). Every process must have the same (U7)',
    }),
    /** S9: what /metrics requires as `Authorization: Bearer`; null: /metrics is off. */
    metricsToken: setting({
      env: 'VERBATIM_METRICS_TOKEN',
      kind: metricsToken,
      help: 'bearer token a Prometheus scraper must send to `/metrics`; empty: `/metrics` answers 404 (S9)',
    }),
    /** S5: CIDRs a tenant's URLs may reach although internal (src/net/egress.ts). */
    egressAllow: setting({
      env: 'VERBATIM_EGRESS_ALLOW',
      kind: egressCidrs,
      help: 'CIDRs that feeds, webhooks and recording links may reach although internal (S5, docs/security.md)',
    }),
  }),

  ...group('Stored audio and quotas', {
    storage: {
      kind: setting({
        env: 'VERBATIM_STORAGE',
        kind: oneOf(['local', 's3']),
        default: 'local',
        help: 'where audio is kept: local: files under the data dir; s3: an S3 bucket',
      }),
      bucket: setting({
        env: 'VERBATIM_S3_BUCKET',
        kind: text('name'),
        help: 'S3 bucket (VERBATIM_STORAGE=s3); give it an abort rule for incomplete multipart uploads (docs/storage.md)',
      }),
      endpoint: setting({
        env: 'VERBATIM_S3_ENDPOINT',
        kind: text('URL'),
        help: 'S3-compatible endpoint URL; empty for AWS',
      }),
      region: setting({
        env: 'VERBATIM_S3_REGION',
        kind: text('name'),
        default: 'us-east-1',
        help: 'S3 region',
      }),
      accessKeyId: setting({
        env: 'VERBATIM_S3_ACCESS_KEY_ID',
        kind: text('text'),
        help: 'S3 access key id',
      }),
      secretAccessKey: setting({
        env: 'VERBATIM_S3_SECRET_ACCESS_KEY',
        kind: text('secret'),
        help: 'S3 secret (never logged)',
      }),
      forcePathStyle: setting({
        env: 'VERBATIM_S3_FORCE_PATH_STYLE',
        kind: onOff('true', 'false'),
        default: 'true',
        help: 'path-style bucket URLs (MinIO, s3rver); false for virtual-hosted AWS style',
      }),
    },
    workspaceQuotaBytes: setting({
      env: 'VERBATIM_WORKSPACE_QUOTA_BYTES',
      kind: wholeNumber({ min: 0 }),
      default: '0',
      help: 'stored bytes a workspace may hold, pending deletions included; 0 = no limit (B6)',
    }),
    globalQuotaBytes: setting({
      env: 'VERBATIM_GLOBAL_QUOTA_BYTES',
      kind: wholeNumber({ min: 0 }),
      default: '0',
      help: 'stored bytes the whole installation may hold; 0 = no limit (B6)',
    }),
    stageDeadlineMs: setting({
      env: 'VERBATIM_STAGE_DEADLINE_SECONDS',
      kind: seconds(0.1),
      default: '900',
      help: 'how long a staged write may take before its object counts as an orphan (B2)',
    }),
    cleanupBackoffMs: setting({
      env: 'VERBATIM_CLEANUP_BACKOFF_SECONDS',
      kind: seconds(0.01),
      default: '5',
      help: 'first retry delay of a failed object deletion; doubles per attempt (B5)',
    }),
    cleanupBackoffCapMs: setting({
      env: 'VERBATIM_CLEANUP_BACKOFF_CAP_SECONDS',
      kind: seconds(0.01),
      default: '3600',
      help: 'longest delay between object deletion retries (B5)',
    }),
  }),

  ...group('Requests and uploads', {
    maxUploadBytes: setting({
      env: 'VERBATIM_MAX_UPLOAD_BYTES',
      kind: wholeNumber({ min: 1 }),
      default: '524288000',
      help: 'largest recording accepted',
    }),
    maxChunkBytes: setting({
      env: 'VERBATIM_MAX_CHUNK_BYTES',
      kind: wholeNumber({ min: 1024 }),
      default: '2097152',
      help: 'largest live chunk accepted',
    }),
    /** S7: body limits, timeouts and per-key rates of the HTTP API (src/api/request-limits.ts). */
    requestLimits: {
      maxJsonBytes: setting({
        env: 'VERBATIM_MAX_JSON_BYTES',
        kind: wholeNumber({ min: 1024 }),
        default: '1048576',
        help: 'largest request body on every route but recordings and chunks (S7); larger gets 413 naming the limit',
      }),
      maxProviderWebhookBytes: setting({
        env: 'VERBATIM_MAX_PROVIDER_WEBHOOK_BYTES',
        kind: wholeNumber({ min: 1024 }),
        default: '65536',
        help: 'largest bot provider webhook body (S7); that route has no API key, so a larger one is cut off unread',
      }),
      headersTimeoutMs: setting({
        env: 'VERBATIM_HEADERS_TIMEOUT_SECONDS',
        kind: seconds(0.05),
        default: '30',
        help: "a request's line and headers must arrive within this, or it gets 408 and is closed (S7)",
      }),
      streamMaxMs: setting({
        env: 'VERBATIM_STREAM_MAX_SECONDS',
        kind: seconds(1),
        default: '1800',
        help: "an event stream ends after this long; the client opens it again with its Last-Event-ID and misses nothing (the web app does), so no stream holds a connection, its polling and its key's checks for ever (F3)",
      }),
      idleTimeoutMs: setting({
        env: 'VERBATIM_IDLE_TIMEOUT_SECONDS',
        kind: seconds(0.05),
        default: '60',
        help: 'longest silence while a request arrives or its answer is read; then the connection is closed (S7)',
      }),
      requestTimeoutMs: setting({
        env: 'VERBATIM_REQUEST_TIMEOUT_SECONDS',
        kind: seconds(0.05),
        default: '60',
        help: 'a request body must arrive whole within this after its headers (408), recordings and chunks aside (S7)',
      }),
      uploadTimeoutMs: setting({
        env: 'VERBATIM_UPLOAD_TIMEOUT_SECONDS',
        kind: seconds(0.05),
        default: '3600',
        help: 'a recording or chunk must arrive whole within this (S7); 500 MB in an hour needs 1.2 Mbit/s',
      }),
      /** 0: no limit. */
      rateLimitRequests: setting({
        env: 'VERBATIM_RATE_LIMIT_REQUESTS',
        kind: wholeNumber({ min: 0 }),
        default: '1200',
        help: 'API calls per key per rate window, live chunks aside; more get 429 with `Retry-After`; 0 = no limit (S7)',
      }),
      /** 0: no limit. */
      rateLimitChunks: setting({
        env: 'VERBATIM_RATE_LIMIT_CHUNKS',
        kind: wholeNumber({ min: 0 }),
        default: '1200',
        help: 'live chunk PUTs per key per rate window, counted apart (a live meeting sends 12 a minute); 0 = no limit (S7)',
      }),
      workspaceRateLimitRequests: setting({
        env: 'VERBATIM_WORKSPACE_RATE_LIMIT_REQUESTS',
        kind: wholeNumber({ min: 0 }),
        default: '6000',
        help: 'API calls per workspace per rate window, all its keys, people and api processes together (kept in Postgres; live chunks not counted); 0 = no limit (F2)',
      }),
      streamsPerKey: setting({
        env: 'VERBATIM_STREAMS_PER_KEY',
        kind: wholeNumber({ min: 1 }),
        default: '20',
        help: 'event streams one API key or session may hold open on an api process (F2)',
      }),
      streamsPerWorkspace: setting({
        env: 'VERBATIM_STREAMS_PER_WORKSPACE',
        kind: wholeNumber({ min: 1 }),
        default: '500',
        help: 'event streams one workspace may hold open on an api process (F2)',
      }),
      streamsPerProcess: setting({
        env: 'VERBATIM_STREAMS_PER_PROCESS',
        kind: wholeNumber({ min: 1 }),
        default: '5000',
        help: 'event streams an api process holds open at most, all workspaces together (F2)',
      }),
      uploadsPerWorkspace: setting({
        env: 'VERBATIM_UPLOADS_PER_WORKSPACE',
        kind: wholeNumber({ min: 1 }),
        default: '8',
        help: "recordings one workspace may be uploading at once, across api processes; more get 429 `upload.too_many` with `Retry-After` before any byte is kept (a bot's recording is never refused) (F2)",
      }),
      splitsPerWorkspace: setting({
        env: 'VERBATIM_SPLITS_PER_WORKSPACE',
        kind: wholeNumber({ min: 1 }),
        default: '2',
        help: "recordings of one workspace decoded and split at once, across every worker; the next waits its turn (it is never refused), and another workspace's split takes the free slot (F2)",
      }),
      webhookEndpointsPerWorkspace: setting({
        env: 'VERBATIM_WEBHOOK_ENDPOINTS_PER_WORKSPACE',
        kind: wholeNumber({ min: 1 }),
        default: '25',
        help: 'enabled webhook endpoints a workspace may have (F2)',
      }),
      rateWindowMs: setting({
        env: 'VERBATIM_RATE_LIMIT_WINDOW_SECONDS',
        kind: seconds(0.05),
        default: '60',
        help: 'the period the rate limits count over, per API process (S7)',
      }),
    },
  }),

  ...group('People and sign-in', {
    /** U3: src/workspaces/sessions.ts. */
    sessions: {
      idleMs: setting({
        env: 'VERBATIM_SESSION_IDLE_HOURS',
        kind: duration('hours', { min: 0.01 }),
        default: '168',
        help: 'a browser session unused this long is signed out (U3)',
      }),
      maxMs: setting({
        env: 'VERBATIM_SESSION_MAX_DAYS',
        kind: duration('days', { min: 0.001 }),
        default: '30',
        help: 'a browser session ends this long after its sign-in, used or not (U3)',
      }),
      setupLinkMs: setting({
        env: 'VERBATIM_SETUP_LINK_HOURS',
        kind: duration('hours', { min: 0.01 }),
        default: '24',
        help: 'how long the first owner’s setup link and an invite link stay valid (U2)',
      }),
      maxFailures: setting({
        env: 'VERBATIM_SIGN_IN_MAX_FAILURES',
        kind: wholeNumber({ min: 1 }),
        default: '5',
        help: 'wrong passwords for one email before it is locked out; each further one doubles the lock (U2)',
      }),
      lockoutMs: setting({
        env: 'VERBATIM_SIGN_IN_LOCKOUT_SECONDS',
        kind: seconds(0.05),
        default: '900',
        help: 'the first lockout after the failures above; answered 429 with `Retry-After` (U2)',
      }),
    },
    /** U6: src/workspaces/pg-workspace-store.ts createApiKey. */
    maxActiveKeys: setting({
      env: 'VERBATIM_MAX_API_KEYS',
      kind: wholeNumber({ min: 1 }),
      default: '100',
      help: 'most active (unrevoked, unexpired) API keys a workspace may hold; one more is refused with 409 `api_key.limit` (U6)',
    }),
    /** U9: invites by email (src/workspaces/invite-mail.ts); without an SMTP server, links to copy. */
    mail: {
      smtpUrl: setting({
        env: 'VERBATIM_SMTP_URL',
        kind: optionalText('URL'),
        help: 'SMTP server for invite emails: smtp://user:password@host:587 (STARTTLS when offered) or smtps://…:465; empty: invites are links to copy (U9)',
      }),
      from: setting({
        env: 'VERBATIM_SMTP_FROM',
        kind: text('address'),
        default: 'Verbatim <verbatim@localhost>',
        help: 'the From address of invite emails (U9)',
      }),
      publicUrl: setting({
        env: 'VERBATIM_PUBLIC_URL',
        kind: optionalText('URL'),
        help: 'the web app’s address in emailed links (https://notes.example.com); empty: the address the inviting request came to (U9)',
      }),
      timeoutMs: setting({
        env: 'VERBATIM_SMTP_TIMEOUT_SECONDS',
        kind: seconds(0.1),
        default: '10',
        help: 'how long an invite email may take to connect and send before the invite is answered without it (U9)',
      }),
    },
    /** U2: single sign-on with an OpenID Connect provider (src/workspaces/sso.ts). */
    sso: {
      issuer: setting({
        env: 'VERBATIM_OIDC_ISSUER',
        kind: optionalText('URL'),
        help: 'the OpenID Connect provider’s issuer URL (Keycloak realm, Authentik, Google, Entra ID); empty: no single sign-on (U2)',
      }),
      clientId: setting({
        env: 'VERBATIM_OIDC_CLIENT_ID',
        kind: text('text'),
        help: 'the client id Verbatim has at the provider (U2)',
      }),
      clientSecret: setting({
        env: 'VERBATIM_OIDC_CLIENT_SECRET',
        kind: text('secret'),
        help: 'that client’s secret; sent with `client_secret_basic` (U2)',
      }),
      redirectUrl: setting({
        env: 'VERBATIM_OIDC_REDIRECT_URL',
        kind: optionalText('URL'),
        help: 'the callback URL registered at the provider, ending in `/v1/auth/oidc/callback`; empty: this server’s own address as the browser reached it (U2)',
      }),
      allowedDomains: setting({
        env: 'VERBATIM_OIDC_ALLOWED_DOMAINS',
        kind: commaList('email domains', { lowercase: true }),
        help: 'a first sign-in with a verified email in one of these domains makes the account; others need an account first (U2)',
      }),
      workspaceId: setting({
        env: 'VERBATIM_OIDC_WORKSPACE',
        kind: optionalText('workspace id'),
        help: 'the workspace an account made at its first sign-in joins; empty: the oldest workspace (U2)',
      }),
      newMemberRole: setting({
        env: 'VERBATIM_OIDC_ROLE',
        kind: oneOf(['member', 'viewer'] as const),
        default: 'member',
        help: 'the role of an account made at its first sign-in (U2)',
      }),
      label: setting({
        env: 'VERBATIM_OIDC_LABEL',
        kind: text('text'),
        default: 'single sign-on',
        help: 'what the sign-in page’s button calls the provider (U2)',
      }),
    },
  }),

  ...group('Audio, windows and live meetings', {
    ffmpegPath: setting({
      env: 'VERBATIM_FFMPEG_PATH',
      kind: text('path'),
      default: 'ffmpeg',
      help: "the ffmpeg binary: Debian's package, on `PATH` (installed by `scripts/setup.sh`)",
    }),
    maxAudioSeconds: setting({
      env: 'VERBATIM_MAX_AUDIO_SECONDS',
      kind: wholeNumber({ min: 1 }),
      default: '21600',
      help: 'most audio one recording may decode to; longer fails `audio.too_long` (S4)',
    }),
    windowMs: setting({
      env: 'VERBATIM_WINDOW_SECONDS',
      kind: seconds(1),
      default: '60',
      help: 'transcription window length (L2)',
    }),
    boundarySearchMs: setting({
      env: 'VERBATIM_BOUNDARY_SEARCH_SECONDS',
      kind: seconds(0),
      default: '3',
      help: 'how far before a slot end a window boundary may move to a quiet stretch (L18)',
    }),
    chunkMs: setting({
      env: 'VERBATIM_CHUNK_SECONDS',
      kind: seconds(0.1),
      default: '5',
      help: 'nominal live chunk length (L1)',
    }),
    gapPatienceMs: setting({
      env: 'VERBATIM_GAP_PATIENCE_SECONDS',
      kind: seconds(0),
      default: '30',
      help: 'how long (wall clock) a missing chunk is waited for while later ones arrive, before the timeline goes on past it (L19)',
    }),
    /** L22: provisional transcriptions of live chunks, and how far behind they may fall. */
    drafts: setting({
      env: 'VERBATIM_DRAFTS',
      kind: onOff('on', 'off'),
      default: 'on',
      help: 'on: each live chunk gets a quick provisional transcription, shown until its window is final (L22); off: finals only',
    }),
    draftRecogniser: setting({
      env: 'VERBATIM_DRAFT_RECOGNISER',
      kind: oneOf(['fast', 'same']),
      default: 'fast',
      help: "fast: drafts use pocketsphinx with a narrower search, quicker and a little less accurate (a Whisper server is asked as for the finals); same: the finals' settings (L22)",
    }),
    draftLagMs: setting({
      env: 'VERBATIM_DRAFT_LAG_SECONDS',
      kind: seconds(0),
      default: '10',
      help: 'drafts further behind real time than this are skipped and counted, so the finals keep their pace (L22)',
    }),
    maxSeqAhead: setting({
      env: 'VERBATIM_MAX_SEQ_AHEAD',
      kind: wholeNumber({ min: 1 }),
      default: '720',
      help: 'how far a chunk seq may run ahead of the highest stored one (L21; one hour of 5 s chunks)',
    }),
    lateAudioMs: setting({
      env: 'VERBATIM_LATE_AUDIO_DAYS',
      kind: duration('days', { min: 0 }),
      default: '7',
      help: 'days after a meeting ended during which a late chunk is still taken and spliced in (L19)',
    }),
  }),

  ...group('Speech recognition and minutes', {
    asr: {
      kind: setting({
        env: ASR,
        kind: oneOf(['pocketsphinx', 'whisper']),
        default: 'pocketsphinx',
        help: 'the recogniser: pocketsphinx (offline) or whisper (an OpenAI-compatible server)',
      }),
      url: setting({
        env: 'VERBATIM_WHISPER_URL',
        kind: text('URL'),
        help: 'OpenAI-compatible base URL for whisper',
      }),
      apiKey: setting({
        env: 'VERBATIM_WHISPER_API_KEY',
        kind: text('secret'),
        help: 'API key for the whisper server',
      }),
      model: setting({
        env: 'VERBATIM_WHISPER_MODEL',
        kind: text('name'),
        default: 'whisper-1',
        help: 'model name for whisper',
      }),
      format: setting({
        env: 'VERBATIM_WHISPER_FORMAT',
        kind: oneOf(['verbose_json', 'diarized_json']),
        default: 'verbose_json',
        help: 'W3: verbose_json (a segment `speaker` is read where the server gives one) or diarized_json (a diarizing model, given reference clips of the speakers already heard)',
      }),
      timeoutMs: setting({
        env: 'VERBATIM_ASR_TIMEOUT_SECONDS',
        kind: seconds(0.1),
        default: '120',
        help: 'one window recognition timeout',
      }),
    },
    minutes: {
      kind: setting({
        env: 'VERBATIM_MINUTES',
        kind: oneOf(['extractive', 'openai']),
        default: 'extractive',
        help: 'the minutes writer: extractive (offline) or openai (an OpenAI-compatible chat model)',
      }),
      url: setting({
        env: 'VERBATIM_LLM_URL',
        kind: text('URL'),
        help: 'OpenAI-compatible base URL for minutes',
      }),
      apiKey: setting({
        env: 'VERBATIM_LLM_API_KEY',
        kind: text('secret'),
        help: 'API key for the minutes model',
      }),
      model: setting({
        env: 'VERBATIM_LLM_MODEL',
        kind: text('name'),
        default: 'gpt-4o-mini',
        help: 'model name for minutes',
      }),
      timeoutMs: setting({
        env: 'VERBATIM_LLM_TIMEOUT_SECONDS',
        kind: seconds(0.1),
        default: '120',
        help: 'minutes request timeout',
      }),
    },
    /** F4: ask's own model and limits, apart from the minutes'. */
    ask: {
      url: setting({
        env: 'VERBATIM_ASK_LLM_URL',
        kind: optionalText('URL'),
        help: "OpenAI-compatible base URL for ask's written answers; empty: the minutes model's, when VERBATIM_MINUTES=openai (else ask answers with passages)",
      }),
      apiKey: setting({
        env: 'VERBATIM_ASK_LLM_API_KEY',
        kind: optionalText('secret'),
        help: "API key for ask's model; empty: the minutes key, when ask uses the minutes model",
      }),
      model: setting({
        env: 'VERBATIM_ASK_LLM_MODEL',
        kind: optionalText('name'),
        help: "model name for ask; empty: the minutes model's name",
      }),
      perMinute: setting({
        env: 'VERBATIM_ASK_PER_MINUTE',
        kind: wholeNumber({ min: 0 }),
        default: '20',
        help: 'asks per workspace per minute, across keys and api processes; more get 429 `ask.rate_limited` with `Retry-After`; 0 = no limit (F4)',
      }),
      concurrency: setting({
        env: 'VERBATIM_ASK_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '4',
        help: 'model calls for ask at once per api process; more get 429 `ask.busy` with `Retry-After` (F4)',
      }),
    },
  }),

  ...group('Jobs and workers', {
    leaseMs: setting({
      env: 'VERBATIM_LEASE_SECONDS',
      kind: seconds(0.2),
      default: '15',
      help: 'job lease length (J2)',
    }),
    heartbeatMs: setting({
      env: 'VERBATIM_HEARTBEAT_SECONDS',
      kind: seconds(0.05),
      default: '5',
      help: 'lease renewal interval (J2); shorter than the lease',
    }),
    leaseGraceMs: setting({
      env: 'VERBATIM_LEASE_GRACE_SECONDS',
      kind: seconds(0),
      default: '0',
      help: 'grace past lease expiry',
    }),
    sweepMs: setting({
      env: 'VERBATIM_SWEEP_SECONDS',
      kind: seconds(0.05),
      default: '5',
      help: 'fast sweep interval in each worker (J8)',
    }),
    /** J18: the period of the death watch (life locks). */
    deathCheckMs: setting({
      env: 'VERBATIM_DEATH_CHECK_SECONDS',
      kind: seconds(0.05),
      default: '0.5',
      help: "how often each worker checks the other workers' life locks; a lock seen free on two checks is a death (J18)",
    }),
    rescueAfterMs: setting({
      env: 'VERBATIM_RESCUE_AFTER_SECONDS',
      kind: seconds(0),
      default: '30',
      help: 'a due pending job with no live delivery this long is re-driven (J9)',
    }),
    jobTimeoutMs: setting({
      env: 'VERBATIM_JOB_TIMEOUT_SECONDS',
      kind: seconds(1),
      default: '1800',
      help: 'an attempt running longer is abandoned and retried (`job.timeout`)',
    }),
    drainMs: setting({
      env: 'VERBATIM_DRAIN_SECONDS',
      kind: seconds(0),
      default: '25',
      help: 'on SIGTERM, how long running jobs may finish before they are handed back (J11)',
    }),
    concurrency: {
      transcription: setting({
        env: TRANSCRIPTION_CONCURRENCY,
        kind: transcriptionWindows,
        default: 'auto',
        help: 'windows transcribed at once per worker (L2); `auto`: one per CPU for pocketsphinx, 1 for a Whisper server',
      }),
      closeout: setting({
        env: 'VERBATIM_CLOSEOUT_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '1',
        help: 'close-outs at once (L13)',
      }),
      minutes: setting({
        env: 'VERBATIM_MINUTES_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '2',
        help: 'minutes at once (L13)',
      }),
      intake: setting({
        env: 'VERBATIM_INTAKE_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '1',
        help: 'recordings split at once',
      }),
      bots: setting({
        env: 'VERBATIM_BOT_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '2',
        help: 'bot provider jobs (schedule, delete, leave, import) at once, on a queue of their own so uploads never wait behind the provider (R10)',
      }),
    },
  }),

  ...group('Retries, waits and the isolated lane', {
    maxReclaims: setting({
      env: 'VERBATIM_MAX_RECLAIMS',
      kind: wholeNumber({ min: 0 }),
      default: '3',
      help: 'reclaims (its worker lost while running it) before a job is isolated: run alone, in a process of its own (J7, J20)',
    }),
    /** J20: the isolated lane. */
    isolation: {
      backoffMs: setting({
        env: 'VERBATIM_ISOLATION_BACKOFF_SECONDS',
        kind: seconds(0.05),
        default: '60',
        help: 'an isolated job whose run did not succeed runs again after this, doubled after each such run (J20)',
      }),
      backoffCapMs: setting({
        env: 'VERBATIM_ISOLATION_BACKOFF_CAP_SECONDS',
        kind: seconds(0.05),
        default: '3600',
        help: 'the longest wait between two runs of an isolated job (J20)',
      }),
      poisonRunnerDeaths: setting({
        env: 'VERBATIM_POISON_RUNNER_DEATHS',
        kind: wholeNumber({ min: 1 }),
        default: '3',
        help: 'an isolated job whose runner process dies this many runs in a row is declared poison (J20)',
      }),
    },
    heldAudioMs: setting({
      env: 'VERBATIM_HELD_AUDIO_DAYS',
      kind: duration('days', { min: 0 }),
      default: '7',
      help: 'days after a meeting ended that the audio of a stretch with no transcript is kept for it (J20, L16)',
    }),
    transcribeMaxErrors: setting({
      env: 'VERBATIM_TRANSCRIBE_MAX_ERRORS',
      kind: wholeNumber({ min: 1 }),
      default: '5',
      help: 'failed tries of one window before it is given up (L14)',
    }),
    retryStepMs: setting({
      env: 'VERBATIM_RETRY_STEP_SECONDS',
      kind: seconds(0),
      default: '15',
      help: 'backoff step: retries wait 1x, 2x, 3x… this (L7, L14)',
    }),
    closeoutGraceMs: setting({
      env: 'VERBATIM_CLOSEOUT_GRACE_SECONDS',
      kind: seconds(0),
      default: '10',
      help: 'wait before close-out (L3)',
    }),
    closeoutPollMs: setting({
      env: 'VERBATIM_CLOSEOUT_POLL_SECONDS',
      kind: seconds(0.05),
      default: '15',
      help: 'close-out requeue delay while windows retry (L4)',
    }),
    closeoutWaitCapMs: setting({
      env: 'VERBATIM_CLOSEOUT_WAIT_CAP_SECONDS',
      kind: seconds(0),
      default: '600',
      help: 'longest close-out waits for retrying windows (L4)',
    }),
    closeoutMaxErrors: setting({
      env: 'VERBATIM_CLOSEOUT_MAX_ERRORS',
      kind: wholeNumber({ min: 1 }),
      default: '2',
      help: 'close-out error budget (L7)',
    }),
    closeoutMaxReclaims: setting({
      env: 'VERBATIM_CLOSEOUT_MAX_RECLAIMS',
      kind: wholeNumber({ min: 0 }),
      default: '3',
      help: 'close-out reclaim budget (L7)',
    }),
    minutesRetryMs: setting({
      env: 'VERBATIM_MINUTES_RETRY_SECONDS',
      kind: seconds(0.05),
      default: '60',
      help: 'requeue delay during a minutes-model outage (L8)',
    }),
    minutesWaitCapMs: setting({
      env: 'VERBATIM_MINUTES_WAIT_CAP_SECONDS',
      kind: seconds(0),
      default: '3600',
      help: 'longest wait for the minutes model (L8)',
    }),
  }),

  ...group('Webhooks', {
    webhookRetryMs: setting({
      env: 'VERBATIM_WEBHOOK_RETRY_SECONDS',
      kind: seconds(0.01),
      default: '5',
      help: 'first retry delay of a failed webhook delivery; doubles per attempt, up to `VERBATIM_WEBHOOK_RETRY_CAP_SECONDS` (O3)',
    }),
    webhookRetryCapMs: setting({
      env: 'VERBATIM_WEBHOOK_RETRY_CAP_SECONDS',
      kind: seconds(0.01),
      default: '3600',
      help: 'longest delay between two attempts of a webhook delivery (O3)',
    }),
    webhookMaxAttempts: setting({
      env: 'VERBATIM_WEBHOOK_MAX_ATTEMPTS',
      kind: wholeNumber({ min: 1 }),
      default: '12',
      help: 'webhook delivery attempts before it is marked failed for an operator (O3)',
    }),
    webhookTimeoutMs: setting({
      env: 'VERBATIM_WEBHOOK_TIMEOUT_SECONDS',
      kind: seconds(0.1),
      default: '10',
      help: 'how long a webhook receiver may take to answer (O3)',
    }),
    webhookConcurrency: setting({
      env: 'VERBATIM_WEBHOOK_CONCURRENCY',
      kind: wholeNumber({ min: 1 }),
      default: '16',
      help: 'webhook deliveries a worker process sends at once, in a loop of their own beside the sweeps (F6)',
    }),
    webhookWorkspaceConcurrency: setting({
      env: 'VERBATIM_WEBHOOK_WORKSPACE_CONCURRENCY',
      kind: wholeNumber({ min: 1 }),
      default: '4',
      help: 'webhook deliveries of one workspace in flight at once across all workers; its others wait their turn (F6)',
    }),
    webhookDisableAfterMs: setting({
      env: 'VERBATIM_WEBHOOK_DISABLE_AFTER_DAYS',
      kind: duration('days', { min: 0.00001 }),
      default: '3',
      help: 'an endpoint whose deliveries have failed for this long with no success is disabled, with an audit entry, a metric and a line in `verbatim status` (F6)',
    }),
  }),

  ...group('Meeting bots and calendar feeds', {
    recall: {
      url: setting({
        env: 'VERBATIM_RECALL_URL',
        kind: text('URL'),
        default: 'https://us-east-1.recall.ai',
        help: 'Recall.ai (or compatible) API base URL for meeting bots (R1)',
      }),
      apiKey: setting({
        env: 'VERBATIM_RECALL_API_KEY',
        kind: text('secret'),
        help: 'Recall.ai API key; empty: no bots',
      }),
      webhookSecrets: setting({
        env: 'VERBATIM_RECALL_WEBHOOK_SECRETS',
        kind: webhookSecrets,
        help: 'the secrets (16+ bytes each) that may sign provider webhooks (R8)',
      }),
      limits: setting({
        env: 'VERBATIM_RECALL_LIMITS',
        kind: recallLimits,
        default: 'bot.create=60,bot.list=60,bot.retrieve=300,bot.delete=300,bot.leave_call=300',
        help: "calls per rate window per provider endpoint, shared by every process (R2); Recall's documented limits",
      }),
      rateWindowMs: setting({
        env: 'VERBATIM_RECALL_RATE_WINDOW_SECONDS',
        kind: seconds(0.1),
        default: '60',
        help: 'the period `VERBATIM_RECALL_LIMITS` count over (the provider counts per minute)',
      }),
    },
    bots: {
      trustWindowMs: setting({
        env: 'VERBATIM_BOT_TRUST_WINDOW_SECONDS',
        // The provider keeps an idempotency key for an hour; a re-send after that could make a twin.
        kind: seconds(1, 3600),
        default: '3300',
        help: "how long after a create attempt its idempotency key is re-sent without a list call (R4); below the provider's one-hour key retention",
      }),
      lookbackMs: setting({
        env: 'VERBATIM_BOT_LOOKBACK_HOURS',
        kind: duration('hours', { min: 0.001 }),
        default: '168',
        help: 'how long an unresolved bot attempt is recovered before it is given up (R5)',
      }),
      backstopMs: setting({
        env: 'VERBATIM_BOT_BACKSTOP_SECONDS',
        kind: seconds(1),
        default: '900',
        help: "period of each workspace's bot recovery backstop, run at the workspace's own offset in it (R6)",
      }),
      backfillAfterMs: setting({
        env: 'VERBATIM_BOT_BACKFILL_AFTER_SECONDS',
        kind: seconds(0),
        default: '120',
        help: "how long after a bot's meeting ended a `done` webhook that never came is asked of the provider (R7)",
      }),
      importPatienceMs: setting({
        env: 'VERBATIM_BOT_IMPORT_PATIENCE_SECONDS',
        kind: seconds(0),
        default: '3600',
        help: "how long a bot recording's import waits out the provider's outage (5xx, 429, timeouts, no connection) before its retries count (R7)",
      }),
      feedPlainHttpHosts: setting({
        env: 'VERBATIM_FEED_PLAIN_HTTP_HOSTS',
        kind: commaList('hosts', { lowercase: true }),
        help: 'hosts whose ICS feeds may be read over plain http (a calendar server inside your network); others must be https or webcal',
      }),
      feedConcurrency: setting({
        env: 'VERBATIM_FEED_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '8',
        help: 'calendar feeds a worker process reads at once, in a loop of its own beside the sweeps (F6)',
      }),
      feedWorkspaceConcurrency: setting({
        env: 'VERBATIM_FEED_WORKSPACE_CONCURRENCY',
        kind: wholeNumber({ min: 1 }),
        default: '2',
        help: "calendar feeds of one workspace read at once across all workers; its others wait their turn, and other workspaces' feeds do not (F6)",
      }),
      /** S8: a feed's parsing budget. */
      feedBudget: {
        maxOccurrences: setting({
          env: 'VERBATIM_FEED_MAX_OCCURRENCES',
          kind: wholeNumber({ min: 1 }),
          default: '5000',
          help: 'most occurrences one ICS feed may have in the next two weeks; over it the feed is refused as `invalid_calendar` (S8)',
        }),
        maxEventOccurrences: setting({
          env: 'VERBATIM_FEED_MAX_EVENT_OCCURRENCES',
          kind: wholeNumber({ min: 1 }),
          default: '500',
          help: 'most occurrences of one recurring event in the next two weeks (its rule may take 50× as many steps); over it, `invalid_calendar` (S8)',
        }),
        parseMs: setting({
          env: 'VERBATIM_FEED_PARSE_SECONDS',
          kind: seconds(0.1),
          default: '5',
          help: 'longest one feed may take to parse and expand, in a thread stopped at this limit; over it, `invalid_calendar` (S8)',
        }),
      },
    },
  }),

  ...group('The command line against a running API', {
    client: {
      url: setting({
        env: 'VERBATIM_URL',
        kind: text('URL'),
        help: 'for `verbatim transcribe` and `verbatim search`: a running API to use',
      }),
      apiKey: setting({ env: 'VERBATIM_API_KEY', kind: text('secret'), help: 'its API key' }),
    },
  }),

  ...internal({
    faults: setting({
      env: 'VERBATIM_FAULTS',
      kind: text('JSON'),
      help: 'test-only fault injection, a JSON list',
    }),
    faultStateDir: setting({
      env: 'VERBATIM_FAULT_STATE_DIR',
      kind: text('path'),
      help: 'test-only fault counters',
    }),
    /** J20: in an isolated runner process, the job it runs. */
    isolatedRun: setting({
      env: 'VERBATIM_ISOLATED_RUN',
      kind: isolatedRun,
      help: 'the one job a `verbatim isolated-run` process runs, set by the worker that starts it (J20)',
    }),
  }),
};

export interface Config extends ValuesOf<typeof SETTINGS> {
  /**
   * The settings as they were given (each variable of SETTINGS that was set), so that a process
   * this one starts for a job (J20's isolated runner) runs with the same installation settings.
   */
  givenSettings: Readonly<Record<string, string>>;
}

export type RequestLimits = Config['requestLimits'];

/** Every setting, in declaration order. */
export const ALL_SETTINGS = listSettings(SETTINGS);

/**
 * The environment of a process this one starts to run part of its work (J20's isolated runner):
 * this one's, with exactly the settings this process was given (none read from elsewhere), and
 * `extra` over them.
 */
export function childProcessEnv(config: Config, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const s of ALL_SETTINGS) delete env[s.env];
  return { ...env, ...config.givenSettings, ...extra };
}

/** The environment of a decoder child process: PATH alone, so no setting or secret reaches it (S4). */
export function pathOnlyEnv(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin' };
}

function givenSettingsOf(env: Env): Record<string, string> {
  const given: Record<string, string> = {};
  for (const s of ALL_SETTINGS) {
    const value = env[s.env];
    if (value !== undefined) given[s.env] = value;
  }
  return given;
}

export function loadConfig(env: Env = process.env): Config {
  const config: Config = { ...parseSettings(SETTINGS, env), givenSettings: givenSettingsOf(env) };
  // Rules between settings; a rule about one setting is in its kind.
  for (const [value, name, schemes] of [
    [config.mail.smtpUrl, SETTINGS.mail.smtpUrl.env, ['smtp:', 'smtps:']],
    [config.mail.publicUrl, SETTINGS.mail.publicUrl.env, ['http:', 'https:']],
  ] as const) {
    let protocol: string | null = null;
    try {
      protocol = value === null ? null : new URL(value).protocol;
    } catch {
      protocol = '';
    }
    if (protocol !== null && !(schemes as readonly string[]).includes(protocol))
      throw new ConfigError(`${name} must be a ${schemes.map((s) => s.slice(0, -1)).join(' or ')} URL`);
  }
  if (config.heartbeatMs >= config.leaseMs) {
    throw new ConfigError(`${SETTINGS.heartbeatMs.env} must be shorter than ${SETTINGS.leaseMs.env}`);
  }
  const limits = config.requestLimits;
  const timeouts = SETTINGS.requestLimits;
  if (limits.headersTimeoutMs > limits.requestTimeoutMs || limits.requestTimeoutMs > limits.uploadTimeoutMs) {
    // Node refuses a header timeout longer than its request timeout (here the upload one).
    throw new ConfigError(
      `${timeouts.headersTimeoutMs.env} <= ${timeouts.requestTimeoutMs.env} <= ${timeouts.uploadTimeoutMs.env} must hold`,
    );
  }
  if (config.storage.kind === 's3' && !config.storage.bucket) {
    throw new ConfigError(`${SETTINGS.storage.kind.env}=s3 needs ${SETTINGS.storage.bucket.env}`);
  }
  if (config.asr.kind === 'whisper' && !config.asr.url) {
    throw new ConfigError(`${SETTINGS.asr.kind.env}=whisper needs ${SETTINGS.asr.url.env}`);
  }
  if (config.minutes.kind === 'openai' && !config.minutes.url) {
    throw new ConfigError(`${SETTINGS.minutes.kind.env}=openai needs ${SETTINGS.minutes.url.env}`);
  }
  return config;
}

/** P2: the environment as given, for `verbatim doctor`, which judges each setting itself. */
export function givenEnvironment(): Env {
  return process.env;
}
