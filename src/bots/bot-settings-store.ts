import { sql } from 'kysely';
import type { Executor, Tx } from '../db/schema.ts';

/**
 * R1/R10: a workspace's bot setting, the ids the API gave its calendar events, and the named
 * transaction locks that serialize everything making or moving a recording of one link or event.
 */

/** A transaction-scoped lock on one name (64-bit hash), released at commit or rollback. */
export async function lockKey(trx: Tx, name: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`verbatim-bots:${name}`}, 0))`.execute(trx);
}

/**
 * R1: whether bots may record this workspace's meetings; in a transaction, read under a share lock
 * on the workspace, which switching the setting waits for.
 */
export async function botRecordingEnabled(db: Executor, workspaceId: string): Promise<boolean> {
  const ws = await db
    .selectFrom('workspaces')
    .select('bot_recording_enabled')
    .where('id', '=', workspaceId)
    .forShare()
    .executeTakeFirst();
  return ws?.bot_recording_enabled ?? false;
}

/** The setting as GET /v1/bot-settings shows it: a plain read that never waits for a switch in progress. */
export async function readBotRecordingEnabled(db: Executor, workspaceId: string): Promise<boolean> {
  const ws = await db
    .selectFrom('workspaces')
    .select('bot_recording_enabled')
    .where('id', '=', workspaceId)
    .executeTakeFirstOrThrow();
  return ws.bot_recording_enabled;
}

/** Switches the setting under an exclusive lock on the workspace: no recording slips in meanwhile. */
export async function setBotRecordingFlag(trx: Tx, workspaceId: string, enabled: boolean): Promise<void> {
  await trx
    .selectFrom('workspaces')
    .select('id')
    .where('id', '=', workspaceId)
    .forUpdate()
    .executeTakeFirstOrThrow();
  await trx
    .updateTable('workspaces')
    .set({ bot_recording_enabled: enabled })
    .where('id', '=', workspaceId)
    .execute();
}

/** R10: the recording an API event id was given, with its link; undefined for a new id. */
export async function apiEventRecording(trx: Tx, workspaceId: string, eventId: string) {
  return trx
    .selectFrom('api_calendar_events as a')
    .innerJoin('bot_recordings as r', 'r.id', 'a.recording_id')
    .select(['a.recording_id', 'r.meeting_url'])
    .where('a.workspace_id', '=', workspaceId)
    .where('a.event_id', '=', eventId)
    .executeTakeFirst();
}

/** R10: the API event id now names this recording. */
export async function saveApiEvent(
  trx: Tx,
  workspaceId: string,
  eventId: string,
  recordingId: string,
): Promise<void> {
  await trx
    .insertInto('api_calendar_events')
    .values({ workspace_id: workspaceId, event_id: eventId, recording_id: recordingId })
    .onConflict((oc) =>
      oc
        .columns(['workspace_id', 'event_id'])
        .doUpdateSet({ recording_id: recordingId, updated_at: sql<Date>`now()` }),
    )
    .execute();
}
