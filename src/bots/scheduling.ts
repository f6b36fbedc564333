import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { AppError, toErrorRecord } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import type { Bot, BotProvider } from '../ports.ts';
import type { RateBudget } from './rate-budget.ts';

/**
 * R3–R5: scheduling a recording's bot at the provider, and recovering rows whose outcome is not
 * known, without ever leaving two bots in one call and without spending the installation's shared
 * provider budget on lists it does not need.
 *
 *   schedule   the attempt marker and a deterministic idempotency key (a hash of the scheduling
 *              inputs) are committed before the create call; the row's status is checked again
 *              right before the call; the bot id is written back after it.
 *   recover    a pending row never attempted is scheduled (no list call). An attempt within the
 *              trust window (below the provider's one-hour key retention) with unchanged inputs is
 *              re-sent with its stored key: the provider returns the same bot (no list call).
 *              Otherwise one workspace-wide list call per run (all pages, bounded) finds bots by
 *              their metadata: one found is attached, extras are deleted, none found is scheduled
 *              again — but only if the list was complete: a truncated list authorizes nothing.
 *   give up    a meeting that ended with no attempt is `bot_never_scheduled`; an attempt still
 *              unresolved past the lookback is `bot_schedule_outcome_unknown` (R5).
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
   * Deletes a bot through a retried job (production). Without it (scheduling-layer tests) the
   * delete is made inline, and a failed one is only logged.
   */
  deleteLater?: (botId: string, recordingId: string) => Promise<void>;
}

/** The provider statuses of a bot that may still join or be in its call (R4: list active bots only). */
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

class OutOfBudget extends Error {}

async function spend(deps: BotSchedulingDeps, endpoint: string): Promise<void> {
  if (!(await deps.budget.take(endpoint, deps.settings.budgetWaitMs))) throw new OutOfBudget(endpoint);
}

/** A 429 from the provider closes the endpoint for every process (R2). */
async function call<T>(deps: BotSchedulingDeps, endpoint: string, fn: () => Promise<T>): Promise<T> {
  await spend(deps, endpoint);
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError && err.code === 'bot.rate_limited') {
      await deps.budget.block(endpoint, err.retryAfterSeconds ?? 60);
    }
    throw err;
  }
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
    const row = await trx
      .selectFrom('bot_recordings')
      .selectAll()
      .where('id', '=', recordingId)
      .forNoKeyUpdate()
      .executeTakeFirst();
    if (!row || row.status !== 'pending' || row.bot_id !== null) return null;
    // A bot sent to a meeting link after the meeting ended would record whatever meets there next.
    if (row.ends_at.getTime() <= Date.now()) return null;
    const hash = schedulingInputsHash(row);
    if (resend && row.idempotency_key && row.schedule_inputs_hash === hash)
      return { row, key: row.idempotency_key };
    // A new attempt: the marker and the key are durable before the provider hears of it. The key is
    // the inputs' hash, so the same inputs inside the provider's retention can only ever replay.
    const key = hash;
    await trx
      .updateTable('bot_recordings')
      .set({
        schedule_attempted_at: sql<Date>`now()`,
        idempotency_key: key,
        schedule_inputs_hash: hash,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', recordingId)
      .execute();
    return { row, key };
  });
  if (!attempt) return null;
  // Revalidate right before the call: a cancel or a move since the attempt began wins.
  const current = await deps.db
    .selectFrom('bot_recordings')
    .select(['status', 'bot_id', 'idempotency_key'])
    .where('id', '=', recordingId)
    .executeTakeFirst();
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
      await deps.db
        .updateTable('bot_recordings')
        .set({
          status: 'failed',
          failure_code: 'bot.create_refused',
          failure_message: err.message.slice(0, 500),
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', recordingId)
        .where('status', '=', 'pending')
        .where('bot_id', 'is', null)
        .execute();
      deps.log.warn({ recordingId, code: err.code }, 'the provider refused the bot; recording failed');
      return null;
    }
    // Out of credit, a bad key, an outage: the row stays pending and is retried; why is kept on it.
    await deps.db
      .updateTable('bot_recordings')
      .set({ last_error: `${err.code}: ${err.message}`.slice(0, 500), last_error_at: sql<Date>`now()` })
      .where('id', '=', recordingId)
      .execute();
    throw err;
  }
  if (!(await attach(deps, recordingId, bot.id))) {
    // Canceled or moved while the create was in flight: this bot must not join anything.
    deps.log.warn(
      { recordingId, botId: bot.id },
      'bot created for a recording no longer pending; deleting it',
    );
    await deleteBot(deps, bot.id, recordingId);
    return null;
  }
  return bot.id;
}

/** Through the retried job when there is one; a bot found surplus must not be forgotten. */
async function deleteBot(deps: BotSchedulingDeps, botId: string, recordingId: string): Promise<void> {
  if (deps.deleteLater) {
    await deps.deleteLater(botId, recordingId);
    return;
  }
  await call(deps, BotEndpoint.delete, () => deps.provider.deleteBot(botId));
}

