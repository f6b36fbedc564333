import { AppError, ErrorKind } from '../domain/errors.ts';
import { BOT_RECORDING_FINISHED, BotRecordingStatus, JobKind } from '../domain/status.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { Selectable } from 'kysely';
import type { BotRecordingsTable, Tx } from '../db/schema.ts';
import { withTenant } from '../db/tenant.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import { canonicalMeetingUrl, MEETING_PLATFORM_NAMES, meetingPlatformOf } from '../domain/meeting-url.ts';
import type { BotDeps } from './provider.ts';
import { requestBotScheduling } from './resume.ts';
import { enqueueBotDelete } from './bot-jobs.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';
import {
  hasLiveTwin,
  insertRecordingInSlot,
  listRecordings,
  liveRecordingInSlot,
  lockOverlappingRecordings,
  lockRecording,
  moveBotRecording,
  notStartedRecordings,
  recordBotRecordingCreated,
  recordingById,
  recordingsInSlot,
  setRecordingEnd,
  setRequestedByApi,
  workspaceRecording,
  type RecordingFilter,
} from './bot-recording-store.ts';
import { forgetEventsOfRecording, feedCopyHolds, heldByFeeds, pollFeedsNow } from './calendar-store.ts';
import {
  apiEventRecording,
  botRecordingEnabled,
  lockKey,
  readBotRecordingEnabled,
  saveApiEvent,
  setBotRecordingFlag,
} from './bot-settings-store.ts';

/**
 * R1: a calendar event created through the API becomes one recording (two copies of one meeting,
 * same URL and start, are one recording) and is scheduled through the event path (R6). Canceling
 * keeps the bot id and deletes the bot through a retried job (R7). R10: with an `eventId`, the same
 * id posted again with a new time or link moves its recording (the old one canceled, its bot
 * deleted, one recording at the new time) instead of adding a second one. Without an id, an event
 * whose time overlaps a recording of the same link that is not over is the same call: it replaces
 * that recording if only the API asked for it and its bot has not joined, and is otherwise that
 * recording (`replaced` names a recording canceled in favour of this one).
 */
