import { createHash } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { BotRecordingStatus, JobKind } from '../domain/status.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import type { BotDeps } from './provider.ts';
import { applyAttachedBot, applyProviderWebhook } from './provider-webhooks.ts';
import { OutOfBudget, recoverRecording, recoverWorkspace, type BotSchedulingDeps } from './scheduling.ts';
import { enqueueBotDelete } from './bot-jobs.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';
import {
  endedButUnreported,
  moveBotRecording,
  touchRecording,
  workspaceOfRecording,
} from './bot-recording-store.ts';
import {
  claimDueBackstops,
  ensureBackstop,
  handBackBackstopRows,
  releaseOwnedBackstops,
} from './backstop-store.ts';

/**
 * R6: a recording that becomes pending (created, moved, reset) is scheduled through the event path
 * within seconds: a `schedule-bot` job is created in the same transaction. Its run is a recovery
 * run for the recording's workspace, which needs no list call for rows that never reached the
 * provider or are inside the trust window. The backstop runs every 15 minutes per workspace, each
 * workspace at its own stable offset inside the quarter hour.
 */

/** The default backstop period (VERBATIM_BOT_BACKSTOP_SECONDS). */
export const BACKSTOP_PERIOD_MS = 15 * 60_000;
// Long enough for a slow run (each provider call may take up to its timeout) to finish first.
const BACKSTOP_LEASE_MS = 15 * 60_000;

/**
 * Called in the transaction that makes a recording pending (which holds the recording's row): one
 * scheduling job per recording at a time, so two jobs never send one key at once.
 */
export async function requestBotScheduling(
  deps: MeetingDeps,
  trx: Tx,
  recording: { id: string; workspace_id: string },
  actor: string,
): Promise<void> {
  if (await deps.jobs.hasActiveJob(trx, recording.id, JobKind.scheduleBot)) return;
  await createJob(
    deps,
    trx,
    JobKind.scheduleBot,
    { recordingId: recording.id, workspaceId: recording.workspace_id },
    { workspaceId: recording.workspace_id },
    actor,
  );
  await ensureBackstop(
    trx,
    recording.workspace_id,
    nextBackstopAt(recording.workspace_id, new Date(), deps.config.bots.backstopMs),
  );
}

/** The workspace's stable offset inside the quarter hour, from a hash of its id. */
export function backstopOffsetMs(workspaceId: string, periodMs = BACKSTOP_PERIOD_MS): number {
  const h = createHash('sha256').update(workspaceId).digest();
  return h.readUInt32BE(0) % periodMs;
}

/** The next run after `now`: the next instant at the workspace's offset in a quarter hour. */
export function nextBackstopAt(workspaceId: string, now: Date, periodMs = BACKSTOP_PERIOD_MS): Date {
  const offset = backstopOffsetMs(workspaceId, periodMs);
  const base = Math.floor(now.getTime() / periodMs) * periodMs + offset;
  return new Date(base > now.getTime() ? base : base + periodMs);
}

function schedulingDeps(deps: MeetingDeps, bots: BotDeps): BotSchedulingDeps {
  return {
    db: deps.db,
    provider: bots.provider,
    budget: bots.budget,
    log: deps.log,
    settings: {
      trustWindowMs: deps.config.bots.trustWindowMs,
      lookbackMs: deps.config.bots.lookbackMs,
      maxListPages: 20,
      budgetWaitMs: 10_000,
    },
    onAttached: (recordingId, bot) => applyAttachedBot(deps, recordingId, bot),
    deleteLater: async (botId, recordingId) => {
      const workspaceId = await workspaceOfRecording(deps.db, recordingId);
      await deps.db
        .transaction()
        .execute((trx) => enqueueBotDelete(deps, trx, { workspaceId, recordingId, botId }, 'bot:recovery'));
    },
  };
}

/**
 * R6/R9: schedules one recording. A provider failure fails the attempt (the job's backoff, with
 * Retry-After, brings the next try with the same key); a spent budget waits without spending one.
 */
export function scheduleBotJob(
  deps: MeetingDeps,
  bots: BotDeps | null,
): JobDefinition<typeof JobKind.scheduleBot> {
  return {
    kind: JobKind.scheduleBot,
    run: async (ctx) => {
      if (!bots)
        throw new AppError(ErrorKind.permanent, 'bot.not_configured', 'no bot provider is configured');
      try {
        await recoverRecording(
          schedulingDeps(deps, bots),
          payloadOf(ctx.job, JobKind.scheduleBot).recordingId,
        );
      } catch (err) {
        if (!(err instanceof OutOfBudget)) throw err;
        await ctx.requeue(30_000, 'provider budget spent');
        return;
      }
      await ctx.complete();
    },
  };
}

