import { RecallBotProvider } from '../adapters/recall-bot-provider.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/schema.ts';
import type { BotProvider } from '../ports.ts';
import { RateBudget } from './rate-budget-store.ts';
import { egressGuardOf } from '../net/egress.ts';

/** R2: the installation's shared budget, with the configured limits and window. */
export function recallBudget(db: Db, config: Config): RateBudget {
  return new RateBudget(db, config.recall.limits, config.recall.rateWindowMs);
}

export interface BotDeps {
  provider: BotProvider;
  budget: RateBudget;
}

/**
 * R1/R2: the bot provider and the installation's shared budget for it, when a key is set. Built once,
 * by the composition root (src/app.ts), and handed to everything else as `MeetingDeps.bots`.
 */
export function buildBotDeps(config: Config, db: Db): BotDeps | null {
  const { recall } = config;
  if (!recall.apiKey) return null;
  return {
    provider: new RecallBotProvider({
      baseUrl: recall.url,
      apiKey: recall.apiKey,
      egress: egressGuardOf(config),
      maxDownloadBytes: config.maxUploadBytes,
    }),
    budget: recallBudget(db, config),
  };
}
