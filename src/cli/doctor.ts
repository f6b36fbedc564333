import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rmdir, statfs } from 'node:fs/promises';
import path from 'node:path';
import { tmpdir } from 'node:os';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createBlobStore } from '../adapters/blob-store-factory.ts';
import { DEMUXER_ALLOWLIST, FfmpegAudioDecoder } from '../adapters/ffmpeg-audio-decoder.ts';
import { SharedProviderHolds } from '../adapters/provider-hold-store.ts';
import type { RetryAfterHolds } from '../adapters/provider-http.ts';
import { makeTranscriber } from '../app.ts';
import { loadConfig, pathOnlyEnv, SETTINGS, type Config } from '../config.ts';
import { openDatabase, type DatabaseHandle } from '../db/connect.ts';
import { embeddedState } from '../db/embedded.ts';
import { MIGRATION_NAMES } from '../db/migrate.ts';
import { describeLogin, loginIsPrivileged } from '../db/roles.ts';
import { asSystem, assertTenantRole } from '../db/tenant.ts';
import type { Db } from '../db/schema.ts';
import { encodeWav } from '../domain/wav.ts';
import type { Logger } from '../log.ts';
import { parseEgressAllow } from '../net/egress.ts';
import { within } from '../ops/readiness.ts';
import { databaseClockMs, migrationsNotApplied, serverVersion } from '../ops/readiness-store.ts';
import { settingErrors, type Env } from '../settings.ts';
import { reservedBytes, storedBytes } from '../storage/object-rows.ts';

/** P2: what one check found: `ok`, `warn` (works, but look at it) or `fault` (something fails). */
export interface Finding {
  check: string;
  verdict: 'ok' | 'warn' | 'fault';
  detail: string;
  /** How to put it right, for a warning or a fault. */
  fix?: string;
}

/** The phrase in assets/known-phrase.flac (flite's voice), and the words a recogniser must hear of it. */
const PHRASE = 'the budget meeting will discuss the marketing plan';
const PHRASE_WORDS = ['budget', 'meeting', 'marketing', 'plan'];
const PHRASE_FILE = new URL('../../assets/known-phrase.flac', import.meta.url);

const CHECK_MS = 10_000;
const RECOGNISER_MS = 60_000;
/** Below this much free space a window or a decode may not fit; below the warning, soon. */
const DISK_FAULT_BYTES = 256 * 1024 ** 2;
const DISK_WARN_BYTES = 2 * 1024 ** 3;
/** The leases and deadlines are the database's clock; the workers' own must not be far off. */
const SKEW_FAULT_MS = 5_000;
const SKEW_WARN_MS = 1_000;