async function attach(deps: BotSchedulingDeps, recordingId: string, botId: string): Promise<boolean> {
  const done = await deps.db
    .updateTable('bot_recordings')
    .set({
      bot_id: botId,
      status: 'scheduled',
      last_error: null,
      last_error_at: null,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', recordingId)
    .where('bot_id', 'is', null)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  if (Number(done.numUpdatedRows) === 1) return true;
  // The same bot attached already (a replayed create) counts as attached.
  const row = await deps.db
    .selectFrom('bot_recordings')
    .select('bot_id')
    .where('id', '=', recordingId)
    .executeTakeFirst();
  return row?.bot_id === botId;
}

/** R4/R5: one recovery run over a workspace's pending rows without a bot. */
export async function recoverWorkspace(
  deps: BotSchedulingDeps,
  workspaceId: string,
  options: { allowList?: boolean } = {},
): Promise<RecoveryReport> {
  const now = (deps.now ?? (() => new Date()))();
  const report: RecoveryReport = {
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
  const rows = (await deps.db
    .selectFrom('bot_recordings')
    .select([
      'id',
      'workspace_id',
      'meeting_url',
      'join_at',
      'ends_at',
      'status',
      'bot_id',
      'schedule_attempted_at',
      'idempotency_key',
      'schedule_inputs_hash',
    ])
    .where('workspace_id', '=', workspaceId)
    .where('status', '=', 'pending')
    .where('bot_id', 'is', null)
    .orderBy('join_at')
    .execute()) as RecordingRow[];

  const needList: RecordingRow[] = [];
  try {
    for (const row of rows) {
      try {
        const attempted = row.schedule_attempted_at;
        if (!attempted) {
          if (row.ends_at.getTime() <= now.getTime()) {
            await giveUp(
              deps,
              row.id,
              'bot_never_scheduled',
              'the meeting ended before a bot was ever scheduled',
            );
            report.gaveUp++;
            continue;
          }
          if ((await scheduleRecording(deps, row.id)) !== null) report.scheduled++;
          continue;
        }
        const age = now.getTime() - attempted.getTime();
        if (age > deps.settings.lookbackMs) {
          await giveUp(
            deps,
            row.id,
            'bot_schedule_outcome_unknown',
            'a bot was requested but whether the provider created it could not be established',
          );
          report.gaveUp++;
          continue;
        }
        if (age <= deps.settings.trustWindowMs && row.schedule_inputs_hash === schedulingInputsHash(row)) {
          if ((await scheduleRecording(deps, row.id, true)) !== null) report.resent++;
          continue;
        }
        needList.push(row);
      } catch (err) {
        if (err instanceof OutOfBudget) throw err;
        report.failed++;
        deps.log.warn(
          { workspaceId, recordingId: row.id, err: String(err) },
          'bot scheduling failed for one recording; the others go on',
        );
      }
    }
    // The event path never lists (R6); the backstop does, at most once per run.
    if (needList.length > 0 && options.allowList !== false)
      await reconcileByList(deps, workspaceId, needList, report);
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

async function reconcileByList(
  deps: BotSchedulingDeps,
  workspaceId: string,
  rows: RecordingRow[],
  report: RecoveryReport,
): Promise<void> {
  const bots: Bot[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    if (pages >= deps.settings.maxListPages) {
      report.truncated = true;
      break;
    }
    const page = await call(deps, BotEndpoint.list, () =>
      deps.provider.listBots(
        cursor
          ? { cursor }
          : // Only bots that may still join or be in a call: done and failed ones (the bulk of a
            // workspace's history) never stand for a pending row, and would truncate the list.
            { metadata: { [META_WORKSPACE]: workspaceId }, statuses: ACTIVE_BOT_STATUSES },
      ),
    );
    report.listCalls++;
    pages++;
    bots.push(...page.bots);
    if (!page.next) break;
    cursor = page.next;
  }
  const byRecording = new Map<string, Bot[]>();
  for (const bot of bots) {
    const rec = bot.metadata[META_RECORDING];
    if (!rec || bot.metadata[META_WORKSPACE] !== workspaceId) continue;
    byRecording.set(rec, [...(byRecording.get(rec) ?? []), bot]);
  }
  for (const row of rows) {
    const found = byRecording.get(row.id) ?? [];
    if (found.length > 0) {
      if (await attach(deps, row.id, found[0]!.id)) report.attached++;
      // Whatever the row holds now is kept (this bot, or one another run attached first); every
      // other bot for it is surplus — all of them if the row was canceled meanwhile.
      const now = await deps.db
        .selectFrom('bot_recordings')
        .select(['bot_id', 'status'])
        .where('id', '=', row.id)
        .executeTakeFirst();
      const held = now && now.status !== 'canceled' ? now.bot_id : null;
      for (const extra of found.filter((b) => b.id !== held)) {
        await deleteBot(deps, extra.id, row.id);
        report.extrasDeleted++;
      }
      continue;
    }
    // Absence in a truncated list proves nothing: creating now could make a twin.
    if (report.truncated) continue;
    if ((await scheduleRecording(deps, row.id)) !== null) report.scheduled++;
  }
}

async function giveUp(
  deps: BotSchedulingDeps,
  recordingId: string,
  code: string,
  message: string,
): Promise<void> {
  await deps.db
    .updateTable('bot_recordings')
    .set({ status: 'failed', failure_code: code, failure_message: message, updated_at: sql<Date>`now()` })
    .where('id', '=', recordingId)
    .where('status', '=', 'pending')
    .execute();
  deps.log.warn({ recordingId, code }, 'bot recording given up');
}

/** For logs: what went wrong with a provider call, without secrets. */
export function describeProviderError(err: unknown): string {
  const e = toErrorRecord(err);
  return `${e.code}: ${e.message}`;
}
