import { AppError, ErrorKind } from '../domain/errors.ts';
import { INVALID_CALENDAR, type CalendarOccurrence } from '../domain/ics.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import { canonicalMeetingUrl } from '../domain/meeting-url.ts';
import { EgressError, egressFailureText, egressGuardOf, httpStatusCategory } from '../net/egress.ts';
import type { Tx } from '../db/schema.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { cancelRecordingInTx, lockMeetingLinks, sameCallOverlap, upsertRecording } from './recordings.ts';
import { parseIcsInThread } from './feed-parser.ts';
import { botRecordingEnabled } from './bot-settings-store.ts';
import { lockRecording } from './bot-recording-store.ts';
import { startLeaseLoop, type LeaseLoop } from '../worker/lease-loop.ts';
import {
  deleteFeed,
  eventsOfFeed,
  feedById,
  feedsOf,
  forgetEvent,
  leaseDueFeeds,
  lockFeed,
  lockWorkspaceFeed,
  noteFeedPolled,
  otherCopyHolds,
  rememberEvent,
  saveEvent,
  upsertFeed,
} from './calendar-store.ts';

/**
 * R1: ICS feed subscriptions. Each poll fetches the feed, reads the next two weeks of events
 * (recurring ones expanded) with ical.js, and reconciles them with what the last poll saw:
 * a new event with a meeting link gets a recording (copies of one meeting share it); a moved one
 * (new start, end or link) has its recording canceled and a new one made; a canceled or deleted one
 * has its recording canceled. Recordings that have started are left alone.
 */

export const FEED_POLL_MS = 5 * 60_000;
const HORIZON_MS = 14 * 24 * 60 * 60_000;
const FETCH_TIMEOUT_MS = 15_000;
const MAX_FEED_BYTES = 5 * 1024 * 1024;

export async function addCalendarFeed(
  deps: MeetingDeps,
  workspaceId: string,
  input: unknown,
  ownerUserId: string | null = null,
) {
  const body = (input ?? {}) as Record<string, unknown>;
  let url: URL | null = null;
  try {
    url = typeof body.url === 'string' ? new URL(body.url.replace(/^webcals?:/i, 'https:')) : null;
  } catch {
    url = null;
  }
  // A calendar address is a secret: it travels over TLS, but to a host the operator named.
  if (!url || !feedSchemeAllowed(deps, url)) {
    throw new AppError(
      ErrorKind.invalidInput,
      'feed.url',
      'url must be an https (or webcal) ICS feed address',
    );
  }
  const internal = egressGuardOf(deps.config).literalRefusal(url);
  if (internal !== null) {
    throw new AppError(
      ErrorKind.invalidInput,
      'feed.url',
      `url must point at a public address: ${internal} (an operator may allow it with VERBATIM_EGRESS_ALLOW)`,
    );
  }
  const row = await upsertFeed(deps.db, workspaceId, url.toString(), ownerUserId);
  return feedView(row);
}

/**
 * A private ICS address is a secret (whoever has it reads the calendar): responses show where it
 * points with its long parts cut, never the whole address.
 */
export function redactFeedUrl(url: string): string {
  try {
    const u = new URL(url);
    const cut = (part: string) => (part.length > 8 ? `${part.slice(0, 3)}…` : part);
    const path = u.pathname.split('/').map(cut).join('/');
    return `${u.protocol}//${u.host}${path}${u.search ? '?…' : ''}`;
  } catch {
    return '…';
  }
}

function feedView(row: {
  id: string;
  url: string;
  created_at: Date;
  last_polled_at?: Date | null;
  last_error?: string | null;
  next_poll_at?: Date;
}) {
  return {
    id: row.id,
    url: redactFeedUrl(row.url),
    createdAt: row.created_at,
    lastPolledAt: row.last_polled_at ?? null,
    lastError: row.last_error ?? null,
    nextPollAt: row.next_poll_at ?? null,
  };
}

/** X1: the workspace's feeds, each with when it was last read and why the last read failed. */
export async function listCalendarFeeds(deps: MeetingDeps, workspaceId: string) {
  return { feeds: (await feedsOf(deps.db, workspaceId)).map(feedView) };
}

/**
 * Unsubscribes a feed: the recordings only its events held and that have not started are
 * canceled (a copy on another calendar, or asked for through the API, keeps its recording).
 */
export async function removeCalendarFeed(deps: MeetingDeps, workspaceId: string, feedId: string) {
  return deps.db.transaction().execute(async (trx) => {
    const feed = isUuid(feedId) ? await lockWorkspaceFeed(trx, workspaceId, feedId) : undefined;
    if (!feed) throw new AppError(ErrorKind.notFound, 'feed.not_found', `no calendar feed ${feedId}`);
    const events = await eventsOfFeed(trx, feedId);
    let canceled = 0;
    for (const k of events) {
      if (await dropCopy(deps, trx, feedId, k, `user:${workspaceId}`)) canceled++;
    }
    await deleteFeed(trx, feedId);
    return { id: feedId, canceled };
  });
}