/** The backstop: each due workspace gets one recovery run, then its next slot. */
export async function runBotBackstops(
  deps: MeetingDeps,
  bots: BotDeps | null,
  owner: string,
  limit = 5,
): Promise<number> {
  if (!bots) return 0;
  // Runs of one owner never overlap (one provider sweep at a time in a process), so a lease this
  // owner still holds now belongs to no run: its hand-back could not be written through a database
  // outage, or the claim committed but its answer was lost. Left, it would hold the workspace's
  // recovery (and back-fill) for the whole lease, 15 minutes, while this worker lives on. Released
  // here, the workspace is due again at once. Found by the simulation (seed 1402 in CI).
  await releaseOwnedBackstops(deps.db, owner);
  const due = await claimDueBackstops(deps.db, owner, BACKSTOP_LEASE_MS, limit);
  // Every claimed workspace is handed back, whatever happens to the run: one whose hand-back could
  // not be written (the database away) is handed back once more at the end, due again at once.
  const claimed = new Set(due);
  try {
    for (const workspace_id of due) {
      let failed = false;
      // The two halves fail apart: a recovery that cannot finish (a list the provider will not
      // answer) must not keep a lost `done` from being back-filled, nor the other way round.
      const halves: Array<[string, () => Promise<unknown>]> = [
        ['recovery', () => recoverWorkspace(schedulingDeps(deps, bots), workspace_id)],
        ['back-fill', () => backfillEndedBots(deps, bots, workspace_id)],
      ];
      for (const [half, run] of halves) {
        try {
          await run();
        } catch (err) {
          failed = true;
          deps.log.warn(
            { workspaceId: workspace_id, half, err: String(err) },
            'bot backstop run failed; it runs again within 30 s',
          );
        }
      }
      // A run cut short (a lost connection, an outage) comes back soon rather than a whole period
      // later; a lease left behind by a live worker would hold the workspace's recovery for 15
      // minutes.
      const next = failed
        ? new Date(Date.now() + Math.min(30_000, deps.config.bots.backstopMs))
        : nextBackstopAt(workspace_id, new Date(), deps.config.bots.backstopMs);
      await handBackBackstops(deps, owner, [workspace_id], next);
      claimed.delete(workspace_id);
    }
  } finally {
    if (claimed.size > 0) await handBackBackstops(deps, owner, [...claimed], null).catch(() => undefined);
  }
  return due.length;
}

/** Releases backstop leases this owner holds, with a few tries over about 15 s. */
async function handBackBackstops(
  deps: MeetingDeps,
  owner: string,
  workspaceIds: string[],
  next: Date | null,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await handBackBackstopRows(deps.db, owner, workspaceIds, next);
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 500 * 2 ** (attempt - 1)));
    }
  }
}

/**
 * R7: a lost `done` (or `fatal`) webhook is back-filled: a recording whose meeting ended a while
 * ago but whose bot never reported the end is retrieved from the provider, and its final status
 * applied as that webhook would have been (once, under a synthetic webhook id).
 */
export async function backfillEndedBots(
  deps: MeetingDeps,
  bots: BotDeps,
  workspaceId: string,
): Promise<number> {
  const rows = await endedButUnreported(
    deps.db,
    workspaceId,
    new Date(Date.now() - deps.config.bots.backfillAfterMs),
    20,
  );
  let applied = 0;
  for (const row of rows) {
    try {
      const got = await bots.budget.guard('bot.retrieve', 5_000, () =>
        bots.provider.retrieveBot(row.bot_id!),
      );
      if (!got.ok) break;
      const bot = got.value;
      // Looked at now, so the next run asks about the others first.
      await touchRecording(deps.db, row.id);
      if (bot.status !== 'done' && bot.status !== 'fatal') continue;
      const sub = bot.statusChanges.at(-1)?.subCode ?? null;
      const outcome = await applyProviderWebhook(deps, `backfill:${bot.id}:${bot.status}`, {
        event: 'backfill',
        botId: bot.id,
        code: bot.status,
        subCode: sub,
      });
      if (outcome === 'applied') applied++;
    } catch (err) {
      if (err instanceof AppError && err.code === 'bot.not_found') {
        // The provider no longer knows the bot (deleted outside Verbatim, or expired): its meeting
        // is over, so there is nothing left to wait for. Failed with the reason, not left scheduled.
        await deps.db.transaction().execute((trx) =>
          moveBotRecording(trx, row.id, BotRecordingStatus.failed, {
            actor: 'bot-backstop',
            reason: 'the provider no longer knows its bot',
            when: (r) =>
              (
                [
                  BotRecordingStatus.scheduled,
                  BotRecordingStatus.joining,
                  BotRecordingStatus.inCall,
                  BotRecordingStatus.recording,
                ] as string[]
              ).includes(r.status),
            set: {
              failure_code: 'bot.vanished',
              failure_message: 'the provider no longer knows this bot; nothing was imported',
            },
          }),
        );
        continue;
      }
      deps.log.warn(
        { recordingId: row.id, err: String(err) },
        'back-fill could not ask the provider about a bot',
      );
    }
  }
  return applied;
}
