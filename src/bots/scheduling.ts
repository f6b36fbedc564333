import { createHash } from 'node:crypto';
import type { Db } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { BotRecordingStatus } from '../domain/status.ts';
import type { Logger } from '../log.ts';
import type { Bot, BotProvider, ListBotsQuery } from '../ports.ts';
import type { RateBudget } from './rate-budget-store.ts';
import {
  lockRecording,
  markScheduleAttempt,
  moveBotRecording,
  noteRecordingError,
  pendingWithoutBot,
  recordingById,
  stillWithoutBot,
  unscheduledRecordings,
} from './bot-recording-store.ts';

/**
 * R3–R5: scheduling a recording's bot at the provider, and recovering rows whose outcome is not
 * known, without ever leaving two bots in one call and without spending the installation's shared
 * provider budget on lists it does not need.
 *
 *   schedule   the attempt marker and a deterministic idempotency key (a hash of the scheduling
 *              inputs) are committed before the create call; the row's status is checked again
 *              right before the call; the bot id is written back after it.
 *   recover    a pending row never attempted is scheduled (no list call). An attempt within the
 *              trust window (below the provider's one-hour key retention) with unchanged inputs, for
 *              a meeting not yet over, is re-sent with its stored key: the provider returns the
 *              same bot (no list call). Otherwise the provider is asked which bots it holds for the
 *              row, in every status (R9: a bot that already recorded and is `done` is found too,
 *              also after the meeting ended): one found is attached (and its status applied),
 *              extras are deleted, none found is scheduled again if the meeting is still ahead —
 *              but only on a complete answer: a truncated list authorizes nothing.
 *   give up    a meeting that ended with no attempt is `bot.never_scheduled`; an attempt whose
 *              meeting ended is `bot.schedule_outcome_unknown` once the provider's complete answer
 *              says it holds no bot for it, or when the lookback ends (R5).
 *
 * One recording is scheduled by its own `schedule-bot` job (the event path, R6): its failures fail
 * the job's attempt, so the job's backoff (honouring Retry-After) drives the next try with the same
 * key. The backstop recovers a workspace's other rows, and leaves a row with an active job alone.
 */

export const BotEndpoint = { create: 'bot.create', list: 'bot.list', delete: 'bot.delete' } as const;

export interface BotSchedulingDeps {
  db: Db;
  provider: BotProvider;
  budget: RateBudget;
  log: Logger;
  settings: {
    /** Re-send with the stored key only this soon after the attempt (default 55 min < 60 min retention). */
    trustWindowMs: number;
    /** Unresolved attempts older than this are given up (default 7 days). */
    lookbackMs: number;
    /** Pages one recovery run may list before it counts the list as truncated. */
    maxListPages: number;
    /** How long a call may wait for a slot in the shared budget before the run stops. */
    budgetWaitMs: number;
  };
  now?: () => Date;
  /**
   * Deletes a surplus bot; production enqueues a retried `delete-bot` job (src/bots/resume.ts), so a
   * bot found surplus is never forgotten when the provider is down.
   */
  deleteLater: (botId: string, recordingId: string) => Promise<void>;
  /**
   * After a bot is attached to a recording from the provider's word (a list): applies the bot's
   * status and any webhooks held for it (production: src/bots/provider-webhooks.ts).
   */
  onAttached?: (recordingId: string, bot: Bot) => Promise<void>;
}

/** The provider statuses of a bot that may still join or be in its call. */
export const ACTIVE_BOT_STATUSES = [
  'ready',
  'joining_call',
  'in_waiting_room',
  'in_call_not_recording',
  'recording_permission_allowed',
  'recording_permission_denied',
  'in_call_recording',
  'call_ended',
  'recording_done',
];

export interface RecoveryReport {
  scheduled: number;
  resent: number;
  attached: number;
  extrasDeleted: number;
  listCalls: number;
  truncated: boolean;
  gaveUp: number;
  deferred: number;
  /** Rows whose provider call failed this run; the others went on (one bad row blocks nothing). */
  failed: number;
}

const META_WORKSPACE = 'verbatim_workspace';
const META_RECORDING = 'verbatim_recording';