const execFileAsync = promisify(execFile);
const mib = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MB`;
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * P2: `verbatim doctor`. Checks this install as the settings describe it and says what is wrong
 * and how to fix it; it changes nothing (no migration, no key, no database started, no file but a
 * probe object it deletes, with any folder the probe made). Every check runs even after another fails, where it can.
 */
export async function runDoctor(env: Env, log: Logger): Promise<Finding[]> {
  const findings: Finding[] = [];
  const add = (f: Finding) => findings.push(f);

  // Settings: each bad value by name; the others are judged without them (their defaults).
  const bad = settingErrors(SETTINGS, env);
  for (const e of bad) {
    add({ check: 'settings', verdict: 'fault', detail: e.message, fix: `correct or unset ${e.env}` });
  }
  let config: Config;
  try {
    const rest = { ...env };
    for (const e of bad) delete rest[e.env];
    config = loadConfig(rest);
  } catch (err) {
    add({
      check: 'settings',
      verdict: 'fault',
      detail: message(err),
      fix: 'see the settings table in README.md',
    });
    return findings;
  }
  if (bad.length === 0) add({ check: 'settings', verdict: 'ok', detail: 'every setting given is valid' });
  if (!bad.some((e) => e.env === SETTINGS.metricsToken.env)) {
    add(
      config.metricsToken === null
        ? { check: 'metrics token', verdict: 'ok', detail: '/metrics is off (no VERBATIM_METRICS_TOKEN)' }
        : { check: 'metrics token', verdict: 'ok', detail: `set, ${config.metricsToken.length} characters` },
    );
  }
  add(egressFinding(config));

  const phrase = await checkFfmpeg(config, add);

  let database: DatabaseHandle | null = null;
  try {
    database = await reachDatabase(config, log, add);
    const migrated = database ? await checkDatabase(database.db, add) : false;
    await checkStorage(config, migrated ? database!.db : null, add);
    await checkRecogniser(config, database?.db ?? null, phrase, add);
  } finally {
    await database?.close();
  }
  await checkDisk(config, add);
  return findings;
}

function egressFinding(config: Config): Finding {
  const allowed = parseEgressAllow(config.egressAllow);
  const check = 'egress';
  if (allowed.check('169.254.169.254', 'ipv4')) {
    return {
      check,
      verdict: 'fault',
      detail: 'VERBATIM_EGRESS_ALLOW lets tenants’ URLs reach 169.254.169.254, the cloud metadata service',
      fix: 'list only the internal hosts feeds and webhooks need, never 169.254.0.0/16',
    };
  }
  const opened = [
    ['127.0.0.1', 'this machine'],
    ['10.0.0.1', '10.0.0.0/8'],
    ['192.168.0.1', '192.168.0.0/16'],
    ['172.16.0.1', '172.16.0.0/12'],
  ].filter(([address]) => allowed.check(address!, 'ipv4'));
  if (opened.length > 0) {
    return {
      check,
      verdict: 'warn',
      detail: `tenants’ feeds, webhooks and recording links may reach ${opened.map(([, what]) => what).join(', ')}`,
      fix: 'narrow VERBATIM_EGRESS_ALLOW to the hosts that need it (docs/security.md)',
    };
  }
  return {
    check,
    verdict: 'ok',
    detail: config.egressAllow
      ? `internal addresses allowed: ${config.egressAllow}`
      : 'tenants’ URLs reach public addresses only',
  };
}

/** ffmpeg found, every demuxer of the allowlist in it, and the known phrase decoded the way uploads are. */
async function checkFfmpeg(config: Config, add: (f: Finding) => void): Promise<Int16Array | null> {
  const fix = `install Debian's ffmpeg (apt-get install ffmpeg) or point ${SETTINGS.ffmpegPath.env} at one`;
  let demuxers: string;
  try {
    ({ stdout: demuxers } = await execFileAsync(config.ffmpegPath, ['-hide_banner', '-demuxers'], {
      timeout: CHECK_MS,
      env: pathOnlyEnv(),
      maxBuffer: 4 * 1024 * 1024,
    }));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const detail =
      code === 'ENOENT'
        ? `not found: "${config.ffmpegPath}"`
        : code === 'EACCES'
          ? `not executable: "${config.ffmpegPath}"`
          : `"${config.ffmpegPath} -demuxers" failed: ${message(err)}`;
    add({ check: 'ffmpeg', verdict: 'fault', detail, fix });
    return null;
  }
  const present = new Set(
    demuxers
      .split('\n')
      .map((line) => /^\s*D\S*\s+(\S+)/.exec(line)?.[1])
      .filter((name): name is string => name !== undefined)
      .flatMap((names) => names.split(',')),
  );
  const missing = DEMUXER_ALLOWLIST.filter((d) => !present.has(d));
  if (missing.length > 0) {
    add({
      check: 'ffmpeg',
      verdict: 'fault',
      detail: `this ffmpeg lacks demuxers uploads need: ${missing.join(', ')}`,
      fix,
    });
    return null;
  }
  try {
    const decoded = await new FfmpegAudioDecoder({
      ffmpegPath: config.ffmpegPath,
      timeoutMs: CHECK_MS,
    }).decode(await readFile(PHRASE_FILE));
    add({
      check: 'ffmpeg',
      verdict: 'ok',
      detail: `the allowlist's ${DEMUXER_ALLOWLIST.length} demuxers present; a FLAC decoded to ${(decoded.samples.length / decoded.sampleRate).toFixed(1)} s`,
    });
    return decoded.samples;
  } catch (err) {
    add({ check: 'ffmpeg', verdict: 'fault', detail: `decoding a known FLAC failed: ${message(err)}`, fix });
    return null;
  }
}