export async function createCalendarEvent(
  deps: MeetingDeps,
  workspaceId: string,
  input: unknown,
  ownerUserId: string | null = null,
) {
  const body = (input ?? {}) as Record<string, unknown>;
  const title =
    typeof body.title === 'string' && body.title.trim() ? body.title.trim().slice(0, 300) : 'Meeting';
  const start = typeof body.start === 'string' ? new Date(body.start) : null;
  const end = typeof body.end === 'string' ? new Date(body.end) : null;
  if (!start || Number.isNaN(start.getTime()) || !end || Number.isNaN(end.getTime()) || end <= start) {
    throw new AppError(
      ErrorKind.invalidInput,
      'event.times',
      'start and end must be ISO times, end after start',
    );
  }
  if (end.getTime() <= Date.now()) {
    throw new AppError(
      ErrorKind.invalidInput,
      'event.ended',
      `the event ended at ${end.toISOString()}; a bot can only join a meeting still to come`,
    );
  }
  let url: URL | null = null;
  try {
    url = typeof body.meetingUrl === 'string' ? new URL(body.meetingUrl) : null;
  } catch {
    url = null;
  }
  if (!url || url.protocol !== 'https:') {
    throw new AppError(
      ErrorKind.invalidInput,
      'event.meeting_url',
      'meetingUrl must be an https meeting link',
    );
  }
  if (!meetingPlatformOf(url)) {
    throw new AppError(
      ErrorKind.invalidInput,
      'event.meeting_url',
      `meetingUrl is not a link a meeting bot can join; it must be a ${MEETING_PLATFORM_NAMES.join(', ')} meeting`,
    );
  }
  const eventId = body.eventId;
  if (
    eventId !== undefined &&
    eventId !== null &&
    (typeof eventId !== 'string' || !eventId.trim() || eventId.length > 200)
  ) {
    throw new AppError(
      ErrorKind.invalidInput,
      'event.event_id',
      'eventId must be a string of at most 200 characters',
    );
  }
  if (body.record === false) {
    return { recording: null, duplicate: false, replaced: null, skipped: 'event_not_recorded' };
  }
  const meetingUrl = canonicalMeetingUrl(url);
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    if (!(await botRecordingEnabled(trx, workspaceId))) {
      return {
        recording: null,
        duplicate: false,
        replaced: null,
        skipped: 'workspace_bot_recording_disabled',
      };
    }
    const event = {
      title,
      start,
      end,
      meetingUrl,
      requestedByApi: true,
      overrideUserCancel: body.record === true,
      ownerUserId,
    };
    let replaced: string | null = null;
    // Creators of one event id, then of one link, are serialized: two requests at once must not
    // both find no recording and make one each. Lock order: the event id, then every link this
    // request may touch (the old one of a moved event too), sorted, then recording rows.
    let mapped: { recording_id: string; meeting_url: string } | undefined;
    if (typeof eventId === 'string') {
      await lockKey(trx, `event:${workspaceId}:${eventId}`);
      mapped = await apiEventRecording(trx, workspaceId, eventId);
    }
    await lockMeetingLinks(trx, workspaceId, [meetingUrl, ...(mapped ? [mapped.meeting_url] : [])]);
    if (typeof eventId === 'string') {
      if (mapped) {
        const moved = await moveApiEvent(deps, trx, mapped.recording_id, event, actor);
        if ('kept' in moved) return { ...moved.kept, replaced: null, skipped: null };
        replaced = moved.released;
      }
    }
    const overlap = await sameCallOverlap(deps, trx, workspaceId, event, actor, true);
    let result: { recording: Selectable<BotRecordingsTable>; duplicate: boolean };
    if ('kept' in overlap) {
      result = overlap.kept;
    } else {
      replaced ??= overlap.released;
      result = await upsertRecording(deps, trx, workspaceId, event, actor);
    }
    if (typeof eventId === 'string') {
      await saveApiEvent(trx, workspaceId, eventId, result.recording.id);
    }
    return { ...result, replaced, skipped: null };
  });
}

type Released = { released: string | null };
type Kept = { kept: { recording: Selectable<BotRecordingsTable>; duplicate: boolean } };

/**
 * R10: an API event posted again under its id. Unchanged (or only its end moved): the recording it
 * has. Moved to another time or link: its recording is released (canceled, its bot deleted, unless
 * a calendar feed's copy still holds it) and null is returned so the caller makes the one at the new
 * time. A recording whose bot is already in the call keeps the event: a meeting under way is not
 * moved.
 */
async function moveApiEvent(
  deps: MeetingDeps,
  trx: Tx,
  recordingId: string,
  e: { start: Date; end: Date; meetingUrl: string },
  actor: string,
): Promise<Released | Kept> {
  const old = await lockRecording(trx, recordingId);
  if (!old || old.status === 'canceled') return { released: null };
  if (old.meeting_url === e.meetingUrl && old.join_at.getTime() === e.start.getTime()) {
    return { kept: await holdExisting(trx, old, { end: e.end, requestedByApi: true }) };
  }
  if (old.status !== 'pending' && old.status !== 'scheduled') {
    // Its bot has joined (or the recording is over). A new time in the same call is that call; a
    // time elsewhere is a meeting still to record: the event moves to a new recording, and the one
    // under way finishes on its own.
    const sameCall =
      !FINISHED.includes(old.status) &&
      old.meeting_url === e.meetingUrl &&
      old.join_at < e.end &&
      old.ends_at > e.start;
    if (sameCall) return { kept: { recording: old, duplicate: true } };
    await setRequestedByApi(trx, old.id, false);
    return { released: null };
  }
  return { released: (await releaseApiRecording(deps, trx, old.id, actor)) ? old.id : null };
}