interface RecordingRow {
  id: string;
  workspace_id: string;
  meeting_url: string;
  join_at: Date;
  ends_at: Date;
  status: string;
  bot_id: string | null;
  schedule_attempted_at: Date | null;
  idempotency_key: string | null;
  schedule_inputs_hash: string | null;
}

export function schedulingInputsHash(
  r: Pick<RecordingRow, 'id' | 'workspace_id' | 'meeting_url' | 'join_at'>,
): string {
  return createHash('sha256')
    .update([r.workspace_id, r.id, r.meeting_url, r.join_at.toISOString()].join('\n'))
    .digest('hex');
}

/** The shared provider budget had no slot in time: try again later, spending no retry. */
export class OutOfBudget extends Error {}

/**
 * One provider call under the shared budget (R2): a fresh slot (one held up past its margin is not
 * used), and a 429 closes the endpoint for every process.
 */
async function call<T>(deps: BotSchedulingDeps, endpoint: string, fn: () => Promise<T>): Promise<T> {
  const got = await deps.budget.guard(endpoint, deps.settings.budgetWaitMs, fn);
  if (!got.ok) throw new OutOfBudget(endpoint);
  return got.value;
}

/**
 * R3: schedules the recording's bot. With `key` (a re-send inside the trust window) the stored key
 * is used again; otherwise a new attempt is recorded first. Returns the bot id, or null when the
 * row no longer wants a bot.
 */
export async function scheduleRecording(
  deps: BotSchedulingDeps,
  recordingId: string,
  resend = false,
): Promise<string | null> {
  const attempt = await deps.db.transaction().execute(async (trx) => {
    const row = await lockRecording(trx, recordingId);
    if (!row || row.status !== 'pending' || row.bot_id !== null) return null;
    // A bot sent to a meeting link after the meeting ended would record whatever meets there next.
    if (row.ends_at.getTime() <= Date.now()) return null;
    const hash = schedulingInputsHash(row);
    if (resend && row.idempotency_key && row.schedule_inputs_hash === hash)
      return { row, key: row.idempotency_key };
    // A new attempt: the marker and the key are durable before the provider hears of it. The key is
    // the inputs' hash, so the same inputs inside the provider's retention can only ever replay.
    const key = hash;
    await markScheduleAttempt(trx, recordingId, key, hash);
    return { row, key };
  });
  if (!attempt) return null;
  // Revalidate right before the call: a cancel or a move since the attempt began wins.
  const current = await recordingById(deps.db, recordingId);
  if (
    !current ||
    current.status !== 'pending' ||
    current.bot_id !== null ||
    current.idempotency_key !== attempt.key
  ) {
    return null;
  }
  let bot: Bot;
  try {
    bot = await call(deps, BotEndpoint.create, () =>
      deps.provider.createBot({
        meetingUrl: attempt.row.meeting_url,
        joinAt: attempt.row.join_at,
        metadata: { [META_WORKSPACE]: attempt.row.workspace_id, [META_RECORDING]: attempt.row.id },
        idempotencyKey: attempt.key,
      }),
    );
  } catch (err) {
    if (err instanceof OutOfBudget || !(err instanceof AppError)) throw err;
    if (err.code === 'bot.bad_request') {
      // The provider refuses this bot itself (a link it cannot join, say): asking again cannot help.
      await deps.db.transaction().execute((trx) =>
        moveBotRecording(trx, recordingId, BotRecordingStatus.failed, {
          actor: 'bot-scheduler',
          reason: 'the provider refused to create the bot',
          when: (r) => r.status === BotRecordingStatus.pending && r.bot_id === null,
          set: { failure_code: 'bot.create_refused', failure_message: err.message.slice(0, 500) },
        }),
      );
      deps.log.warn({ recordingId, code: err.code }, 'the provider refused the bot; recording failed');
      return null;
    }
    // Out of credit, a bad key, an outage: the row stays pending and is retried; why is kept on it.
    await noteRecordingError(deps.db, recordingId, `${err.code}: ${err.message}`);
    throw err;
  }
  if (!(await attach(deps, recordingId, bot.id))) {
    // Canceled or moved while the create was in flight: this bot must not join anything.
    deps.log.warn(
      { recordingId, botId: bot.id },
      'bot created for a recording no longer pending; deleting it',
    );
    await deps.deleteLater(bot.id, recordingId);
    return null;
  }
  // Webhooks that came before this answer (held for the bot) apply now.
  await deps.onAttached?.(recordingId, bot);
  return bot.id;
}