/**
 * The database the processes use: DATABASE_URL, or the embedded one that Verbatim runs now (its
 * app login); a stopped one is not started, which would change its data dir.
 */
async function reachDatabase(
  config: Config,
  log: Logger,
  add: (f: Finding) => void,
): Promise<DatabaseHandle | null> {
  let url = config.databaseUrl;
  let where = 'DATABASE_URL';
  if (!url) {
    const state = embeddedState(config.dataDir);
    if (state.state === 'none') {
      add({
        check: 'database',
        verdict: 'fault',
        detail: `no DATABASE_URL and no embedded database in ${config.dataDir} yet`,
        fix: '`verbatim start` makes one, or set DATABASE_URL',
      });
      return null;
    }
    where = `the embedded Postgres in ${config.dataDir}`;
    if (state.state === 'stopped') {
      // Starting it would change the data dir (modes, the app login, a password file): the
      // doctor changes nothing, so it checks the database only while Verbatim runs it.
      add({
        check: 'database',
        verdict: 'warn',
        detail: `${where} is not running: its checks were skipped`,
        fix: 'start Verbatim (`verbatim start`), then run `verbatim doctor` again',
      });
      return null;
    }
    url = state.url;
  }
  const database = openDatabase(url, log.child({ level: 'silent' }), 2);
  try {
    const version = await within(CHECK_MS, serverVersion(database.db));
    add(
      version.num >= 150000
        ? { check: 'database', verdict: 'ok', detail: `PostgreSQL ${version.text} (${where})` }
        : {
            check: 'database',
            verdict: 'warn',
            detail: `PostgreSQL ${version.text}: Verbatim is tested on 15 and later`,
            fix: 'upgrade PostgreSQL',
          },
    );
    return database;
  } catch (err) {
    await database.close();
    add({
      check: 'database',
      verdict: 'fault',
      detail: `${where} does not answer: ${message(err)}`,
      fix: 'start PostgreSQL, or correct DATABASE_URL (host, port, user, database)',
    });
    return null;
  }
}

/** The roles, migrations and clock; whether every migration is applied. */
async function checkDatabase(db: Db, add: (f: Finding) => void): Promise<boolean> {
  let migrated = false;
  try {
    await asSystem(() => assertTenantRole(db));
    const role = await asSystem(() => describeLogin(db));
    add(
      loginIsPrivileged(role)
        ? {
            check: 'database roles',
            verdict: 'warn',
            detail: `the login ${role.login} can leave the app's roles (superuser, BYPASSRLS or the schema's owner)`,
            fix: 'give DATABASE_URL a login that owns nothing and VERBATIM_MIGRATION_DATABASE_URL the owner (docs/security.md, Database roles)',
          }
        : {
            check: 'database roles',
            verdict: 'ok',
            detail: `the login ${role.login} owns nothing and may take the tenant role`,
          },
    );
  } catch (err) {
    add({
      check: 'database roles',
      verdict: 'fault',
      detail: message(err),
      fix: 'run `verbatim migrate` as the schema owner; docs/security.md, Database roles',
    });
  }
  try {
    const missing = await within(
      CHECK_MS,
      asSystem(() => migrationsNotApplied(db, MIGRATION_NAMES)),
    );
    migrated = missing.length === 0;
    add(
      missing.length === 0
        ? { check: 'migrations', verdict: 'ok', detail: `all ${MIGRATION_NAMES.length} applied` }
        : {
            check: 'migrations',
            verdict: 'fault',
            detail: `${missing.length} of ${MIGRATION_NAMES.length} not applied (first ${missing[0]})`,
            fix: 'run `verbatim migrate` (with the owner login in VERBATIM_MIGRATION_DATABASE_URL)',
          },
    );
  } catch (err) {
    const absent = (err as { code?: string }).code === '42P01';
    add({
      check: 'migrations',
      verdict: 'fault',
      detail: absent ? 'none applied: the schema is empty' : `cannot be read: ${message(err)}`,
      fix: 'run `verbatim migrate` (with the owner login in VERBATIM_MIGRATION_DATABASE_URL)',
    });
  }
  // The database's clock against this machine's, halfway through the round trip.
  try {
    const before = Date.now();
    const dbNow = await databaseClockMs(db);
    const after = Date.now();
    const skew = dbNow - (before + after) / 2;
    const text = `this machine's clock is ${Math.abs(skew).toFixed(0)} ms ${skew > 0 ? 'behind' : 'ahead of'} the database's`;
    const abs = Math.abs(skew);
    add(
      abs > SKEW_FAULT_MS
        ? {
            check: 'clock',
            verdict: 'fault',
            detail: text,
            fix: 'synchronise both clocks (chrony or systemd-timesyncd)',
          }
        : abs > SKEW_WARN_MS
          ? {
              check: 'clock',
              verdict: 'warn',
              detail: text,
              fix: 'synchronise both clocks (chrony or systemd-timesyncd)',
            }
          : { check: 'clock', verdict: 'ok', detail: text },
    );
  } catch (err) {
    add({ check: 'clock', verdict: 'fault', detail: `cannot be compared: ${message(err)}` });
  }
  return migrated;
}

