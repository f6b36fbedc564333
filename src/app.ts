/**
 * The composition root: the one place that picks real implementations from the config and wires
 * them together. Nothing imports this module except the entry points.
 */
import { ExtractiveMinutesWriter } from './adapters/extractive-minutes-writer.ts';
import { FfmpegAudioDecoder } from './adapters/ffmpeg-audio-decoder.ts';
import { createBlobStore } from './adapters/blob-store-factory.ts';
import { buildBotDeps, recallBudget } from './bots/provider.ts';
import { importBotRecordingJob } from './bots/provider-webhooks.ts';
import { deleteBotJob, leaveBotJob } from './bots/recordings.ts';
import { scheduleBotJob } from './bots/resume.ts';
import { fanOutWebhook } from './events/webhooks.ts';
import { OpenAiMinutesWriter } from './adapters/openai-minutes-writer.ts';
import { PocketsphinxTranscriber } from './adapters/pocketsphinx-transcriber.ts';
import { importBotSpeakersJob } from './bots/bot-speakers.ts';
import { WhisperTranscriber } from './adapters/whisper-transcriber.ts';
import { SharedProviderHolds } from './adapters/provider-hold-store.ts';
import type { RetryAfterHolds } from './adapters/provider-http.ts';
import { buildApi } from './api/server.ts';
import { Checkpoints } from './checkpoints.ts';
import type { Config } from './config.ts';
import { openDatabase, type DatabaseHandle } from './db/connect.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.ts';
import { migrateDatabase } from './db/migrate.ts';
import { describeLogin, loginIsPrivileged } from './db/roles.ts';
import { assertTenantRole } from './db/tenant.ts';
import { checkSecretKey } from './secrets/key-check.ts';
import { secretBoxOf } from './secrets/secret-box.ts';
import { assertNever } from './domain/errors.ts';
import { Consumer, JobKind } from './domain/status.ts';
import type { JobDefinition } from './jobs/job-definition.ts';
import { PgJobSweeps } from './jobs/job-sweep-store.ts';
import { PgJobStore } from './jobs/pg-job-store.ts';
import { failurePolicyOf, LOCKED_FIRST } from './jobs/catalog.ts';
import { createLogger, type Logger } from './log.ts';
import { closeOutMeetingJob } from './meetings/close-out.ts';
import type { MeetingDeps } from './meetings/deps.ts';
import { splitRecordingJob } from './meetings/intake.ts';
import { onTranscriptEvent, writeMinutesJob } from './meetings/minutes.ts';
import { repairTimelineJob } from './meetings/repair.ts';
import { PgMeetingStore } from './meetings/pg-meeting-store.ts';
import { transcribeWindowJob } from './meetings/transcription.ts';
import type { AnswerWriter, MinutesWriter, Transcriber } from './ports.ts';
import { OpenAiAnswerWriter } from './adapters/openai-answer-writer.ts';
import { indexMeetingForSearch } from './search/indexer.ts';
import { SearchStore } from './search/search-store.ts';
import { startWorker, type WorkerHandle } from './worker/worker.ts';
import { makePrivateDir } from './storage/private-dir.ts';
import { PgWorkspaceStore } from './workspaces/pg-workspace-store.ts';
import { PgPeopleStore } from './workspaces/people-store.ts';
import { SsoClient } from './workspaces/sso.ts';
import { InviteMailer } from './workspaces/invite-mail.ts';
import { recordAudit } from './workspaces/audit.ts';
import type { PeopleDeps } from './workspaces/sign-in.ts';

export interface AppOverrides {
  transcriber?: Transcriber;
  minutesWriter?: MinutesWriter;
  logger?: Logger;
}

export interface App {
  config: Config;
  log: Logger;
  database: DatabaseHandle;
  deps: MeetingDeps;
  sweeps: PgJobSweeps;
  workspaces: PgWorkspaceStore;
  /** U1–U3: people, sessions and links. */
  people: PeopleDeps;
  close(): Promise<void>;
}

/**
 * S10: a login that is a superuser, bypasses row-level security or owns the schema could leave the
 * app's roles (SET ROLE NONE): said once at start, and in the health report (docs/security.md).
 */
async function warnOfPrivilegedLogin(db: DatabaseHandle['db'], log: Logger, quiet: boolean): Promise<void> {
  const role = await describeLogin(db);
  if (quiet || !loginIsPrivileged(role)) return;
  log.warn(
    { login: role.login, superuser: role.superuser, bypassRls: role.bypassRls, owns: role.owns },
    "the app's database login can leave its roles (a superuser, BYPASSRLS, or the schema's owner): give DATABASE_URL a login that owns nothing and VERBATIM_MIGRATION_DATABASE_URL the owner (docs/security.md, Database roles)",
  );
}

