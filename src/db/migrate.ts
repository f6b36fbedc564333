import { Logger as GraphileLogger, runMigrations } from 'graphile-worker';
import { Kysely, Migrator, PostgresDialect, sql, type Migration } from 'kysely';
import pg from 'pg';
import * as m0001 from './migrations/0001-core.ts';
import * as m0002 from './migrations/0002-fenced-functions.ts';
import * as m0003 from './migrations/0003-live-chunks.ts';
import * as m0004 from './migrations/0004-webm-chunks.ts';
import * as m0005 from './migrations/0005-storage-ledger.ts';
import * as m0006 from './migrations/0006-batches.ts';
import * as m0007 from './migrations/0007-webhooks.ts';
import * as m0008 from './migrations/0008-provider-budgets.ts';
import * as m0009 from './migrations/0009-bot-recordings.ts';
import * as m0010 from './migrations/0010-provider-webhooks.ts';
import * as m0011 from './migrations/0011-bot-backstop.ts';
import * as m0012 from './migrations/0012-calendar-feeds.ts';
import * as m0013 from './migrations/0013-bot-recording-copies.ts';
import * as m0014 from './migrations/0014-bot-errors.ts';
import * as m0015 from './migrations/0015-live-timeline.ts';
import * as m0016 from './migrations/0016-bot-recovery.ts';
import * as m0017 from './migrations/0017-api-key-expiry.ts';
import * as m0018 from './migrations/0018-row-level-security.ts';
import * as m0019 from './migrations/0019-tenant-requests.ts';
import * as m0020 from './migrations/0020-worker-life-locks.ts';
import * as m0021 from './migrations/0021-tenant-review.ts';
import * as m0022 from './migrations/0022-create-keys.ts';
import * as m0023 from './migrations/0023-outage-waits.ts';
import * as m0024 from './migrations/0024-late-windows.ts';
import * as m0025 from './migrations/0025-meeting-stream.ts';
import * as m0026 from './migrations/0026-resumable-split.ts';
import * as m0027 from './migrations/0027-split-close-out-gate.ts';
import * as m0028 from './migrations/0028-bot-recording-lifecycle.ts';
import * as m0029 from './migrations/0029-meeting-stream-compaction.ts';
import * as m0030 from './migrations/0030-one-job-insert.ts';
import * as m0031 from './migrations/0031-search-index.ts';
import * as m0032 from './migrations/0032-search-phrase-pairs.ts';
import * as m0033 from './migrations/0033-isolated-lane.ts';
import * as m0034 from './migrations/0034-function-headers.ts';
import * as m0035 from './migrations/0035-close-out-gate-facts.ts';
import * as m0036 from './migrations/0036-provider-holds.ts';
import * as m0037 from './migrations/0037-speakers.ts';
import * as m0038 from './migrations/0038-tracks.ts';
import * as m0039 from './migrations/0039-processing-meetings.ts';
import * as m0040 from './migrations/0040-people.ts';
import * as m0041 from './migrations/0041-meeting-access.ts';
import * as m0042 from './migrations/0042-sso-and-share-links.ts';
import * as m0043 from './migrations/0043-audit-trail.ts';
import * as m0044 from './migrations/0044-sealed-secrets.ts';
import * as m0045 from './migrations/0045-search-overloads-see-visibility.ts';
import * as m0046 from './migrations/0046-database-roles.ts';
import * as m0047 from './migrations/0047-bot-owners.ts';
import * as m0048 from './migrations/0048-batch-owners.ts';
import * as m0049 from './migrations/0049-search-visibility-once.ts';
import * as m0050 from './migrations/0050-transcript-corrections.ts';
import * as m0051 from './migrations/0051-playback-retention.ts';
import * as m0052 from './migrations/0052-ask-budget.ts';
import * as m0053 from './migrations/0053-fair-claiming.ts';
import * as m0054 from './migrations/0054-webhook-fairness.ts';
import * as m0055 from './migrations/0055-workspace-budgets.ts';
import * as m0056 from './migrations/0056-workspace-hours-cap.ts';
import * as m0057 from './migrations/0057-workspace-running-cap.ts';
import * as m0058 from './migrations/0058-quota-reservations.ts';
import * as m0059 from './migrations/0059-window-commit-late-fact.ts';
import * as m0060 from './migrations/0060-stream-counts.ts';
import * as m0061 from './migrations/0061-readiness-grant.ts';
import { grantTransport } from './roles.ts';