/** The blob store takes a write and a delete; what is stored against the installation's quota. */
async function checkStorage(config: Config, db: Db | null, add: (f: Finding) => void): Promise<void> {
  const where = config.storage.kind === 's3' ? `bucket ${config.storage.bucket}` : `${config.dataDir}/blobs`;
  // At the store's root, so the probe makes no folder; a root the probe had to make goes too.
  const key = `.doctor-probe-${randomUUID()}`;
  const localRoot = config.storage.kind === 'local' ? path.join(config.dataDir, 'blobs') : null;
  const rootMade = localRoot !== null && !existsSync(localRoot);
  try {
    const blobs = createBlobStore(config);
    await within(CHECK_MS, blobs.put(key, Buffer.from('doctor')));
    await within(CHECK_MS, blobs.delete(key));
    if (rootMade) await rmdir(localRoot).catch(() => undefined);
    add({ check: 'storage', verdict: 'ok', detail: `${where} takes a write and a delete` });
  } catch (err) {
    add({
      check: 'storage',
      verdict: 'fault',
      detail: `${where} refused a write: ${message(err)}`,
      fix:
        config.storage.kind === 's3'
          ? 'check the VERBATIM_S3_* settings and that the bucket exists and the key may write to it'
          : "give the service's user write access to the data dir (VERBATIM_DATA_DIR), on a writable disk",
    });
  }
  if (!db) return;
  try {
    const [stored, reserved] = await asSystem(() =>
      Promise.all([storedBytes(db, null), reservedBytes(db, null)]),
    );
    const quota = config.globalQuotaBytes;
    const held = stored + reserved;
    const text = `${mib(stored)} stored, ${mib(reserved)} reserved`;
    add(
      quota === 0
        ? { check: 'storage quota', verdict: 'ok', detail: `${text}; no installation quota` }
        : held >= quota
          ? {
              check: 'storage quota',
              verdict: 'fault',
              detail: `${text}: the installation quota of ${mib(quota)} is full; uploads are refused`,
              fix: `raise ${SETTINGS.globalQuotaBytes.env}, or delete meetings`,
            }
          : held >= 0.9 * quota
            ? {
                check: 'storage quota',
                verdict: 'warn',
                detail: `${text}: ${((100 * held) / quota).toFixed(0)} % of the installation quota`,
                fix: `raise ${SETTINGS.globalQuotaBytes.env}, or delete meetings`,
              }
            : { check: 'storage quota', verdict: 'ok', detail: `${text} of ${mib(quota)}` },
    );
  } catch (err) {
    add({ check: 'storage quota', verdict: 'fault', detail: `cannot be read: ${message(err)}` });
  }
}

