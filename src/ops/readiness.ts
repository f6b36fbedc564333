import { randomUUID } from 'node:crypto';
import { databaseAnswers } from '../db/connect.ts';
import { MIGRATION_NAMES } from '../db/migrate.ts';
import type { Db } from '../db/schema.ts';
import type { BlobStore } from '../ports.ts';
import { migrationsNotApplied } from './readiness-store.ts';

/** P2: how long each check of `/readyz` may take before it counts as failed. */
export const READINESS_CHECK_MS = 5_000;

export interface Readiness {
  ready: boolean;
  /** Each check's word: `ok`, or what is wrong with it. */
  database: string;
  migrations: string;
  storage: string;
}

/** `what`, or a rejection after `ms`. */
export async function within<T>(ms: number, what: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([what, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * P2: whether this process can serve: the database answers, every migration this release knows
 * is applied (a newer release's extra ones are fine: migrations expand before code uses them),
 * and the blob store takes a write and a delete. Each failure is named; its detail goes to the log.
 */
export async function readiness(
  db: Db,
  blobs: BlobStore,
  log: { warn: (o: object, msg: string) => void },
): Promise<Readiness> {
  const database = (await within(READINESS_CHECK_MS, databaseAnswers(db)).catch(() => false))
    ? 'ok'
    : 'unreachable';
  let migrations = 'unknown: the database does not answer';
  if (database === 'ok') {
    migrations = await within(READINESS_CHECK_MS, migrationsNotApplied(db, MIGRATION_NAMES)).then(
      (missing) =>
        missing.length === 0
          ? 'ok'
          : `${missing.length} not applied (first ${missing[0]}): run \`verbatim migrate\``,
      (err: unknown) => {
        log.warn({ err: String(err) }, 'readiness: applied migrations could not be read');
        return 'unreadable (the log says why)';
      },
    );
  }
  const key = `readyz/${randomUUID()}`;
  const storage = await within(
    READINESS_CHECK_MS,
    (async () => {
      await blobs.put(key, Buffer.from('ready'));
      await blobs.delete(key);
    })(),
  ).then(
    () => 'ok',
    (err: unknown) => {
      // The store's error may name paths or endpoints: the log has it, the unauthenticated answer not.
      log.warn({ err: String(err) }, 'readiness: the blob store refused a write');
      return 'not writable (the log says why)';
    },
  );
  return {
    ready: database === 'ok' && migrations === 'ok' && storage === 'ok',
    database,
    migrations,
    storage,
  };
}