/** Serializes everything that makes or moves a recording of one meeting link in a workspace. */
export async function lockMeetingLink(trx: Tx, workspaceId: string, meetingUrl: string): Promise<void> {
  await lockKey(trx, `link:${workspaceId}:${meetingUrl}`);
}

/** Several links' locks, in one order for every caller (no two transactions wait on each other). */
export async function lockMeetingLinks(trx: Tx, workspaceId: string, links: Iterable<string>): Promise<void> {
  for (const link of [...new Set(links)].sort()) await lockMeetingLink(trx, workspaceId, link);
}

/**
 * The API no longer asks for this recording: canceled (its bot deleted) unless a calendar feed's
 * copy still holds it. True when it was canceled.
 */
async function releaseApiRecording(deps: MeetingDeps, trx: Tx, id: string, actor: string): Promise<boolean> {
  await setRequestedByApi(trx, id, false);
  if (await feedCopyHolds(trx, id)) return false;
  return (await cancelRecordingInTx(deps, trx, id, actor)) !== null;
}

/** Recordings that are over (or canceled) hold no call. */
const FINISHED = [...BOT_RECORDING_FINISHED];

/**
 * R10: one bot per call. An event at another start whose time overlaps a recording of the same
 * link that is not over would send a second bot into the same call. From the API (`mayRelease`),
 * a recording only the API asked for whose bot has not joined yet is released (the event moved:
 * the new one replaces it); otherwise — under way, held by a calendar feed, or the event comes from
 * a feed — that recording is this event's too. The caller holds the link's lock.
 */
export async function sameCallOverlap(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  e: { start: Date; end: Date; meetingUrl: string },
  actor: string,
  mayRelease: boolean,
): Promise<Released | Kept> {
  // A recording at exactly this link and start is this event's own (the upsert finds it): an
  // unchanged copy, or one whose end moved, is never handed a neighbour.
  if (await liveRecordingInSlot(trx, workspaceId, e.meetingUrl, e.start)) return { released: null };
  const overlapping = await lockOverlappingRecordings(trx, workspaceId, e, FINISHED);
  const feedHeld = await heldByFeeds(
    trx,
    overlapping.map((r) => r.id),
  );
  const held = overlapping.find(
    (r) =>
      !mayRelease ||
      !r.requested_by_api ||
      feedHeld.has(r.id) ||
      (r.status !== 'pending' && r.status !== 'scheduled'),
  );
  if (held) {
    return { kept: await holdExisting(trx, held, { end: held.ends_at, requestedByApi: mayRelease }) };
  }
  let released: string | null = null;
  for (const r of overlapping) {
    if (await releaseApiRecording(deps, trx, r.id, actor)) released ??= r.id;
  }
  return { released };
}

/** R1: the workspace's bot setting, as GET /v1/bot-settings shows it. */
export async function getBotSettings(deps: MeetingDeps, workspaceId: string): Promise<{ enabled: boolean }> {
  return { enabled: await readBotRecordingEnabled(deps.db, workspaceId) };
}

/**
 * R1: switches bot recording for a workspace. Off: every recording that has not started is
 * canceled (its bot deleted) and forgotten by the feeds, so switching back on lets the next poll
 * make them again; on: the workspace's feeds are polled at once.
 */
export async function setBotRecordingEnabled(
  deps: MeetingDeps,
  workspaceId: string,
  input: unknown,
): Promise<{ enabled: boolean; canceled: number }> {
  const body = (input ?? {}) as Record<string, unknown>;
  if (typeof body.enabled !== 'boolean') {
    throw new AppError(ErrorKind.invalidInput, 'settings.enabled', 'enabled must be true or false');
  }
  const enabled = body.enabled;
  return deps.db.transaction().execute(async (trx) => {
    // Exclusive with the share lock event creation takes: no recording slips in while switching off.
    await setBotRecordingFlag(trx, workspaceId, enabled);
    let canceled = 0;
    if (!enabled) {
      for (const id of await notStartedRecordings(trx, workspaceId)) {
        if (await cancelRecordingInTx(deps, trx, id, `user:${workspaceId}`)) canceled++;
        await forgetEventsOfRecording(trx, id);
      }
    } else {
      await pollFeedsNow(trx, workspaceId);
    }
    return { enabled, canceled };
  });
}