export async function openApp(config: Config, overrides: AppOverrides = {}): Promise<App> {
  const log = overrides.logger ?? createLogger(config.logLevel);
  let embedded: EmbeddedDatabase | null = null;
  let connectionString: string;
  if (!config.databaseUrl) {
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort }, log);
    // S10: the superuser runs the migrations; the app connects as its own login, which owns nothing.
    try {
      await migrateDatabase(embedded.connectionString);
      connectionString = await embedded.appLogin();
    } catch (err) {
      await embedded.stop();
      throw err;
    }
  } else {
    if (config.storage.kind === 'local') {
      // S6: the embedded start makes the data dir private itself (0710 for its postgres user as root).
      await makePrivateDir(config.dataDir);
    }
    connectionString = config.databaseUrl;
    // An isolated job's runner is started by a worker that has migrated already (J20).
    if (!config.isolatedRun) await migrateDatabase(config.migrationDatabaseUrl ?? connectionString);
  }
  const database = openDatabase(connectionString, log, 10, config.idleTransactionMs);
  try {
    // S10: every API request switches to the tenant role; a login that may not is told at start.
    await assertTenantRole(database.db);
    await warnOfPrivilegedLogin(database.db, log, config.isolatedRun !== null);
    await checkSecretKey(database.db, secretBoxOf(config), log);
  } catch (err) {
    await database.close();
    if (embedded) await embedded.stop();
    throw err;
  }
  // B2: staged cleanup rows are committed on their own short transactions, often while a request's
  // own transaction is open; a separate small pool means they never wait for that pool to drain.
  const staging = openDatabase(connectionString, log, 4, config.idleTransactionMs);
  // R2: the provider's per-minute limits, one budget per endpoint for the whole installation.
  await recallBudget(database.db, config).install();
  if (config.recall.apiKey && config.recall.webhookSecrets.length === 0) {
    // Every provider webhook would be refused (401): bots would only be followed by the back-fill.
    log.warn(
      'VERBATIM_RECALL_API_KEY is set but VERBATIM_RECALL_WEBHOOK_SECRETS is empty: provider webhooks will be refused',
    );
  }
  // V6: a provider's Retry-After holds every process of the installation.
  const holds = new SharedProviderHolds(database.db);
  const transcriber = overrides.transcriber ?? makeTranscriber(config, holds);
  // L22: only the local recogniser has a quicker search and a process kept ready for the next
  // draft; a Whisper server is asked the same way as for the finals.
  const draftTranscriber =
    overrides.transcriber === undefined && config.asr.kind === 'pocketsphinx'
      ? makeTranscriber(config, holds, { fast: config.draftRecogniser === 'fast', warm: true })
      : transcriber;
  const checkpoints = new Checkpoints(config.faults, config.faultStateDir);
  const timings = {
    leaseMs: config.leaseMs,
    leaseGraceMs: config.leaseGraceMs,
    retryStepMs: config.retryStepMs,
    rescueAfterMs: config.rescueAfterMs,
    isolation: config.isolation,
  };
  const jobs = new PgJobStore(database.db, timings, {
    checkpoints,
    log,
    failurePolicyOf: (kind) => failurePolicyOf(config, kind),
    lockedFirst: LOCKED_FIRST,
    splitsPerWorkspace: config.requestLimits.splitsPerWorkspace,
  });
  const sweeps = new PgJobSweeps(database.db, timings, { checkpoints, log });
  const deps: MeetingDeps = {
    db: database.db,
    stagingDb: staging.db,
    jobs,
    meetings: new PgMeetingStore(database.db),
    blobs: createBlobStore(config),
    transcriber,
    draftTranscriber,
    minutesWriter: overrides.minutesWriter ?? makeMinutesWriter(config, holds),
    answerWriter: makeAnswerWriter(config, holds),
    search: new SearchStore(database.db),
    decoder: new FfmpegAudioDecoder({ ffmpegPath: config.ffmpegPath, maxSeconds: config.maxAudioSeconds }),
    config,
    log,
    checkpoints,
    bots: buildBotDeps(config, database.db),
  };
  // S6: the local blob tree is private (0700); one an older version made 0755 is narrowed.
  await deps.blobs.prepare?.();
  return {
    config,
    log,
    database,
    deps,
    sweeps,
    workspaces: new PgWorkspaceStore(database.db),
    people: {
      people: new PgPeopleStore(database.db),
      sessions: config.sessions,
      sso: new SsoClient(config.sso),
      mailer: new InviteMailer(config.mail, log),
      audit: (entries) => recordAudit(database.db, log, entries),
      log,
    },
    close: async () => {
      await draftTranscriber.close?.();
      await staging.close();
      await database.close();
      if (embedded) await embedded.stop();
    },
  };
}

