import type { Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind, MeetingSource } from '../domain/status.ts';
import { verifyWebhook, webhookHeadersFresh } from '../events/webhooks.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { storeRecording } from '../meetings/intake.ts';
import type { BotProvider } from '../ports.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import type { RateBudget } from './rate-budget-store.ts';
import { enqueueBotDelete } from './bot-jobs.ts';
import { createJob, payloadOf } from '../jobs/catalog.ts';
import {
  linkRecordingMeeting,
  lockRecording,
  lockRecordingByBot,
  moveBotRecording,
  recordingById,
  type BotRecordingRow,
} from './bot-recording-store.ts';
import { heldWebhooks, setWebhookOutcome, storeProviderWebhook } from './provider-webhook-store.ts';
import { BOT_PROGRESS_RANK, BOT_RECORDING_FINISHED, BotRecordingStatus } from '../domain/status.ts';

/**
 * R7/R8: the provider's webhooks move a recording through its life, and never backwards:
 *
 *   pending → scheduled → joining → in_call → recording → processing → complete
 *                                                            └ failed · not_recorded · canceled
 *
 * A webhook is verified first (Standard Webhooks / Svix headers, any of the configured secrets,
 * five minutes of tolerance; 401 otherwise, and nothing changes), then applied once: its id is
 * recorded in the transaction that applies it. A webhook for a bot we do not know, or one that
 * would move a recording backwards (it arrived late), is recorded and skipped. `done` hands the
 * recording to an import job that downloads the audio and submits it to the transcription
 * pipeline as the meeting's uploaded recording; the recording completes when that meeting does.
 */

/** The bot recording's statuses (src/domain/status.ts), under the name this module has always used. */
export const BotStatus = BotRecordingStatus;
export type BotStatus = BotRecordingStatus;

/** The provider's status codes (Recall's bot status changes), mapped onto ours; others are ignored. */
const FROM_PROVIDER: Record<string, BotStatus> = {
  joining_call: BotStatus.joining,
  in_waiting_room: BotStatus.joining,
  in_call_not_recording: BotStatus.inCall,
  recording_permission_allowed: BotStatus.recording,
  in_call_recording: BotStatus.recording,
  done: BotStatus.processing,
  fatal: BotStatus.failed,
};

export interface ProviderEvent {
  botId: string | null;
  code: string | null;
  subCode: string | null;
  event: string;
  /** From the bot's metadata: the recording (and workspace) we created the bot for. */
  recordingId?: string | null;
  workspaceId?: string | null;
}

/** Reads Recall's payload shapes: `bot.<code>` events and the older `bot.status_change`. */
export function parseProviderEvent(body: unknown): ProviderEvent {
  const b = (body ?? {}) as { event?: unknown; data?: Record<string, unknown> };
  const event = typeof b.event === 'string' ? b.event : '';
  const data = b.data ?? {};
  const bot = (data.bot ?? {}) as { id?: unknown; metadata?: Record<string, unknown> };
  const metadata = bot.metadata ?? {};
  const status = (data.data ?? data.status ?? {}) as { code?: unknown; sub_code?: unknown };
  let code = typeof status.code === 'string' ? status.code : null;
  if (!code && event.startsWith('bot.') && event !== 'bot.status_change') code = event.slice(4);
  if (event === 'recording.done') code = 'done';
  const text = (v: unknown) => (typeof v === 'string' && v.length <= 200 ? v : null);
  return {
    event,
    botId: typeof bot.id === 'string' ? bot.id : null,
    code,
    subCode: typeof status.sub_code === 'string' ? status.sub_code : null,
    recordingId: text(metadata.verbatim_recording),
    workspaceId: text(metadata.verbatim_workspace),
  };
}

/** R8: any configured secret, `svix-*` or `webhook-*` headers, five minutes of tolerance. */
export function verifyProviderWebhook(
  secrets: string[],
  headers: Record<string, string | string[] | undefined>,
  rawBody: string,
): string | null {
  const h = signatureHeaders(headers);
  if (!h['webhook-id']) return null;
  return secrets.some((secret) => verifyWebhook(secret, h, rawBody)) ? h['webhook-id'] : null;
}

/** S7: whether a delivery could verify at all, decided before its body is read. */
export function providerWebhookMayVerify(
  secrets: string[],
  headers: Record<string, string | string[] | undefined>,
): boolean {
  return secrets.length > 0 && webhookHeadersFresh(signatureHeaders(headers));
}