/** The known phrase through the configured recogniser: most of its words must come back. */
async function checkRecogniser(
  config: Config,
  db: Db | null,
  phrase: Int16Array | null,
  add: (f: Finding) => void,
): Promise<void> {
  const check = `recogniser (${config.asr.kind})`;
  if (!phrase) {
    add({ check, verdict: 'fault', detail: 'not tried: ffmpeg could not decode the known phrase' });
    return;
  }
  if (config.asr.kind === 'whisper' && !db) {
    add({ check, verdict: 'fault', detail: 'not tried: its provider holds are kept in the database' });
    return;
  }
  // A provider's Retry-After is kept for every process, as a worker would.
  const holds: RetryAfterHolds = db
    ? new SharedProviderHolds(db)
    : { heldForMs: () => Promise.resolve(0), askedToWait: () => Promise.resolve() };
  const transcriber = makeTranscriber(config, holds);
  try {
    const segments = await within(
      RECOGNISER_MS,
      asSystem(() => transcriber.transcribe({ wav: encodeWav(phrase, 16_000), language: 'en' })),
    );
    const heard = segments
      .map((s) => s.text)
      .join(' ')
      .trim();
    const words = new Set(heard.toLowerCase().match(/[a-z']+/g) ?? []);
    const got = PHRASE_WORDS.filter((w) => words.has(w));
    add(
      got.length >= PHRASE_WORDS.length / 2
        ? { check, verdict: 'ok', detail: `heard "${heard}" for "${PHRASE}"` }
        : {
            check,
            verdict: 'fault',
            detail: `heard "${heard}" for "${PHRASE}"`,
            fix: 'check the recogniser and its model (pocketsphinx-en-us, or the Whisper server’s model)',
          },
    );
  } catch (err) {
    add({
      check,
      verdict: 'fault',
      detail: message(err),
      fix:
        config.asr.kind === 'pocketsphinx'
          ? 'install Debian’s pocketsphinx and pocketsphinx-en-us'
          : 'check VERBATIM_WHISPER_URL, its key and model, and that the server answers',
    });
  } finally {
    await transcriber.close?.();
  }
}

/** Free space where audio is kept (local storage) and where decodes are written (the temp dir). */
async function checkDisk(config: Config, add: (f: Finding) => void): Promise<void> {
  const places = [
    ...(config.storage.kind === 'local' || !config.databaseUrl ? [['data dir', config.dataDir]] : []),
    ['temp dir', tmpdir()],
  ];
  for (const [what, dir] of places) {
    try {
      const fs = await statfs(dir!);
      const free = fs.bavail * fs.bsize;
      const text = `${what} ${dir}: ${mib(free)} free`;
      add(
        free < DISK_FAULT_BYTES
          ? { check: 'disk', verdict: 'fault', detail: text, fix: 'free space, or move it to a larger disk' }
          : free < DISK_WARN_BYTES
            ? { check: 'disk', verdict: 'warn', detail: text, fix: 'free space soon' }
            : { check: 'disk', verdict: 'ok', detail: text },
      );
    } catch (err) {
      const absent = (err as NodeJS.ErrnoException).code === 'ENOENT';
      add({
        check: 'disk',
        verdict: absent && what === 'data dir' ? 'warn' : 'fault',
        detail: `${what} ${dir}: ${absent ? 'does not exist yet' : message(err)}`,
        ...(absent ? { fix: '`verbatim start` makes it' } : {}),
      });
    }
  }
}

/** Prints the findings, one line each (and the fix under it); exit 1 when any is a fault. */
export function printFindings(findings: Finding[], write: (line: string) => void): number {
  const width = Math.max(...findings.map((f) => f.check.length));
  for (const f of findings) {
    const mark = f.verdict === 'ok' ? 'ok   ' : f.verdict === 'warn' ? 'WARN ' : 'FAULT';
    write(`${mark}  ${f.check.padEnd(width)}  ${f.detail}`);
    if (f.fix && f.verdict !== 'ok') write(`${' '.repeat(7 + width + 2)}fix: ${f.fix}`);
  }
  const faults = findings.filter((f) => f.verdict === 'fault').length;
  const warnings = findings.filter((f) => f.verdict === 'warn').length;
  write('');
  write(
    faults === 0
      ? `no faults${warnings > 0 ? `, ${warnings} warning${warnings === 1 ? '' : 's'}` : ''}`
      : `${faults} fault${faults === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}`,
  );
  return faults === 0 ? 0 : 1;
}
