import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Executor, Tx } from '../db/schema.ts';

/**
 * R1: calendar feeds and the events each one listed (with the recording made for it);
 * src/bots/calendar-feeds.ts polls the feeds and applies what changed.
 */

/**
 * Subscribes the workspace to a feed; a feed it has already is polled at once instead (and keeps
 * its owner, or takes this one if it had none).
 */
export async function upsertFeed(db: Db, workspaceId: string, url: string, ownerUserId: string | null) {
  return db
    .insertInto('calendar_feeds')
    .values({ id: randomUUID(), workspace_id: workspaceId, url, owner_user_id: ownerUserId })
    .onConflict((oc) =>
      oc.columns(['workspace_id', 'url']).doUpdateSet({
        next_poll_at: sql<Date>`now()`,
        owner_user_id: sql<string | null>`coalesce(calendar_feeds.owner_user_id, excluded.owner_user_id)`,
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function feedsOf(db: Executor, workspaceId: string) {
  return db
    .selectFrom('calendar_feeds')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .orderBy('created_at')
    .execute();
}

export async function feedById(db: Executor, feedId: string) {
  return db.selectFrom('calendar_feeds').selectAll().where('id', '=', feedId).executeTakeFirstOrThrow();
}

/** The workspace's feed, locked for its removal; undefined when the workspace has no such feed. */
export async function lockWorkspaceFeed(trx: Tx, workspaceId: string, feedId: string) {
  return trx
    .selectFrom('calendar_feeds')
    .select('id')
    .where('id', '=', feedId)
    .where('workspace_id', '=', workspaceId)
    .forUpdate()
    .executeTakeFirst();
}

/** The feed locked for a poll (an unsubscribe waits for it); undefined once it was removed. */
export async function lockFeed(trx: Tx, feedId: string) {
  return trx
    .selectFrom('calendar_feeds')
    .select('id')
    .where('id', '=', feedId)
    .forNoKeyUpdate()
    .executeTakeFirst();
}

export async function deleteFeed(trx: Tx, feedId: string): Promise<void> {
  await trx.deleteFrom('calendar_feeds').where('id', '=', feedId).execute();
}

/**
 * F6: up to `limit` feeds due for a poll, leased for `leaseMs`, round-robin across workspaces: each
 * workspace's due feeds ranked longest-due first, the first of every workspace before the second of
 * any, and a workspace with `perWorkspace` polls already in flight (on any worker) gets none this
 * time. The candidates are read without locks (a window function cannot lock); the update takes
 * each row only while it is still free, so two pollers never share a feed.
 */
export async function leaseDueFeeds(
  db: Db,
  limit: number,
  perWorkspace: number,
  leaseMs: number,
): Promise<string[]> {
  const due = await sql<{ id: string }>`
    with candidates as (
      select c.id, c.next_poll_at,
             row_number() over (partition by c.workspace_id order by c.next_poll_at, c.id) as rank,
             (select count(*) from calendar_feeds f
               where f.workspace_id = c.workspace_id and f.lease_expires_at > now()) as busy
        from calendar_feeds c
       where c.next_poll_at <= now() and (c.lease_expires_at is null or c.lease_expires_at < now())
    ), chosen as (
      select id from candidates where rank + busy <= ${perWorkspace}
       order by rank, next_poll_at limit ${limit}
    )
    update calendar_feeds f set lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
      from chosen
     where f.id = chosen.id and f.next_poll_at <= now()
       and (f.lease_expires_at is null or f.lease_expires_at < now())
    returning f.id`.execute(db);
  return due.rows.map((r) => r.id);
}

/**
 * A poll ended: read (with `polledAt`) or not (with `error`: nothing it listed changes); either way
 * the lease is released and the next poll set.
 */
export async function noteFeedPolled(
  db: Executor,
  feedId: string,
  outcome: { nextPollAt: Date } & ({ polledAt: Date } | { error: string }),
): Promise<void> {
  await db
    .updateTable('calendar_feeds')
    .set({
      ...('polledAt' in outcome
        ? { last_polled_at: outcome.polledAt, last_error: null }
        : { last_error: outcome.error.slice(0, 300) }),
      next_poll_at: outcome.nextPollAt,
      lease_expires_at: null,
    })
    .where('id', '=', feedId)
    .execute();
}

export async function eventsOfFeed(db: Executor, feedId: string) {
  return db.selectFrom('calendar_events').selectAll().where('feed_id', '=', feedId).execute();
}

/** What the feed says of an event, remembered without touching its recording. */
export async function rememberEvent(
  trx: Tx,
  feedId: string,
  uid: string,
  e: { start: Date; end: Date; meetingUrl: string },
): Promise<void> {
  await trx
    .updateTable('calendar_events')
    .set({ start_at: e.start, end_at: e.end, meeting_url: e.meetingUrl, seen_at: sql<Date>`now()` })
    .where('feed_id', '=', feedId)
    .where('uid', '=', uid)
    .execute();
}

/** The event with the recording that serves it. */
export async function saveEvent(
  trx: Tx,
  feedId: string,
  uid: string,
  recordingId: string,
  e: { start: Date; end: Date; meetingUrl: string },
): Promise<void> {
  await trx
    .insertInto('calendar_events')
    .values({
      feed_id: feedId,
      uid,
      recording_id: recordingId,
      start_at: e.start,
      end_at: e.end,
      meeting_url: e.meetingUrl,
    })
    .onConflict((oc) =>
      oc.columns(['feed_id', 'uid']).doUpdateSet({
        recording_id: recordingId,
        start_at: e.start,
        end_at: e.end,
        meeting_url: e.meetingUrl,
        seen_at: sql<Date>`now()`,
      }),
    )
    .execute();
}

export async function forgetEvent(trx: Tx, feedId: string, uid: string): Promise<void> {
  await trx.deleteFrom('calendar_events').where('feed_id', '=', feedId).where('uid', '=', uid).execute();
}

/** Whether another copy of the meeting (another feed's, or another event of this one) holds the recording. */
export async function otherCopyHolds(
  trx: Tx,
  copy: { feedId: string; uid: string; recordingId: string },
): Promise<boolean> {
  const others = await trx
    .selectFrom('calendar_events')
    .select('uid')
    .where('recording_id', '=', copy.recordingId)
    .where((eb) => eb.or([eb('feed_id', '<>', copy.feedId), eb('uid', '<>', copy.uid)]))
    .limit(1)
    .execute();
  return others.length > 0;
}

/** Whether a calendar feed's copy of the meeting holds this recording. */
export async function feedCopyHolds(trx: Tx, recordingId: string): Promise<boolean> {
  const copy = await trx
    .selectFrom('calendar_events')
    .select('uid')
    .where('recording_id', '=', recordingId)
    .limit(1)
    .executeTakeFirst();
  return copy !== undefined;
}

/** Of these recordings, those a calendar feed's copy holds. */
export async function heldByFeeds(trx: Tx, recordingIds: string[]): Promise<Set<string | null>> {
  if (recordingIds.length === 0) return new Set();
  const rows = await trx
    .selectFrom('calendar_events')
    .select('recording_id')
    .where('recording_id', 'in', recordingIds)
    .execute();
  return new Set(rows.map((c) => c.recording_id));
}

/** The feeds' copies of a canceled recording are forgotten, so a later poll can make it again. */
export async function forgetEventsOfRecording(trx: Tx, recordingId: string): Promise<void> {
  await trx.deleteFrom('calendar_events').where('recording_id', '=', recordingId).execute();
}

/** Every feed of the workspace is polled at once (bot recording was switched on). */
export async function pollFeedsNow(trx: Tx, workspaceId: string): Promise<void> {
  await trx
    .updateTable('calendar_feeds')
    .set({ next_poll_at: sql<Date>`now()` })
    .where('workspace_id', '=', workspaceId)
    .execute();
}