function signatureHeaders(headers: Record<string, string | string[] | undefined>) {
  const get = (name: string) => {
    const v = headers[`svix-${name}`] ?? headers[`webhook-${name}`];
    return Array.isArray(v) ? v[0] : v;
  };
  return {
    'webhook-id': get('id'),
    'webhook-timestamp': get('timestamp'),
    'webhook-signature': get('signature'),
  };
}

export type WebhookOutcome = 'applied' | 'duplicate' | 'unknown_bot' | 'stale' | 'ignored' | 'held';

/**
 * R7/R9: applies one verified webhook, once. One for a bot not yet attached to our recording is
 * never dropped: when its metadata names one of our recordings whose create is unresolved (the
 * answer was lost), the bot is attached there and then; otherwise it is held, and applied when the
 * bot is attached (src/bots/scheduling.ts calls applyAttachedBot).
 */
export async function applyProviderWebhook(
  deps: MeetingDeps,
  webhookId: string,
  event: ProviderEvent,
): Promise<WebhookOutcome> {
  return deps.db.transaction().execute(async (trx) => {
    const fresh = await storeProviderWebhook(trx, {
      id: webhookId,
      event: event.event,
      botId: event.botId,
      code: event.code,
      subCode: event.subCode,
      recordingId: event.recordingId && isUuid(event.recordingId) ? event.recordingId : null,
      workspaceId: event.workspaceId && isUuid(event.workspaceId) ? event.workspaceId : null,
    });
    if (!fresh) return 'duplicate';
    const record = (outcome: WebhookOutcome) => recordOutcome(trx, webhookId, outcome);
    if (!event.botId) return record('ignored');
    if (!(await lockRecordingByBot(trx, event.botId))) {
      const claim = await claimByMetadata(deps, trx, event);
      if (claim === 'held') return record('held');
      if (claim === 'unknown') return record('unknown_bot');
    }
    // Whatever was held for this bot applies first: webhooks that came before it was attached,
    // including one that raced the attach, and any an interrupted attach left behind.
    await replayHeld(deps, trx, event.botId, webhookId);
    const row = await lockRecordingByBot(trx, event.botId);
    if (!row) return record('held');
    return record(await applyToRow(deps, trx, row, event));
  });
}

async function recordOutcome(trx: Tx, webhookId: string, outcome: WebhookOutcome): Promise<WebhookOutcome> {
  await setWebhookOutcome(trx, webhookId, outcome);
  return outcome;
}

/**
 * A webhook whose bot no recording holds yet. Its metadata names the recording (and workspace) it
 * was made for: a pending one whose create was sent but whose answer never came gets the bot now;
 * another of ours (the bot of a create still in flight, a twin) keeps the webhook held.
 */
async function claimByMetadata(
  deps: MeetingDeps,
  trx: Tx,
  event: ProviderEvent,
): Promise<'attached' | 'held' | 'unknown'> {
  if (!event.botId || !event.recordingId || !isUuid(event.recordingId) || !event.workspaceId)
    return 'unknown';
  const rec = await lockRecording(trx, event.recordingId);
  if (!rec || rec.workspace_id !== event.workspaceId) return 'unknown';
  // Attached while this webhook waited for the row (another webhook, the create's answer).
  if (rec.bot_id === event.botId) return 'attached';
  // Nobody wants this bot in the call: its recording was canceled while the create was in flight
  // (a move, a user's cancel), or the recording has its bot already (a twin; a call holds one).
  // Its webhooks stay stored (held); the bot is deleted, or taken out of the call, by the retried
  // job — and what a bot of a canceled recording recorded before it left is imported.
  if (rec.status === BotStatus.canceled || rec.bot_id !== null) {
    deps.log.warn(
      { recordingId: rec.id, botId: event.botId, heldBotId: rec.bot_id, status: rec.status },
      'a bot reports for a recording that has another or was canceled; it is removed',
    );
    await enqueueBotDelete(
      deps,
      trx,
      { workspaceId: rec.workspace_id, recordingId: rec.id, botId: event.botId },
      'provider:webhook',
    );
    return 'held';
  }
  if (rec.status !== BotStatus.pending || !rec.schedule_attempted_at) return 'held';
  await moveBotRecording(trx, rec.id, BotStatus.scheduled, {
    actor: 'provider:webhook',
    reason: 'its bot reported before the create was answered',
    when: (r) => r.bot_id === null,
    set: { bot_id: event.botId, last_error: null, last_error_at: null },
  });
  return 'attached';
}

