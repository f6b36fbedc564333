/**
 * The providers at the network boundary, for the simulation: a Whisper-compatible recogniser that
 * reads the simulation's marks (sim/marks.ts) and takes the time PocketSphinx takes on this
 * machine, and an OpenAI-compatible chat endpoint. Each enforces a rate limit the way the real
 * APIs do (past it, 429 with Retry-After), and each request asks `decide` how to answer, so the
 * driver injects the provider's failure modes from its seed while faults are on: 5xx, 429 with
 * Retry-After, a quota error, a reset connection, and an answer that never comes (the client's own
 * timeout ends it). Every request and its answer is logged: the oracle's witnesses of what the
 * service asked (V4, V6, V11).
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readAudio, samplesOfWav, SAMPLE_RATE, wordOf, type Run } from './marks.ts';
import type { Rng } from './rng.ts';

export type ProviderReply = 'ok' | '503' | '429' | 'quota' | 'reset' | 'hang';

/**
 * The Retry-After (seconds) of a 429: past the limit, the time until a slot frees but at least
 * MIN_RETRY_AFTER_S; injected, INJECTED_RETRY_AFTER_S. Longer than the service's own backoff plus
 * graphile-worker's poll (about 2 s), so a retry that ignores it arrives inside it and shows (V6).
 */
export const MIN_RETRY_AFTER_S = 3;
export const INJECTED_RETRY_AFTER_S = 5;

/** One request a provider fake received, and how it was answered. */
export interface ProviderCall {
  /** Its number at this provider; a recognition's words carry it (`k<call>`). */
  call: number;
  /** What was asked: the SHA-256 of the audio (speech) or of the messages (chat). */
  identity: string;
  arrivedAt: number;
  /** When the answer was sent (or the connection cut); null while it was never answered. */
  answeredAt: number | null;
  /**
   * `ok`; an injected fault; `limited` (429 past the rate limit); `abandoned` (the caller hung up
   * before the answer was ready: nothing it was told).
   */
  outcome: ProviderReply | 'limited' | 'abandoned';
  /** The Retry-After of a 429, in ms. */
  retryAfterMs?: number;
  /** Speech: the runs the recogniser heard (answered ok or not). */
  runs?: Run[];
}

export interface RateLimit {
  limit: number;
  windowMs: number;
}

export interface FakeProvider {
  url: string;
  calls(): number;
  faults(): Map<ProviderReply, number>;
  log: ProviderCall[];
  rate: RateLimit;
  close(): Promise<void>;
}

async function serve(opts: {
  decide: () => ProviderReply;
  rate: RateLimit;
  identify: (body: Buffer, req: http.IncomingMessage) => Promise<string>;
  /** The answer and how long it takes to make it (ms). */
  answer: (
    body: Buffer,
    req: http.IncomingMessage,
    call: ProviderCall,
  ) => Promise<{ status: number; json: unknown; delayMs: number }>;
}): Promise<FakeProvider> {
  const log: ProviderCall[] = [];
  const faults = new Map<ProviderReply, number>();
  const admitted: number[] = [];
  const server = http.createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    const arrivedAt = Date.now();
    req.on('end', () => void handle(Buffer.concat(body), arrivedAt));
    const handle = async (raw: Buffer, arrivedAt: number) => {
      const entry: ProviderCall = {
        call: log.length + 1,
        identity: '',
        arrivedAt,
        answeredAt: null,
        outcome: 'ok',
      };
      log.push(entry);
      entry.identity = await opts.identify(raw, req).catch(() => 'unreadable');
      const json = (status: number, value: unknown, headers: Record<string, string> = {}) => {
        entry.answeredAt = Date.now();
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(value));
      };
      const tooMany = (retryAfterS: number) => {
        entry.retryAfterMs = retryAfterS * 1000;
        json(
          429,
          {
            error: {
              message: 'Rate limit reached for requests',
              type: 'requests',
              code: 'rate_limit_exceeded',
            },
          },
          { 'retry-after': String(retryAfterS) },
        );
      };
      // The limit, as the real APIs count it: requests admitted in the last window.
      const now = Date.now();
      while (admitted.length > 0 && admitted[0]! <= now - opts.rate.windowMs) admitted.shift();
      if (admitted.length >= opts.rate.limit) {
        entry.outcome = 'limited';
        return tooMany(
          Math.max(MIN_RETRY_AFTER_S, Math.ceil((admitted[0]! + opts.rate.windowMs - now) / 1000)),
        );
      }
      admitted.push(now);
      const reply = opts.decide();
      entry.outcome = reply;
      if (reply !== 'ok') faults.set(reply, (faults.get(reply) ?? 0) + 1);
      switch (reply) {
        case '503':
          return json(503, { error: { message: 'The server is overloaded', type: 'server_error' } });
        case '429':
          return tooMany(INJECTED_RETRY_AFTER_S);
        case 'quota':
          return json(429, {
            error: {
              message: 'You exceeded your current quota',
              type: 'insufficient_quota',
              code: 'insufficient_quota',
            },
          });
        case 'reset':
          entry.answeredAt = Date.now();
          req.socket.destroy();
          return;
        case 'hang':
          // Never answered: the caller's timeout ends it; the socket goes when the caller gives up.
          return;
        case 'ok': {
          let gone = false;
          res.on('close', () => {
            if (!res.writableEnded) gone = true;
          });
          opts
            .answer(raw, req, entry)
            .then(async (a) => {
              await new Promise((r) => setTimeout(r, a.delayMs));
              if (gone || res.destroyed) {
                entry.outcome = 'abandoned';
                return;
              }
              json(a.status, a.json);
            })
            .catch((err: unknown) => json(500, { error: { message: String(err) } }));
          return;
        }
      }
    };
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => log.length,
    faults: () => faults,
    log,
    rate: opts.rate,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * How long PocketSphinx takes on this machine (2 cores; measured with `pocketsphinx_continuous`
 * on flite speech, docs/simulation.md): about 0.45 s to load its model plus 0.30 s per second of
 * audio (8 s: 2.66 s; 20 s: 6.0 s; 60 s: 18.6–19.2 s). Drawn around that with a spread of about
 * 15% and a tail: one call in twenty takes 1.5–3 times as long (a busy machine).
 */