async function attach(deps: BotSchedulingDeps, recordingId: string, botId: string): Promise<boolean> {
  const done = await deps.db.transaction().execute((trx) =>
    moveBotRecording(trx, recordingId, BotRecordingStatus.scheduled, {
      actor: 'bot-scheduler',
      reason: 'its bot was created',
      when: (r) => r.status === BotRecordingStatus.pending && r.bot_id === null,
      set: { bot_id: botId, last_error: null, last_error_at: null },
    }),
  );
  if (done) return true;
  // The same bot attached already (a replayed create) counts as attached.
  const row = await recordingById(deps.db, recordingId);
  return row?.bot_id === botId;
}

/** What to do with a pending row without a bot (R4, R5). */
type RowStep = 'give_up_never' | 'give_up_unknown' | 'schedule' | 'resend' | 'ask_provider';

function stepFor(deps: BotSchedulingDeps, row: RecordingRow, now: Date): RowStep {
  const ended = row.ends_at.getTime() <= now.getTime();
  const attempted = row.schedule_attempted_at;
  if (!attempted) return ended ? 'give_up_never' : 'schedule';
  const age = now.getTime() - attempted.getTime();
  if (age > deps.settings.lookbackMs) return 'give_up_unknown';
  // A re-send after the meeting ended could make a bot (if the first never reached the provider)
  // that joins whatever meets at that link next: ask the provider instead.
  if (!ended && age <= deps.settings.trustWindowMs && row.schedule_inputs_hash === schedulingInputsHash(row))
    return 'resend';
  return 'ask_provider';
}

/**
 * R6/R9: the event path for one recording, run by its own `schedule-bot` job. A provider failure
 * is thrown, so the job's attempt fails and its backoff (honouring Retry-After) drives the next
 * try with the same key. A row whose outcome is unknown is looked up by its own metadata, in every
 * status (one list call): a bot found is attached with its status, even after the meeting ended.
 */
export async function recoverRecording(deps: BotSchedulingDeps, recordingId: string): Promise<void> {
  const now = (deps.now ?? (() => new Date()))();
  const row: RecordingRow | undefined = await pendingWithoutBot(deps.db, recordingId);
  if (!row) return;
  switch (stepFor(deps, row, now)) {
    case 'give_up_never':
      await giveUp(deps, row.id, 'bot.never_scheduled', 'the meeting ended before a bot was ever scheduled');
      return;
    case 'give_up_unknown':
      await giveUp(deps, row.id, 'bot.schedule_outcome_unknown', UNKNOWN_MESSAGE);
      return;
    case 'schedule':
      await scheduleRecording(deps, row.id);
      return;
    case 'resend':
      await scheduleRecording(deps, row.id, true);
      return;
    case 'ask_provider': {
      const report = emptyReport();
      if (!(await settleByOwnList(deps, row, report, now))) {
        throw new AppError(
          ErrorKind.transient,
          'bot.list_truncated',
          'the provider listed more bots than one run reads',
        );
      }
      return;
    }
  }
}

/**
 * One row settled from the provider's list of the bots made for it (by its metadata, in every
 * status, not bounded in time: a dispatched bot no longer reports its join time). False when the
 * answer was truncated, which settles nothing.
 */
async function settleByOwnList(
  deps: BotSchedulingDeps,
  row: RecordingRow,
  report: RecoveryReport,
  now: Date,
): Promise<boolean> {
  const own = emptyReport();
  try {
    const listed = await listBots(deps, { metadata: { [META_RECORDING]: row.id } }, own);
    await settleFromList(deps, row.workspace_id, [row], listed, own, now);
  } finally {
    for (const k of ['scheduled', 'attached', 'extrasDeleted', 'listCalls', 'gaveUp'] as const)
      report[k] += own[k];
  }
  return !own.truncated;
}

