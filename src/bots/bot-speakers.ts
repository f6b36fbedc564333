import { AppError, ErrorKind } from '../domain/errors.ts';
import { JobKind } from '../domain/status.ts';
import type { JobDefinition } from '../jobs/job-definition.ts';
import { payloadOf } from '../jobs/catalog.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { applyBotSpeakers } from '../meetings/speakers.ts';
import type { BotProvider } from '../ports.ts';
import { recordingById } from './bot-recording-store.ts';
import type { RateBudget } from './rate-budget-store.ts';

/**
 * R11: a bot meeting's speakers from the provider: the bot is retrieved for fresh links to its
 * recording's participants and speaker timeline, both are downloaded, and the meeting's speakers
 * and turns are written. It runs apart from the recording's import, which never waits for it: a
 * timeline not made yet, a download that fails or an expired link is asked again (the import's
 * patience); a recording the provider made no participant events for leaves the speakers unknown.
 */
export function importBotSpeakersJob(
  deps: MeetingDeps,
  bots: { provider: BotProvider; budget: RateBudget } | null,
): JobDefinition<typeof JobKind.importBotSpeakers> {
  return {
    kind: JobKind.importBotSpeakers,
    run: async (ctx) => {
      if (!bots)
        throw new AppError(ErrorKind.permanent, 'bot.not_configured', 'no bot provider is configured');
      const { recordingId, meetingId } = payloadOf(ctx.job, JobKind.importBotSpeakers);
      const row = await recordingById(deps.db, recordingId);
      const meeting = await deps.meetings.findById(meetingId);
      if (!row?.bot_id || !meeting) {
        // The recording or its meeting was deleted meanwhile: nothing to name.
        await ctx.complete();
        return;
      }
      const botId = row.bot_id;
      const got = await bots.budget.guard('bot.retrieve', 30_000, () => bots.provider.retrieveBot(botId));
      if (!got.ok) {
        await ctx.requeue(30_000, 'provider budget spent');
        return;
      }
      const bot = got.value;
      if (!bot.speakerLinks) {
        if (bot.speakersPending)
          throw new AppError(
            ErrorKind.transient,
            'bot.speakers_unavailable',
            'the provider is still making the participant events',
          );
        ctx.log.info({ recordingId, meetingId }, 'the provider has no speaker timeline for this recording');
        await ctx.complete();
        return;
      }
      const speakers = await bots.provider.downloadSpeakers(bot);
      if (!speakers) {
        await ctx.complete();
        return;
      }
      // Written with the job's completion, under its fence: a run that lost its lease writes nothing.
      let applied: { speakers: number; turns: number } | null = null;
      await ctx.complete(async (trx) => {
        applied = await applyBotSpeakers(deps, trx, meetingId, speakers, ctx.actor);
      });
      ctx.log.info({ recordingId, meetingId, ...(applied ?? {}) }, 'speaker timeline imported');
    },
  };
}