export async function getBotRecording(deps: MeetingDeps, workspaceId: string, id: string) {
  // S10: read as the tenant (src/db/tenant.ts), the second wall behind the workspace filter.
  const row = isUuid(id)
    ? await withTenant(deps.db, workspaceId, (trx) => workspaceRecording(trx, workspaceId, id))
    : undefined;
  if (!row) throw new AppError(ErrorKind.notFound, 'recording.not_found', `no bot recording ${id}`);
  return row;
}

/** Failure codes as they were spelled before they were all dotted, still accepted in filters. */
const OLD_FAILURE_CODES: Record<string, string> = {
  bot_never_scheduled: 'bot.never_scheduled',
  bot_schedule_outcome_unknown: 'bot.schedule_outcome_unknown',
  canceled_by_user: 'bot.canceled_by_user',
};

const RECORDING_STATUSES: readonly string[] = Object.values(BotRecordingStatus);

/**
 * GET /v1/bot-recordings: a workspace's recordings, newest meeting first, filtered by status,
 * failure code, meeting and meeting time (`from` ≤ join time < `to`), paginated by cursor.
 */
export async function listBotRecordings(
  deps: MeetingDeps,
  workspaceId: string,
  raw: Record<string, unknown>,
) {
  const bad = (field: string, message: string) =>
    new AppError(ErrorKind.invalidInput, `list.${field}`, message);
  const query: Record<string, string | undefined> = {};
  for (const [field, value] of Object.entries(raw)) {
    if (value === undefined || typeof value === 'string') query[field] = value;
    // `status=a&status=b` is the same as `status=a,b`; any other field given twice is ambiguous.
    else if (field === 'status' && Array.isArray(value)) query[field] = value.map(String).join(',');
    else throw bad(field, `${field} must be given once`);
  }
  const limit = query.limit === undefined ? 50 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw bad('limit', 'limit must be 1 to 200');
  const filter: RecordingFilter = {};
  if (query.status !== undefined) {
    const statuses = query.status.split(',') as BotRecordingStatus[];
    if (statuses.some((st) => !RECORDING_STATUSES.includes(st)))
      throw bad('status', `status must be any of ${RECORDING_STATUSES.join(', ')}`);
    filter.statuses = statuses;
  }
  if (query.failureCode !== undefined) {
    const code = OLD_FAILURE_CODES[query.failureCode] ?? query.failureCode;
    filter.failureCode = code;
  }
  if (query.meetingId !== undefined) {
    if (!isUuid(query.meetingId)) throw bad('meetingId', 'meetingId must be a meeting id');
    filter.meetingId = query.meetingId;
  }
  for (const [field, op] of [
    ['from', '>='],
    ['to', '<'],
  ] as const) {
    const text = query[field];
    if (text === undefined) continue;
    const at = new Date(text);
    if (Number.isNaN(at.getTime())) throw bad(field, `${field} must be an ISO time`);
    filter[op === '>=' ? 'from' : 'to'] = at;
  }
  if (query.cursor !== undefined) {
    let before: { at: Date; id: string };
    try {
      const [at, id] = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8')) as [
        string,
        string,
      ];
      before = { at: new Date(at), id };
      if (Number.isNaN(before.at.getTime()) || !isUuid(id)) throw new Error('bad cursor');
    } catch {
      throw bad('cursor', 'cursor is not one this API returned');
    }
    filter.before = before;
  }
  // S10: run as the tenant (src/db/tenant.ts), the second wall behind the workspace filter.
  const rows = await withTenant(deps.db, workspaceId, (trx) =>
    listRecordings(trx, workspaceId, filter, limit),
  );
  const last = rows.length === limit ? rows.at(-1) : undefined;
  return {
    recordings: rows.map(recordingView),
    nextCursor: last
      ? Buffer.from(JSON.stringify([last.join_at.toISOString(), last.id])).toString('base64url')
      : null,
  };
}