/**
 * A bot is dispatched to its call a little before its join time and then no longer reports one:
 * a row whose join time is this close is looked up by its own metadata, never by a list bounded
 * by join times.
 */
const DISPATCH_MARGIN_MS = 10 * 60_000;

/** Rows a backstop run looks up one by one (each one list call), the others wait for the next run. */
const OWN_LISTS_PER_RUN = 5;

const UNKNOWN_MESSAGE = 'a bot was requested but the provider holds none for this recording';

function emptyReport(): RecoveryReport {
  return {
    scheduled: 0,
    resent: 0,
    attached: 0,
    extrasDeleted: 0,
    listCalls: 0,
    truncated: false,
    gaveUp: 0,
    deferred: 0,
    failed: 0,
  };
}

/** R4/R5: one recovery run (the backstop) over a workspace's pending rows without a bot. */
export async function recoverWorkspace(
  deps: BotSchedulingDeps,
  workspaceId: string,
  options: { allowList?: boolean } = {},
): Promise<RecoveryReport> {
  const now = (deps.now ?? (() => new Date()))();
  const report = emptyReport();
  // A row with a scheduling job of its own is that job's: two runs must never send one key at once.
  const rows: RecordingRow[] = await unscheduledRecordings(deps.db, workspaceId);

  const needList: RecordingRow[] = [];
  try {
    for (const row of rows) {
      try {
        switch (stepFor(deps, row, now)) {
          case 'give_up_never':
            await giveUp(
              deps,
              row.id,
              'bot.never_scheduled',
              'the meeting ended before a bot was ever scheduled',
            );
            report.gaveUp++;
            break;
          case 'give_up_unknown':
            await giveUp(deps, row.id, 'bot.schedule_outcome_unknown', UNKNOWN_MESSAGE);
            report.gaveUp++;
            break;
          case 'schedule':
            if ((await scheduleRecording(deps, row.id)) !== null) report.scheduled++;
            break;
          case 'resend':
            if ((await scheduleRecording(deps, row.id, true)) !== null) report.resent++;
            break;
          case 'ask_provider':
            needList.push(row);
            break;
        }
      } catch (err) {
        if (err instanceof OutOfBudget) throw err;
        report.failed++;
        deps.log.warn(
          { workspaceId, recordingId: row.id, err: String(err) },
          'bot scheduling failed for one recording; the others go on',
        );
      }
    }
    if (needList.length > 0 && options.allowList !== false) {
      // Rows whose bot would still be waiting to join: one workspace-wide list per run, in every
      // status but bounded to their join times (a bot not yet dispatched reports its join time),
      // so the workspace's history cannot fill it. Rows whose join time has passed — the bot may
      // be in the call or done, and no longer reports one — and rows a truncated list left
      // unsettled are looked up by their own metadata, a few per run.
      // The clock is read again: the loop above may have taken minutes of provider calls.
      const listAt = (deps.now ?? (() => new Date()))().getTime();
      const isAhead = (r: RecordingRow) => r.join_at.getTime() > listAt + DISPATCH_MARGIN_MS;
      const ahead = needList.filter(isAhead);
      let own = needList.filter((r) => !isAhead(r));
      if (ahead.length > 0) {
        const times = ahead.map((r) => r.join_at.getTime());
        const listed = await listBots(
          deps,
          {
            metadata: { [META_WORKSPACE]: workspaceId },
            joinAtAfter: new Date(Math.min(...times) - 60_000),
            joinAtBefore: new Date(Math.max(...times) + 60_000),
          },
          report,
        );
        await settleFromList(deps, workspaceId, ahead, listed, report, now);
        if (report.truncated) own.push(...ahead);
      }
      // Only rows still unsettled (the truncated list may have attached some), those whose meeting
      // is still to come or under way first, soonest first; then those over, latest first.
      const open = await stillWithoutBot(
        deps.db,
        own.map((r) => r.id),
      );
      const over = (r: RecordingRow) => r.ends_at.getTime() <= listAt;
      own = own
        .filter((r) => open.has(r.id))
        .sort((a, b) =>
          over(a) !== over(b)
            ? Number(over(a)) - Number(over(b))
            : over(a)
              ? b.ends_at.getTime() - a.ends_at.getTime()
              : a.join_at.getTime() - b.join_at.getTime(),
        );
      for (const row of own.slice(0, OWN_LISTS_PER_RUN)) {
        try {
          if (!(await settleByOwnList(deps, row, report, now))) report.truncated = true;
        } catch (err) {
          if (err instanceof OutOfBudget) throw err;
          report.failed++;
          deps.log.warn(
            { workspaceId, recordingId: row.id, err: String(err) },
            'bot recovery failed for one recording; the others go on',
          );
        }
      }
      report.deferred += Math.max(0, own.length - OWN_LISTS_PER_RUN);
    }
  } catch (err) {
    if (!(err instanceof OutOfBudget)) throw err;
    report.deferred++;
    deps.log.info(
      { workspaceId, endpoint: err.message },
      'bot recovery stopped: provider budget spent; next run goes on',
    );
  }
  return report;
}