/** How long a poll holds its feed: its fetch, its parse and its writes, with room to spare. */
const FEED_LEASE_MS = 2 * 60_000;

/**
 * F6: calendar polling in a loop of its own beside the sweeps: up to `VERBATIM_FEED_CONCURRENCY`
 * feeds read at once per worker, up to `VERBATIM_FEED_WORKSPACE_CONCURRENCY` of one workspace
 * across workers, leased round-robin across workspaces (leaseDueFeeds). A workspace whose feeds
 * hang until their timeout delays only its own.
 */
export function startCalendarLoop(deps: MeetingDeps, options: { tickMs: number }): LeaseLoop {
  return startLeaseLoop<string>({
    name: 'calendar-feeds',
    tickMs: options.tickMs,
    concurrency: deps.config.bots.feedConcurrency,
    log: deps.log,
    lease: (free) => leaseDueFeeds(deps.db, free, deps.config.bots.feedWorkspaceConcurrency, FEED_LEASE_MS),
    run: async (id) => {
      await pollFeed(deps, id);
    },
  });
}

export async function pollFeed(
  deps: MeetingDeps,
  feedId: string,
): Promise<{ created: number; canceled: number }> {
  const feed = await feedById(deps.db, feedId);
  const now = new Date();
  let events: CalendarOccurrence[];
  try {
    const text = await fetchFeed(deps, feed.url);
    // S8: parsed in a thread under the feed budget; over it, the feed is refused whole.
    const until = new Date(now.getTime() + HORIZON_MS);
    events = await parseIcsInThread(text, now, until, deps.config.bots.feedBudget, deps.log);
  } catch (err) {
    // A feed that cannot be read changes nothing: its events are not taken as deleted.
    await noteFeedPolled(deps.db, feedId, {
      error: feedErrorText(err),
      nextPollAt: new Date(now.getTime() + FEED_POLL_MS),
    });
    deps.log.warn({ feedId, err: String(err) }, 'calendar feed could not be read');
    return { created: 0, canceled: 0 };
  }
  const actor = `calendar:${feedId}`;
  return deps.db.transaction().execute(async (trx) => {
    let created = 0;
    let canceled = 0;
    // The feed row first: an unsubscribe (which locks it, then recordings) waits for this poll or
    // this poll for it, never each for the other.
    const live = await lockFeed(trx, feedId);
    if (!live) return { created: 0, canceled: 0 };
    const enabled = await botRecordingEnabled(trx, feed.workspace_id);
    const known = await eventsOfFeed(trx, feedId);
    const byUid = new Map(known.map((k) => [k.uid, k]));
    const seen = new Set<string>();
    // Every link this poll may make, move or release a recording on — new, moved from and dropped —
    // locked up front and in one order, so that neither another feed's poll nor the API can
    // deadlock with it (R10: one bot per call).
    const touched = new Set<string>();
    const listed = new Set<string>();
    for (const e of events) {
      if (e.canceled || !e.meetingUrl) continue;
      listed.add(e.uid);
      const prior = byUid.get(e.uid);
      const unchanged =
        prior &&
        prior.start_at.getTime() === e.start.getTime() &&
        prior.end_at.getTime() === e.end.getTime() &&
        canonicalLink(prior.meeting_url) === e.meetingUrl;
      if (unchanged) continue;
      touched.add(e.meetingUrl);
      const before = prior && canonicalLink(prior.meeting_url);
      if (before) touched.add(before);
    }
    for (const k of known) {
      const link = listed.has(k.uid) ? null : canonicalLink(k.meeting_url);
      if (link) touched.add(link);
    }
    await lockMeetingLinks(trx, feed.workspace_id, touched);
    for (const e of events) {
      if (e.canceled || !e.meetingUrl) continue;
      seen.add(e.uid);
      const prior = byUid.get(e.uid);
      // Links seen before the canonical form existed compare in it too.
      const sameLink = prior ? canonicalLink(prior.meeting_url) === e.meetingUrl : false;
      const same =
        prior &&
        prior.start_at.getTime() === e.start.getTime() &&
        prior.end_at.getTime() === e.end.getTime() &&
        sameLink;
      if (same) continue;
      // A new start or link is a different bot; only a new end keeps the same recording.
      const rescheduled = prior && (prior.start_at.getTime() !== e.start.getTime() || !sameLink);
      if (rescheduled && prior.recording_id) {
        const released = await releaseCopy(
          deps,
          trx,
          { feedId, uid: e.uid, recordingId: prior.recording_id },
          actor,
        );
        if (released === 'canceled') canceled++;
        if (released === 'started') {
          // Its bot is in the call already: a second bot for the moved copy could join the same
          // call. The copy keeps its recording; only what the feed says is remembered.
          await rememberEvent(trx, feedId, e.uid, { start: e.start, end: e.end, meetingUrl: e.meetingUrl });
          continue;
        }
      }
      if (!enabled) {
        // Bot recording is off for the workspace: nothing is made, and nothing remembered, so the
        // first poll after it is switched on makes the recordings.
        await forgetEvent(trx, feedId, e.uid);
        continue;
      }
      // U4: the feed's subscriber owns the meetings its bots record.
      const event = {
        title: e.title,
        start: e.start,
        end: e.end,
        meetingUrl: e.meetingUrl,
        ownerUserId: feed.owner_user_id,
      };
      // R10: a time overlapping a recording of the same link that is not over is that call.
      const overlap = await sameCallOverlap(deps, trx, feed.workspace_id, event, actor, false);
      const { recording, duplicate } =
        'kept' in overlap ? overlap.kept : await upsertRecording(deps, trx, feed.workspace_id, event, actor);
      if (!duplicate) created++;
      await saveEvent(trx, feedId, e.uid, recording.id, event);
    }
    // Gone from the feed, or canceled in it, and still in the future: cancel its recording.
    for (const k of known) {
      if (seen.has(k.uid) || k.end_at <= now) continue;
      if (await dropCopy(deps, trx, feedId, k, actor)) canceled++;
    }
    await noteFeedPolled(trx, feedId, { polledAt: now, nextPollAt: new Date(now.getTime() + FEED_POLL_MS) });
    return { created, canceled };
  });
}