export function recognitionMs(audioSeconds: number, rng: Rng): number {
  const base = 450 + 300 * audioSeconds;
  // A log-normal spread (Box–Muller from two uniform draws).
  const z = Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  const spread = Math.exp(0.15 * z);
  const tail = rng.chance(0.05) ? 1.5 + 1.5 * rng.next() : 1;
  return Math.round(base * spread * tail);
}

/**
 * Whisper (`verbose_json`): each run the recogniser hears becomes a segment whose one word names
 * the run and this call (`m<meeting>c<mark>x<samples>k<call>`, sim/marks.ts).
 */
export function startRecognizer(
  decide: () => ProviderReply,
  rng: Rng,
  rate: RateLimit,
): Promise<FakeProvider> {
  return serve({
    decide,
    rate,
    identify: async (body, req) =>
      createHash('sha256')
        .update(Buffer.from((await (await formFile(body, req))?.arrayBuffer()) ?? new ArrayBuffer(0)))
        .digest('hex'),
    answer: async (body, req, call) => {
      const file = await formFile(body, req);
      const samples = file instanceof Blob ? samplesOfWav(Buffer.from(await file.arrayBuffer())) : null;
      if (!samples) return { status: 400, json: { error: { message: 'Invalid file format.' } }, delayMs: 0 };
      const runs = readAudio(samples);
      call.runs = runs;
      const segments = runs.map((run, id) => ({
        id,
        start: run.from / SAMPLE_RATE,
        end: (run.from + run.samples) / SAMPLE_RATE,
        text: ` ${wordOf(run, call.call)}`,
      }));
      return {
        status: 200,
        json: {
          text: segments.map((s) => s.text).join(''),
          duration: samples.length / SAMPLE_RATE,
          segments,
        },
        delayMs: recognitionMs(samples.length / SAMPLE_RATE, rng),
      };
    },
  });
}

/** The audio file of a multipart request, or null when there is none. */
async function formFile(body: Buffer, req: http.IncomingMessage): Promise<Blob | null> {
  const form = await new Response(body, {
    headers: { 'content-type': String(req.headers['content-type']) },
  }).formData();
  const file = form.get('file');
  return file instanceof Blob ? file : null;
}

/** Chat completions: a fixed, well-formed set of minutes, after a model's thinking time. */
export function startChat(decide: () => ProviderReply, rng: Rng, rate: RateLimit): Promise<FakeProvider> {
  return serve({
    decide,
    rate,
    identify: (body) => {
      let messages: unknown = body.toString('utf8');
      try {
        messages = (JSON.parse(body.toString('utf8')) as { messages?: unknown }).messages;
      } catch {
        // not JSON: the body itself
      }
      return Promise.resolve(createHash('sha256').update(JSON.stringify(messages)).digest('hex'));
    },
    answer: () =>
      Promise.resolve({
        status: 200,
        json: {
          id: 'chatcmpl-sim',
          object: 'chat.completion',
          choices: [
            {
              index: 0,
              finish_reason: 'stop',
              message: {
                role: 'assistant',
                content: JSON.stringify({ summary: 'A simulated meeting.', decisions: [], action_items: [] }),
              },
            },
          ],
        },
        delayMs: 300 + rng.int(900),
      }),
  });
}