/** Cancels a recording that has not started: its bot (if any) is deleted by a retried job. */
export async function cancelBotRecording(deps: MeetingDeps, workspaceId: string, id: string) {
  await getBotRecording(deps, workspaceId, id);
  return deps.db.transaction().execute(async (trx) => {
    const row = await cancelRecordingInTx(deps, trx, id, `user:${workspaceId}`, true);
    if (!row) {
      const now = (await recordingById(trx, id))!;
      throw new AppError(ErrorKind.conflict, 'recording.not_cancelable', `the recording is ${now.status}`);
    }
    return row;
  });
}

const USER_CANCELED = 'bot.canceled_by_user';

/**
 * In the caller's transaction; null when the recording had already started or ended.
 * `byUser`: a person canceled this meeting's recording; copies of the meeting posted or polled later
 * do not bring it back (only an explicit `"record": true` does).
 */
export async function cancelRecordingInTx(
  deps: MeetingDeps,
  trx: Tx,
  id: string,
  actor: string,
  byUser = false,
) {
  const row = await lockRecording(trx, id);
  if (!row) throw new Error(`no bot recording ${id}`);
  if (row.status !== 'pending' && row.status !== 'scheduled') return null;
  const updated = await moveBotRecording(trx, id, BotRecordingStatus.canceled, {
    actor,
    reason: byUser ? 'canceled by a user' : 'no longer wanted (moved or removed from its calendar)',
    set: byUser ? { failure_code: USER_CANCELED, failure_message: 'canceled by a user' } : {},
  });
  if (!updated) return null;
  // With a bot id, that bot is deleted; with an attempt whose answer never came, the provider may
  // have made a bot we never heard of: the job finds it by the recording's metadata (one list call).
  if (row.bot_id || row.schedule_attempted_at) {
    await enqueueBotDelete(
      deps,
      trx,
      { workspaceId: row.workspace_id, recordingId: id, botId: row.bot_id },
      actor,
    );
  }
  return updated;
}

/** A recording for an event, or the existing one for the same meeting (copies on two calendars). */
export async function upsertRecording(
  deps: MeetingDeps,
  trx: Tx,
  workspaceId: string,
  e: {
    title: string;
    start: Date;
    end: Date;
    meetingUrl: string;
    requestedByApi?: boolean;
    /** `"record": true` on the API: record it even if a user canceled this meeting's recording. */
    overrideUserCancel?: boolean;
    /** U4: who asked for it; its meeting's owner. */
    ownerUserId?: string | null;
  },
  actor: string,
) {
  await lockMeetingLink(trx, workspaceId, e.meetingUrl);
  if (!e.overrideUserCancel) {
    const slot = await recordingsInSlot(trx, workspaceId, e.meetingUrl, e.start);
    const userCanceled = slot.find((r) => r.status === 'canceled' && r.failure_code === USER_CANCELED);
    if (userCanceled && !slot.some((r) => r.status !== 'canceled')) {
      return { recording: userCanceled, duplicate: true };
    }
  }
  // The slot's holder can be canceled between our insert's conflict and our read of it: then the
  // slot is free again, and the insert is tried once more.
  for (let round = 0; ; round++) {
    const inserted = await insertRecordingInSlot(trx, {
      workspaceId,
      meetingUrl: e.meetingUrl,
      start: e.start,
      end: e.end,
      title: e.title,
      requestedByApi: e.requestedByApi ?? false,
      ownerUserId: e.ownerUserId ?? null,
    });
    if (inserted) {
      await recordBotRecordingCreated(trx, inserted, actor);
      await requestBotScheduling(deps, trx, inserted, actor);
      return { recording: inserted, duplicate: false };
    }
    const existing = await liveRecordingInSlot(trx, workspaceId, e.meetingUrl, e.start, true);
    if (existing) return holdExisting(trx, existing, e);
    if (round >= 2) {
      throw new AppError(ErrorKind.transient, 'recording.slot_contended', 'the meeting slot kept changing');
    }
  }
}

