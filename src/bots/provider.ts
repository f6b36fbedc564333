import { RecallBotProvider } from '../adapters/recall-bot-provider.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/schema.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import type { BotProvider } from '../ports.ts';
import { RateBudget } from './rate-budget.ts';
import { egressGuardOf } from '../net/egress.ts';

/** Recall.ai's documented per-minute limits per endpoint (R2); the default of VERBATIM_RECALL_LIMITS. */
export const RECALL_LIMITS = {
  'bot.create': 60,
  'bot.list': 60,
  'bot.retrieve': 300,
  'bot.delete': 300,
  'bot.leave_call': 300,
};

/** R2: the installation's shared budget, with the configured limits and window. */
export function recallBudget(db: Db, config: Config): RateBudget {
  return new RateBudget(db, config.recall.limits, config.recall.rateWindowMs);
}

export interface BotDeps {
  provider: BotProvider;
  budget: RateBudget;
}

/** R1/R2: the bot provider and the installation's shared budget for it, when a key is set. */
export function botProviderOf(deps: MeetingDeps): BotDeps | null {
  const { recall } = deps.config;
  if (!recall.apiKey) return null;
  return {
    provider: new RecallBotProvider({
      baseUrl: recall.url,
      apiKey: recall.apiKey,
      egress: egressGuardOf(deps.config),
      maxDownloadBytes: deps.config.maxUploadBytes,
    }),
    budget: recallBudget(deps.db, deps.config),
  };
}