/** Webhooks held for a bot, applied in the order they came (in the caller's transaction). */
async function replayHeld(deps: MeetingDeps, trx: Tx, botId: string, except: string | null): Promise<number> {
  const held = await heldWebhooks(trx, botId);
  let applied = 0;
  for (const h of held) {
    if (h.id === except) continue;
    const row = await lockRecordingByBot(trx, botId);
    if (!row) return applied;
    const outcome = await applyToRow(deps, trx, row, {
      event: h.event,
      botId,
      code: h.code,
      subCode: h.sub_code,
    });
    await recordOutcome(trx, h.id, outcome);
    if (outcome === 'applied') applied++;
  }
  return applied;
}

/**
 * R9: a bot just attached to a recording from the provider's word (a list, or the create's own
 * answer): the webhooks held for it are applied, then its status as the provider reports it now
 * (under a webhook id of its own, so it applies once).
 */
export async function applyAttachedBot(
  deps: MeetingDeps,
  recordingId: string,
  bot: { id: string; status: string; statusChanges: Array<{ subCode: string | null }> },
): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const row = await lockRecording(trx, recordingId);
    if (row?.bot_id === bot.id) await replayHeld(deps, trx, bot.id, null);
  });
  if (!FROM_PROVIDER[bot.status]) return;
  await applyProviderWebhook(deps, `attach:${bot.id}:${bot.status}`, {
    event: 'attach',
    botId: bot.id,
    code: bot.status,
    subCode: bot.statusChanges.at(-1)?.subCode ?? null,
  });
}

/** One status for the recording holding the bot: forward only; `done` starts the import. */
async function applyToRow(
  deps: MeetingDeps,
  trx: Tx,
  row: BotRecordingRow,
  event: ProviderEvent,
): Promise<WebhookOutcome> {
  const target = event.code ? FROM_PROVIDER[event.code] : undefined;
  if (!target) return 'ignored';
  if (BOT_RECORDING_FINISHED.includes(row.status)) return 'stale';
  const reason = `provider: ${event.code}${event.subCode ? ` (${event.subCode})` : ''}`;
  if (target === BotStatus.failed) {
    await moveBotRecording(trx, row.id, BotStatus.failed, {
      actor: 'provider:webhook',
      reason,
      set: {
        failure_code: `bot.fatal${event.subCode ? `:${event.subCode}` : ''}`,
        failure_message: `the meeting bot failed${event.subCode ? ` (${event.subCode})` : ''}`,
      },
    });
    return 'applied';
  }
  // Forward only: a report that comes late (or twice) never moves the recording back.
  if (BOT_PROGRESS_RANK[target] <= BOT_PROGRESS_RANK[row.status]) return 'stale';
  if (!(await moveBotRecording(trx, row.id, target, { actor: 'provider:webhook', reason }))) return 'stale';
  if (target === BotStatus.processing) {
    await createJob(
      deps,
      trx,
      JobKind.importBotRecording,
      { recordingId: row.id },
      { workspaceId: row.workspace_id },
      'provider:webhook',
    );
  }
  return 'applied';
}

/** R11: the job that imports the recording's participants and speaker timeline, made with the import's end. */
function importSpeakersLater(
  deps: MeetingDeps,
  row: BotRecordingRow,
  meetingId: string,
  actor: string,
): (trx: Tx) => Promise<void> {
  return async (trx) => {
    await createJob(
      deps,
      trx,
      JobKind.importBotSpeakers,
      { recordingId: row.id, meetingId },
      { workspaceId: row.workspace_id },
      actor,
    );
  };
}

/**
 * R7: the recording's audio into the transcription pipeline: the bot is retrieved, its audio
 * downloaded, and a meeting created with it as the uploaded recording. An empty recording
 * completes the recording as empty; a meeting's end completes it (see pg-meeting-store).
 */
