/**
 * Meeting bots in the simulation: the fake Recall (test/support/fake-recall.ts) at the network
 * boundary, and a driver that plays the meetings its bots join. Each bot Verbatim makes goes
 * joining → recording → done on its own clock, with a recording of marked audio (so V1 holds for
 * bot meetings exactly as for the others), and each status change is announced by a signed
 * webhook to an api process. While faults are on, a quarter of those webhooks are lost and the
 * provider's API fails a share of calls (5xx, cut connections, creates whose answer is lost after
 * the bot was made, 429s with Retry-After): the backstop must find what the webhooks did not say.
 */
import { markedWav } from './marks.ts';
import {
  newRecallWebhookSecret,
  sendSignedWebhook,
  startFakeRecall,
  type FakeRecall,
  type FakeRecallFailure,
  type RecallEndpoint,
} from '../test/support/fake-recall.ts';
import type { Rng } from './rng.ts';

/** The mark every bot recording carries (a bot meeting is one recording, like an upload). */
export const BOT_MARK = 0;
/** W8: the mark of a bot recording's second speaker's stretch. */
export const SECOND_MARK = 1;
const META_RECORDING = 'verbatim_recording';
const LIMITS: Record<RecallEndpoint, number> = {
  create: 6,
  list: 6,
  retrieve: 20,
  delete: 20,
  leave_call: 20,
};
const WINDOW_MS = 2_000;

interface Driven {
  stage: 'waiting' | 'joining' | 'recording' | 'done';
  nextAt: number;
}

export class BotWorld {
  /**
   * What each recording's bot recorded (by recording id), once a bot finished: the number its
   * audio is marked with and its samples (mark BOT_MARK).
   */
  readonly recorded = new Map<
    string,
    {
      number: number;
      /** Samples per mark: BOT_MARK alone, or (W8) BOT_MARK said by Ann, then SECOND_MARK by Bob. */
      marks: Map<number, number>;
      /** W8: who said each mark, as the provider's speaker timeline says; null without one. */
      speakers: Map<number, string> | null;
    }
  >();
  private readonly driven = new Map<string, Driven>();
  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  lostWebhooks = 0;
  sentWebhooks = 0;
  providerFaults = 0;

  private constructor(
    readonly fake: FakeRecall,
    readonly secret: string,
    private readonly apiPorts: () => number[],
    private readonly rng: Rng,
    private readonly faultsOn: () => boolean,
    private readonly nextNumber: () => number,
  ) {}

  static async start(
    apiPorts: () => number[],
    rng: Rng,
    faultsOn: () => boolean,
    nextNumber: () => number,
  ): Promise<BotWorld> {
    const fake = await startFakeRecall({ limits: LIMITS, windowMs: WINDOW_MS });
    return new BotWorld(fake, newRecallWebhookSecret(), apiPorts, rng, faultsOn, nextNumber);
  }

  /** What the service needs to reach this provider, with its limits over the same short window. */
  env(): Record<string, string> {
    return {
      VERBATIM_RECALL_URL: this.fake.url,
      VERBATIM_RECALL_API_KEY: this.fake.apiKey,
      VERBATIM_RECALL_WEBHOOK_SECRETS: this.secret,
      VERBATIM_RECALL_LIMITS: Object.entries(LIMITS)
        .map(([e, n]) => `bot.${e}=${n}`)
        .join(','),
      VERBATIM_RECALL_RATE_WINDOW_SECONDS: String(WINDOW_MS / 1000),
      VERBATIM_BOT_BACKSTOP_SECONDS: '3',
      // A `done` whose webhook was lost is asked for soon after the meeting's end (120 s by default).
      VERBATIM_BOT_BACKFILL_AFTER_SECONDS: '2',
    };
  }

  /** Limits and every call's arrival, for V6. */
  calls(): Array<{ endpoint: string; at: number[]; limit: number; windowMs: number }> {
    return (Object.keys(LIMITS) as RecallEndpoint[]).map((e) => ({
      endpoint: `recall ${e}`,
      at: this.fake.arrivals[e],
      limit: LIMITS[e],
      windowMs: WINDOW_MS,
    }));
  }

  /** Bots the provider holds per recording (V5: never more than one). */
  botsPerRecording(): Map<string, number> {
    const out = new Map<string, number>();
    for (const bot of this.fake.bots()) {
      const recording = bot.metadata[META_RECORDING] ?? `(no metadata) ${bot.id}`;
      out.set(recording, (out.get(recording) ?? 0) + 1);
    }
    return out;
  }