/** Every page of a list (bounded: more pages than the setting is a truncated answer). */
async function listBots(
  deps: BotSchedulingDeps,
  query: ListBotsQuery,
  report: RecoveryReport,
): Promise<Bot[]> {
  const bots: Bot[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    if (pages >= deps.settings.maxListPages) {
      report.truncated = true;
      break;
    }
    const page = await call(deps, BotEndpoint.list, () =>
      deps.provider.listBots(cursor ? { cursor } : query),
    );
    report.listCalls++;
    pages++;
    bots.push(...page.bots);
    if (!page.next) break;
    cursor = page.next;
  }
  return bots;
}

async function settleFromList(
  deps: BotSchedulingDeps,
  workspaceId: string,
  rows: RecordingRow[],
  bots: Bot[],
  report: RecoveryReport,
  now: Date,
): Promise<void> {
  const byRecording = new Map<string, Bot[]>();
  for (const bot of bots) {
    const rec = bot.metadata[META_RECORDING];
    if (!rec || bot.metadata[META_WORKSPACE] !== workspaceId) continue;
    byRecording.set(rec, [...(byRecording.get(rec) ?? []), bot]);
  }
  for (const row of rows) {
    // A bot that recorded is worth more than one that did not: it is the one kept.
    const found = (byRecording.get(row.id) ?? []).sort((a, b) => Number(b.recorded) - Number(a.recorded));
    if (found.length > 0) {
      if (await attachFound(deps, row.id, found[0]!)) report.attached++;
      // Whatever the row holds now is kept (this bot, or one another run attached first); every
      // other bot for it is surplus — all of them if the row was canceled meanwhile.
      const held = await recordingById(deps.db, row.id);
      const keep = held && held.status !== 'canceled' ? held.bot_id : null;
      for (const extra of found.filter((b) => b.id !== keep)) {
        await deps.deleteLater(extra.id, row.id);
        report.extrasDeleted++;
      }
      continue;
    }
    // Absence in a truncated list proves nothing: creating now could make a twin.
    if (report.truncated) continue;
    if (row.ends_at.getTime() <= now.getTime()) {
      // The provider's complete answer: it holds no bot for this recording, and the meeting is over.
      await giveUp(deps, row.id, 'bot.schedule_outcome_unknown', UNKNOWN_MESSAGE);
      report.gaveUp++;
      continue;
    }
    if ((await scheduleRecording(deps, row.id)) !== null) report.scheduled++;
  }
}

/** A bot the provider holds for the row, attached; its status (and held webhooks) applied. */
async function attachFound(deps: BotSchedulingDeps, recordingId: string, bot: Bot): Promise<boolean> {
  if (!(await attach(deps, recordingId, bot.id))) return false;
  await deps.onAttached?.(recordingId, bot);
  return true;
}

async function giveUp(
  deps: BotSchedulingDeps,
  recordingId: string,
  code: string,
  message: string,
): Promise<void> {
  await deps.db.transaction().execute((trx) =>
    moveBotRecording(trx, recordingId, BotRecordingStatus.failed, {
      actor: 'bot-scheduler',
      reason: `given up: ${code}`,
      when: (r) => r.status === BotRecordingStatus.pending,
      set: { failure_code: code, failure_message: message },
    }),
  );
  deps.log.warn({ recordingId, code }, 'bot recording given up');
}