/** One handler per job kind: a kind of the catalog without one is a type error here. */
export function jobDefinitions(deps: MeetingDeps): JobDefinition[] {
  const handlers: { [K in JobKind]: JobDefinition<K> } = {
    [JobKind.splitRecording]: splitRecordingJob(deps),
    [JobKind.transcribeWindow]: transcribeWindowJob(deps),
    [JobKind.closeOutMeeting]: closeOutMeetingJob(deps),
    [JobKind.writeMinutes]: writeMinutesJob(deps),
    [JobKind.importBotRecording]: importBotRecordingJob(deps, deps.bots),
    [JobKind.scheduleBot]: scheduleBotJob(deps, deps.bots),
    [JobKind.deleteBot]: deleteBotJob(deps, deps.bots),
    [JobKind.leaveBot]: leaveBotJob(deps, deps.bots),
    [JobKind.repairTimeline]: repairTimelineJob(deps),
    [JobKind.importBotSpeakers]: importBotSpeakersJob(deps, deps.bots),
  };
  return Object.values(handlers);
}

export async function startAppWorker(app: App): Promise<WorkerHandle> {
  // B7: an atomic write interrupted by a crash leaves a temporary; only old ones are removed.
  const swept = await app.deps.blobs.removeStaleTemporaries?.();
  if (swept && swept.removed.length > 0) {
    app.log.info({ removed: swept.removed.length }, 'removed stale atomic-write temporaries');
  }
  return startWorker(
    app.deps,
    jobDefinitions(app.deps),
    {
      [Consumer.minutes]: (event) =>
        onTranscriptEvent(app.deps, {
          workspaceId: event.workspaceId,
          meetingId: event.subjectId,
          eventId: String(event.payload.eventId),
          revision: typeof event.payload.revision === 'number' ? event.payload.revision : 0,
        }),
      [Consumer.webhooks]: (event) => fanOutWebhook(app.deps, event),
      [Consumer.search]: async (event) => {
        await indexMeetingForSearch(app.deps, event.subjectId);
      },
    },
    app.database.connectionString,
    app.sweeps,
  );
}

export function buildAppApi(app: App) {
  return buildApi({
    deps: app.deps,
    workspaces: app.workspaces,
    people: app.people,
    log: app.log,
    connectionString: app.database.connectionString,
  });
}

/** The recogniser the settings name (also `verbatim doctor`'s, P2). */
export function makeTranscriber(
  config: Config,
  holds: RetryAfterHolds,
  local: { fast?: boolean; warm?: boolean } = {},
): Transcriber {
  switch (config.asr.kind) {
    case 'pocketsphinx':
      return new PocketsphinxTranscriber({ timeoutMs: config.asr.timeoutMs, ...local });
    case 'whisper':
      return new WhisperTranscriber({
        baseUrl: config.asr.url,
        apiKey: config.asr.apiKey || undefined,
        model: config.asr.model,
        timeoutMs: config.asr.timeoutMs,
        format: config.asr.format,
        holds,
      });
    default:
      return assertNever(config.asr.kind, 'ASR kind');
  }
}

/** O5: the minutes' chat model answers questions too; offline there is none. */
/**
 * O5/F4: ask's model: its own (VERBATIM_ASK_LLM_*) or else the minutes'. A key is sent only to the
 * endpoint it was given for: ask's own URL never gets the minutes key.
 */
function makeAnswerWriter(config: Config, holds: RetryAfterHolds): AnswerWriter | null {
  const own = config.ask.url !== null;
  const url = config.ask.url ?? (config.minutes.kind === 'openai' ? config.minutes.url : null);
  if (!url) return null;
  return new OpenAiAnswerWriter({
    baseUrl: url,
    apiKey: (config.ask.apiKey ?? (own ? null : config.minutes.apiKey)) || undefined,
    model: config.ask.model ?? config.minutes.model,
    timeoutMs: config.minutes.timeoutMs,
    holds,
  });
}

function makeMinutesWriter(config: Config, holds: RetryAfterHolds): MinutesWriter {
  switch (config.minutes.kind) {
    case 'extractive':
      return new ExtractiveMinutesWriter();
    case 'openai':
      return new OpenAiMinutesWriter({
        baseUrl: config.minutes.url,
        apiKey: config.minutes.apiKey || undefined,
        model: config.minutes.model,
        timeoutMs: config.minutes.timeoutMs,
        holds,
      });
    default:
      return assertNever(config.minutes.kind, 'minutes writer');
  }
}