async function holdExisting(
  trx: Tx,
  existing: Selectable<BotRecordingsTable>,
  e: { end: Date; requestedByApi?: boolean },
) {
  if (e.requestedByApi && !existing.requested_by_api) {
    await setRequestedByApi(trx, existing.id, true);
  }
  if (
    existing.ends_at.getTime() !== e.end.getTime() &&
    (existing.status === 'pending' || existing.status === 'scheduled')
  ) {
    // Only the end moved: the bot joins at the same time; nothing to reschedule.
    await setRecordingEnd(trx, existing.id, e.end);
  }
  return { recording: existing, duplicate: true };
}

/** How long after a create was sent it may still be committed at the provider (a slow answer). */
const CREATE_SETTLE_MS = 5 * 60_000;
/** Provider statuses of a bot whose call is over: nothing to delete or take out. */
const FINISHED_BOT_STATUSES = new Set(['call_ended', 'recording_done', 'done', 'fatal', 'analysis_done']);

export function deleteBotJob(
  deps: MeetingDeps,
  bots: BotDeps | null,
): JobDefinition<typeof JobKind.deleteBot> {
  return {
    kind: JobKind.deleteBot,
    run: async (ctx) => {
      if (!bots)
        throw new AppError(ErrorKind.permanent, 'bot.not_configured', 'no bot provider is configured');
      const payload = payloadOf(ctx.job, JobKind.deleteBot);
      let botIds: string[];
      let settlesAt = 0;
      if (payload.botId !== null) {
        botIds = [payload.botId];
      } else {
        const { recordingId } = payload;
        const found = await bots.budget.guard('bot.list', 10_000, () =>
          bots.provider.listBots({ metadata: { verbatim_recording: recordingId } }),
        );
        if (!found.ok) {
          await ctx.requeue(30_000, 'provider budget spent');
          return;
        }
        // Only a bot that may still join or is in the call needs deleting; a finished one is over.
        botIds = found.value.bots.filter((b) => !FINISHED_BOT_STATUSES.has(b.status)).map((b) => b.id);
        // A create whose answer never came may still be committed at the provider after this
        // list: until that can no longer happen, the job looks again (a bot made later joins a
        // call nobody asked for).
        const row = await recordingById(deps.db, recordingId);
        settlesAt = (row?.schedule_attempted_at?.getTime() ?? 0) + CREATE_SETTLE_MS;
      }
      for (const botId of botIds) {
        let done: { ok: boolean };
        try {
          done = await bots.budget.guard('bot.delete', 10_000, () => bots.provider.deleteBot(botId));
        } catch (err) {
          // Gone already (deleted elsewhere, or by an earlier run of this job): nothing to do.
          if (err instanceof AppError && err.code === 'bot.not_found') continue;
          if (!(err instanceof AppError && err.code === 'bot.already_dispatched')) throw err;
          // Canceled as the bot was joining: it can no longer be deleted, so it is taken out of
          // the call instead, and the recording it held is reopened so that what the bot recorded
          // in between is imported when its `done` arrives (nothing recorded is dropped).
          try {
            done = await bots.budget.guard('bot.leave_call', 10_000, () => bots.provider.leaveCall(botId));
          } catch (leaveErr) {
            // Out of the call already (it ended meanwhile): nothing left to stop.
            if (!(leaveErr instanceof AppError && leaveErr.code === 'bot.not_in_call')) throw leaveErr;
            done = { ok: true };
          }
          if (done.ok) await reopenForImport(deps, payload.recordingId, botId);
        }
        if (!done.ok) {
          await ctx.requeue(30_000, 'provider budget spent');
          return;
        }
      }
      if (settlesAt > Date.now()) {
        await ctx.requeue(settlesAt - Date.now() + 1_000, 'a create may still be in flight');
        return;
      }
      await ctx.complete();
    },
  };
}