  run(): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      this.tick()
        .catch(() => undefined)
        .finally(() => (this.busy = false));
    }, 250);
  }

  /** The heal: the provider answers every call again. */
  heal(): void {
    for (const e of ['create', 'list', 'retrieve', 'delete', 'leave_call', 'download'] as const)
      this.fake.clearFailures(e);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.fake.close();
  }

  private async tick(): Promise<void> {
    const now = Date.now();
    if (this.faultsOn() && this.rng.chance(0.15)) this.scheduleProviderFault();
    for (const bot of this.fake.bots()) {
      let d = this.driven.get(bot.id);
      if (!d) {
        // It joins at its join time (an ad-hoc bot at once), a moment after it was made.
        const joinAt = bot.joinAt ? Date.parse(bot.joinAt) : now;
        d = { stage: 'waiting', nextAt: Math.max(joinAt, now + 500) };
        this.driven.set(bot.id, d);
      }
      if (d.stage === 'done' || now < d.nextAt) continue;
      const recording = bot.metadata[META_RECORDING];
      if (d.stage === 'waiting') {
        await this.announce(bot.id, 'joining_call');
        d.stage = 'joining';
        d.nextAt = now + 500 + this.rng.int(1500);
      } else if (d.stage === 'joining') {
        await this.announce(bot.id, 'in_call_recording');
        d.stage = 'recording';
        d.nextAt = now + 2_000 + this.rng.int(4_000);
      } else {
        const samples = 16_000 * (6 + this.rng.int(20));
        // A bot with no recording of ours (a stray) still records: its audio is marked as one more meeting.
        const known = recording ? this.recorded.get(recording) : undefined;
        const number = known?.number ?? this.nextNumber();
        // W8, R11: most calls have two speakers the provider knows: Ann says the first stretch
        // (her turn starting before the recording did), Bob the rest; the speaker timeline says so.
        const first = Math.round(samples * (0.3 + 0.4 * this.rng.next()));
        const twoSpeakers = this.rng.chance(0.7);
        const stretches = twoSpeakers
          ? [
              { mark: BOT_MARK, samples: first },
              { mark: SECOND_MARK, samples: samples - first },
            ]
          : [{ mark: BOT_MARK, samples }];
        this.fake.setRecording(bot.id, markedWav(number, stretches));
        if (twoSpeakers) {
          const ann = { id: 1, name: 'Ann' };
          const bob = { id: 2, name: 'Bob' };
          this.fake.setSpeakers(bot.id, {
            participants: [ann, bob],
            timeline: [
              { participant: ann, start: -1.5, end: first / 16_000 },
              { participant: bob, start: first / 16_000, end: null },
            ],
          });
        }
        if (recording)
          this.recorded.set(recording, {
            number,
            marks: new Map(stretches.map((st) => [st.mark, st.samples])),
            speakers: twoSpeakers
              ? new Map([
                  [BOT_MARK, 'Ann'],
                  [SECOND_MARK, 'Bob'],
                ])
              : null,
          });
        await this.announce(bot.id, 'call_ended');
        await this.announce(bot.id, 'done');
        d.stage = 'done';
      }
    }
  }

  /** The status at the provider, then its webhook to an api process (lost a quarter of the time under faults). */
  private async announce(botId: string, code: string): Promise<void> {
    this.fake.pushStatus(botId, code);
    if (this.faultsOn() && this.rng.chance(0.25)) {
      this.lostWebhooks++;
      return;
    }
    const ports = this.apiPorts();
    const port = ports[this.rng.int(ports.length)]!;
    this.sentWebhooks++;
    await sendSignedWebhook(`http://127.0.0.1:${port}/providers/recall/webhooks`, {
      secrets: [this.secret],
      body: {
        event: 'bot.status_change',
        data: {
          bot: { id: botId, metadata: this.fake.bot(botId)?.metadata ?? {} },
          status: { code, sub_code: null, created_at: new Date().toISOString() },
        },
      },
    }).catch(() => {
      this.lostWebhooks++;
    });
  }

  private scheduleProviderFault(): void {
    const endpoint = this.rng.pick<RecallEndpoint | 'download'>([
      'create',
      'create',
      'list',
      'retrieve',
      'delete',
      'download',
    ]);
    const failure = this.rng.pick<FakeRecallFailure>([
      'reset',
      { status: 503, body: { detail: 'Service unavailable' } },
      { status: 429, body: { detail: 'Request was throttled.' }, headers: { 'retry-after': '1' } },
      ...(endpoint === 'create' ? (['drop_after_commit', 'drop_after_commit'] as const) : []),
    ]);
    this.fake.failNext(endpoint, failure);
    this.providerFaults++;
  }
}