const MIGRATIONS: Record<string, Migration> = {
  '0001-core': m0001,
  '0002-fenced-functions': m0002,
  '0003-live-chunks': m0003,
  '0004-webm-chunks': m0004,
  '0005-storage-ledger': m0005,
  '0006-batches': m0006,
  '0007-webhooks': m0007,
  '0008-provider-budgets': m0008,
  '0009-bot-recordings': m0009,
  '0010-provider-webhooks': m0010,
  '0011-bot-backstop': m0011,
  '0012-calendar-feeds': m0012,
  '0013-bot-recording-copies': m0013,
  '0014-bot-errors': m0014,
  '0015-live-timeline': m0015,
  '0016-bot-recovery': m0016,
  '0017-api-key-expiry': m0017,
  '0018-row-level-security': m0018,
  '0019-tenant-requests': m0019,
  '0020-worker-life-locks': m0020,
  '0021-tenant-review': m0021,
  '0022-create-keys': m0022,
  '0023-outage-waits': m0023,
  '0024-late-windows': m0024,
  '0025-meeting-stream': m0025,
  '0026-resumable-split': m0026,
  '0027-split-close-out-gate': m0027,
  '0028-bot-recording-lifecycle': m0028,
  '0029-meeting-stream-compaction': m0029,
  '0030-one-job-insert': m0030,
  '0031-search-index': m0031,
  '0032-search-phrase-pairs': m0032,
  '0033-isolated-lane': m0033,
  '0034-function-headers': m0034,
  '0035-close-out-gate-facts': m0035,
  '0036-provider-holds': m0036,
  '0037-speakers': m0037,
  '0038-tracks': m0038,
  '0039-processing-meetings': m0039,
  '0040-people': m0040,
  '0041-meeting-access': m0041,
  '0042-sso-and-share-links': m0042,
  '0043-audit-trail': m0043,
  '0044-sealed-secrets': m0044,
  '0045-search-overloads-see-visibility': m0045,
  '0046-database-roles': m0046,
  '0047-bot-owners': m0047,
  '0048-batch-owners': m0048,
  '0049-search-visibility-once': m0049,
  '0050-transcript-corrections': m0050,
  '0051-playback-retention': m0051,
  '0052-ask-budget': m0052,
  '0053-fair-claiming': m0053,
  '0054-webhook-fairness': m0054,
  '0055-workspace-budgets': m0055,
  '0056-workspace-hours-cap': m0056,
  '0057-workspace-running-cap': m0057,
  '0058-quota-reservations': m0058,
  '0059-window-commit-late-fact': m0059,
  '0060-stream-counts': m0060,
  '0061-readiness-grant': m0061,
};

/** P2: the names of every migration this release knows, in order (what `/readyz` expects applied). */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS);

/** Applies our frozen migrations, then installs graphile-worker's schema (the job transport). */
export async function migrateToLatest(db: Kysely<unknown>, connectionString: string): Promise<void> {
  if (await aheadOfThisRelease(db)) {
    // P5: a newer release migrated this database. Its migrations only expand the schema
    // (docs/deploy.md, Rolling upgrades), so this release runs on it as it is; Kysely's migrator
    // would refuse it as corrupted, and an old process restarted mid-upgrade would never start.
  } else {
    const migrator = new Migrator({
      db,
      provider: { getMigrations: () => Promise.resolve(MIGRATIONS) },
    });
    const { error, results } = await migrator.migrateToLatest();
    const failed = results?.find((r) => r.status === 'Error');
    // A newer release may have committed its migrations between that check and the migrator's
    // lock: Kysely then calls the database corrupted, but it is only ahead.
    if ((error || failed) && !failed && (await aheadOfThisRelease(db).catch(() => false))) {
      // P5: as above.
    } else if (error || failed) {
      throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`, { cause: error });
    }
  }
  // graphile-worker's own pool has no 'error' listener: its migrations run on a quiet pool of ours.
  const pool = quietPool(connectionString);
  try {
    await runMigrations({ pgPool: pool, logger: silentGraphileLogger });
    // S10: the transport's tables for the app's role (its schema is made just above).
    const client = await pool.connect();
    try {
      await grantTransport(client);
    } finally {
      client.release();
    }
  } finally {
    await pool.end().catch(() => undefined);
  }
}

/**
 * A pool for start-up work whose idle connections may be cut (a terminated backend, a restart):
 * without an 'error' listener that cut is an uncaught 'error' event and ends the process (V8).
 * The error is left to the query that meets it, which fails and is retried by its caller.
 */
function quietPool(connectionString: string): pg.Pool {
  const pool = new pg.Pool({ connectionString, max: 2 });
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/**
 * P5: whether the database holds migrations this release does not know, with every one it knows
 * applied (a newer release migrated it). One that lacks some of ours as well was migrated by
 * another line of releases: that is refused, naming both.
 */
export async function aheadOfThisRelease(db: Kysely<unknown>): Promise<boolean> {
  const { rows } = await sql<{ name: string }>`select name from kysely_migration`
    .execute(db)
    .catch((err: unknown) => {
      if ((err as { code?: string }).code === '42P01') return { rows: [] };
      throw err;
    });
  const applied = new Set(rows.map((r) => r.name));
  const ours = new Set(MIGRATION_NAMES);
  const newer = [...applied].filter((n) => !ours.has(n)).sort();
  if (newer.length === 0) return false;
  const missing = MIGRATION_NAMES.filter((n) => !applied.has(n));
  if (missing.length > 0) {
    throw new Error(
      `the database has migrations this release does not know (${newer[0]}) and lacks ones it does (${missing[0]}): it was migrated by another line of releases; run the release that migrated it`,
    );
  }
  return true;
}

/** Runs the migrations as the owner, on connections of their own that end with them. */
export async function migrateDatabase(ownerUrl: string): Promise<void> {
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: quietPool(ownerUrl) }) });
  try {
    await migrateToLatest(db, ownerUrl);
  } finally {
    await db.destroy().catch(() => undefined);
  }
}

export const silentGraphileLogger = new GraphileLogger(() => () => {});