/** A canceled recording whose bot got into the call anyway: it goes on to import what was recorded. */
async function reopenForImport(deps: MeetingDeps, recordingId: string, botId: string): Promise<void> {
  // A bot never attached (its create's answer was lost before the cancel) becomes the recording's.
  await deps.db.transaction().execute(async (trx) => {
    // Unless another recording of the same call went on without it (a move made a new one).
    if (await hasLiveTwin(trx, recordingId)) return;
    await moveBotRecording(trx, recordingId, BotRecordingStatus.joining, {
      actor: 'worker',
      reason: 'its bot got into the call after the cancel: what it records is imported',
      when: (r) => r.status === BotRecordingStatus.canceled && (r.bot_id === botId || r.bot_id === null),
      set: { bot_id: botId, failure_code: null, failure_message: null },
    });
  });
}

/**
 * Stops a recording: one that has not started is canceled (its bot deleted); one whose bot is
 * joining or in the call has its bot taken out of the call by a retried job, and what was recorded
 * goes on to be imported and transcribed like any other recording.
 */
export async function stopBotRecording(deps: MeetingDeps, workspaceId: string, id: string) {
  await getBotRecording(deps, workspaceId, id);
  const actor = `user:${workspaceId}`;
  return deps.db.transaction().execute(async (trx) => {
    const canceled = await cancelRecordingInTx(deps, trx, id, actor, true);
    if (canceled) return { recording: canceled, leaving: false };
    const row = (await recordingById(trx, id))!;
    if (!['joining', 'in_call', 'recording'].includes(row.status) || !row.bot_id) {
      throw new AppError(ErrorKind.conflict, 'recording.not_running', `the recording is ${row.status}`);
    }
    await createJob(
      deps,
      trx,
      JobKind.leaveBot,
      { recordingId: id, botId: row.bot_id },
      { workspaceId: row.workspace_id },
      actor,
    );
    return { recording: row, leaving: true };
  });
}

export function leaveBotJob(deps: MeetingDeps, bots: BotDeps | null): JobDefinition<typeof JobKind.leaveBot> {
  return {
    kind: JobKind.leaveBot,
    run: async (ctx) => {
      if (!bots)
        throw new AppError(ErrorKind.permanent, 'bot.not_configured', 'no bot provider is configured');
      const { botId } = payloadOf(ctx.job, JobKind.leaveBot);
      const done = await bots.budget.guard('bot.leave_call', 10_000, () => bots.provider.leaveCall(botId));
      if (!done.ok) {
        await ctx.requeue(30_000, 'provider budget spent');
        return;
      }
      await ctx.complete();
    },
  };
}

export function recordingView(r: {
  id: string;
  title: string;
  meeting_url: string;
  join_at: Date;
  ends_at: Date;
  status: string;
  bot_id: string | null;
  failure_code: string | null;
  failure_message: string | null;
  meeting_id: string | null;
  last_error?: string | null;
}) {
  return {
    id: r.id,
    title: r.title,
    meetingUrl: r.meeting_url,
    joinAt: r.join_at,
    endsAt: r.ends_at,
    status: r.status,
    botId: r.bot_id,
    failure: r.failure_code ? { code: r.failure_code, message: r.failure_message } : null,
    meetingId: r.meeting_id,
    /** Why the provider refused or failed the last create, while the recording waits for a retry. */
    lastError: r.last_error ?? null,
  };
}