/**
 * A feed's copy of a meeting is gone or has moved. The recording is canceled only when no other copy
 * holds it: another attendee's calendar (another feed, or another event of this one) or the API.
 * The recording row is locked first, so two feeds dropping their copies at once serialize and the
 * second sees the first's copy gone.
 */
async function releaseCopy(
  deps: MeetingDeps,
  trx: Tx,
  copy: { feedId: string; uid: string; recordingId: string },
  actor: string,
): Promise<'canceled' | 'held' | 'started'> {
  const recording = await lockRecording(trx, copy.recordingId);
  if (!recording || recording.requested_by_api) return 'held';
  if (STARTED.has(recording.status)) return 'started';
  if (await otherCopyHolds(trx, copy)) return 'held';
  return (await cancelRecordingInTx(deps, trx, copy.recordingId, actor)) !== null ? 'canceled' : 'held';
}

/** Forgets a feed's copy of a meeting; true when that canceled the recording. */
async function dropCopy(
  deps: MeetingDeps,
  trx: Tx,
  feedId: string,
  copy: { uid: string; recording_id: string | null },
  actor: string,
): Promise<boolean> {
  const released = copy.recording_id
    ? await releaseCopy(deps, trx, { feedId, uid: copy.uid, recordingId: copy.recording_id }, actor)
    : 'held';
  await forgetEvent(trx, feedId, copy.uid);
  return released === 'canceled';
}

const STARTED = new Set(['joining', 'in_call', 'recording', 'processing']);

function canonicalLink(stored: string | null): string | null {
  if (!stored) return null;
  try {
    return canonicalMeetingUrl(new URL(stored));
  } catch {
    return stored;
  }
}

class FeedHttpError extends Error {}

/**
 * S5: a feed is fetched through the egress guard (its name resolved and checked, the checked
 * address connected to, every redirect checked again and held to the same scheme rule), 5 MB at
 * most. Only the status line's category is kept of a refusal; the body is never echoed.
 */
async function fetchFeed(deps: MeetingDeps, url: string): Promise<string> {
  const res = await egressGuardOf(deps.config).request(url, {
    timeoutMs: FETCH_TIMEOUT_MS,
    maxBytes: MAX_FEED_BYTES,
    maxRedirects: 5,
    headers: { accept: 'text/calendar', 'user-agent': 'verbatim-calendar' },
    checkUrl: (u) => (feedSchemeAllowed(deps, u) ? null : 'a redirect to a plain-http address'),
  });
  if (res.status < 200 || res.status >= 300) {
    throw new FeedHttpError(`${httpStatusCategory(res.status)}: the feed answered HTTP ${res.status}`);
  }
  return res.body.toString('utf8');
}

/** https always; plain http only to the hosts an operator names. */
function feedSchemeAllowed(deps: MeetingDeps, url: URL): boolean {
  return (
    url.protocol === 'https:' ||
    (url.protocol === 'http:' && deps.config.bots.feedPlainHttpHosts.includes(url.hostname.toLowerCase()))
  );
}

/** What a tenant sees of a feed that could not be read: a category and our words, never its body. */
function feedErrorText(err: unknown): string {
  if (err instanceof FeedHttpError) return err.message;
  if (err instanceof EgressError) return egressFailureText(err);
  if (err instanceof AppError && err.code === INVALID_CALENDAR) return `invalid_calendar: ${err.message}`;
  if (err instanceof AppError) return `${err.code}: ${err.message}`;
  return 'invalid_calendar: the feed could not be read as a calendar';
}