export function importBotRecordingJob(
  deps: MeetingDeps,
  bots: { provider: BotProvider; budget: RateBudget } | null,
): JobDefinition<typeof JobKind.importBotRecording> {
  return {
    kind: JobKind.importBotRecording,
    run: async (ctx) => {
      if (!bots) {
        throw new AppError(ErrorKind.permanent, 'bot.not_configured', 'no bot provider is configured');
      }
      const recordingId = payloadOf(ctx.job, JobKind.importBotRecording).recordingId;
      const row = await recordingById(deps.db, recordingId);
      if (!row || row.status !== BotStatus.processing || !row.bot_id) {
        await ctx.complete();
        return;
      }
      if (row.meeting_id) {
        const meeting = await deps.meetings.findById(row.meeting_id);
        if (meeting && meeting.status !== 'created') {
          // Already given its audio; the meeting's end completes the recording (pg-meeting-store).
          // Its speakers' import is asked for again (one job per meeting): a run that died after
          // storing the audio must not leave the meeting without them.
          await ctx.complete(importSpeakersLater(deps, row, meeting.id, ctx.actor));
          return;
        }
      }
      const botId = row.bot_id;
      const got = await bots.budget.guard('bot.retrieve', 30_000, () => bots.provider.retrieveBot(botId));
      if (!got.ok) {
        await ctx.requeue(30_000, 'provider budget spent');
        return;
      }
      const bot = got.value;
      if (!bot.recorded) {
        // The bot ended without ever recording: not let in, no permission, nobody came.
        const last = bot.statusChanges.at(-1);
        const why = last?.subCode ?? last?.code ?? 'no recording';
        await ctx.complete(async (trx) => {
          await moveBotRecording(trx, recordingId, BotStatus.notRecorded, {
            actor: ctx.actor,
            reason: `the bot ended without recording (${why})`,
            when: (r) => r.status === BotStatus.processing,
            set: {
              failure_code: `bot.not_recorded:${why}`.slice(0, 200),
              failure_message: `the bot did not record the meeting (${why})`.slice(0, 500),
            },
          });
        });
        return;
      }
      if (!bot.recordingUrl) {
        // Recorded, but its media is not ready (or was lost): retried, then failed with this reason.
        throw new AppError(
          ErrorKind.transient,
          'bot.recording_unavailable',
          'the provider has the recording but no media link for it yet',
        );
      }
      const audio = await bots.provider.downloadRecording(bot);
      if (!audio) {
        await ctx.complete(async (trx) => {
          await moveBotRecording(trx, recordingId, BotStatus.complete, {
            actor: ctx.actor,
            reason: 'the bot recorded no audio',
            when: (r) => r.status === BotStatus.processing,
            set: { failure_code: 'bot.empty_recording', failure_message: 'the bot recorded no audio' },
          });
        });
        return;
      }
      // From here the download is read by the store, or dropped with the run.
      ctx.signal.addEventListener('abort', () => audio.stream.destroy(), { once: true });
      let meetingId = row.meeting_id;
      try {
        if (!meetingId) {
          // The meeting and its link to the recording commit together: a crash leaves neither, and
          // the next run makes it again.
          const meeting = await deps.meetings.create(
            row.workspace_id,
            {
              source: MeetingSource.bot,
              title: row.title || 'Meeting bot recording',
              language: null,
              windowMs: deps.config.windowMs,
              // U4: the person who asked for the bot (the event's poster, the feed's subscriber).
              ownerUserId: row.owner_user_id,
            },
            async (trx, created) => {
              if (!(await linkRecordingMeeting(trx, recordingId, created.id))) {
                throw new AppError(
                  ErrorKind.transient,
                  'bot.import_raced',
                  'another run linked a meeting first',
                );
              }
            },
          );
          meetingId = meeting.id;
        }
        // B10: the recording goes to the blob store as it downloads, never whole in memory.
        await storeRecording(
          deps,
          row.workspace_id,
          meetingId,
          {
            stream: audio.stream,
            declaredBytes: audio.declaredBytes,
            tooLarge: () =>
              new AppError(
                ErrorKind.permanent,
                'bot.recording_too_large',
                `the recording is larger than the upload limit of ${deps.config.maxUploadBytes} bytes`,
              ),
          },
          'audio/mpeg',
        );
      } finally {
        // Read to its end by the store, or given up: either way its connection is closed now.
        audio.stream.destroy();
      }
      // R11: who spoke comes apart, never holding the recording back.
      await ctx.complete(importSpeakersLater(deps, row, meetingId, ctx.actor));
    },
    // An import that ran out of retries is a failed recording with its reason, not one left
    // `processing` for ever.
    onTerminalFailure: async (trx, job, error) => {
      await moveBotRecording(trx, payloadOf(job, JobKind.importBotRecording).recordingId, BotStatus.failed, {
        actor: 'worker',
        reason: `the import gave up: ${error.code}`,
        when: (r) => r.status === BotStatus.processing,
        set: {
          failure_code: `bot.import_failed:${error.code}`.slice(0, 200),
          failure_message: `the recording could not be imported: ${error.message}`.slice(0, 500),
        },
      });
      return null;
    },
  };
}
