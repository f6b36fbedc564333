import type { FastifyInstance } from 'fastify';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A Recall.ai-compatible bot API on 127.0.0.1, behaving as documented (sources in
 * src/adapters/recall-bot-provider.ts):
 * - `Authorization: Token <key>` (or the bare key) or 401 {"detail": …};
 * - per-endpoint limits per sliding minute, 429 with `Retry-After: <seconds>` beyond them;
 * - `Idempotency-Key` per method + path: a completed create within the retention (default one
 *   hour) replays the original response (201 and the bot as it was created); a create still in
 *   flight makes the duplicate answer 409. Only completed creates are remembered: a create that
 *   failed (400, 507) can be retried with the same key; a scripted failure is served before the key
 *   is looked at and leaves it as it was;
 * - 507 for ad-hoc creates (no `join_at`, or one less than 10 minutes ahead) while the ad-hoc pool
 *   is empty — scheduled bots never get 507, as documented;
 * - list filtered by `metadata__<key>`, `status` (repeatable, latest status), `join_at_after`,
 *   `join_at_before`, paginated with `page_size` and an opaque `cursor` inside the `next` URL;
 * - delete: 204 for a bot still `ready`, 405 once dispatched, 404 when unknown;
 * - bots answer `meeting_url` as a parsed {platform, meeting_id} object, like the real API.
 * Time is the fake's own clock (`advanceTime`), so tests never sleep through a rate window or a
 * key's retention.
 */

export type RecallEndpoint = 'create' | 'list' | 'retrieve' | 'delete' | 'leave_call';
/** Pre-signed storage links: the recording, and (R11) its participants and speaker timeline. */
export type Download = 'download' | 'speakers_download';

/** R11: a participant as Recall's downloads name one. */
export interface FakeParticipant {
  id: number;
  name: string | null;
  email?: string | null;
}

/** R11: a bot's participant events, as the provider makes them after the recording. */
export interface FakeSpeakers {
  participants: FakeParticipant[];
  /** Seconds relative to the recording's start (in_call_recording); negative before it. */
  timeline: Array<{ participant: FakeParticipant; start: number; end: number | null }>;
}

/** One scripted answer, used once, in place of the normal one. */
export type FakeRecallFailure =
  /** Commit the create (bot stored, key remembered), then cut the connection: a lost response. */
  | 'drop_after_commit'
  /** Cut the connection without doing anything. */
  | 'reset'
  /** Never answer (until close). */
  | 'hang'
  /** A download only: the headers and half the bytes, then the connection is cut. */
  | 'cut_midway'
  | { status: number; body?: unknown; headers?: Record<string, string> };

export interface FakeRecallOptions {
  apiKey?: string;
  /** Requests per minute per endpoint. Defaults (R2): list 60, create 60, retrieve 300, delete 300. */
  limits?: Partial<Record<RecallEndpoint, number>>;
  /**
   * The period the limits count over. Recall's is a minute; tests that must watch a budget run dry
   * and refill many times compress it (the budget under test is given the same period).
   */
  windowMs?: number;
  /** How long a completed create's key replays it. Default one hour. */
  idempotencyRetentionMs?: number;
  /** Results per list page unless the request asks (`page_size`). Default 10. */
  pageSize?: number;
}

export interface FakeStatusChange {
  code: string;
  sub_code: string | null;
  message: string | null;
  created_at: string;
}

export interface FakeBot {
  id: string;
  meetingUrl: string;
  botName: string;
  joinAt: string | null;
  metadata: Record<string, string>;
  recordingConfig: unknown;
  statusChanges: FakeStatusChange[];
  /** undefined: no recording yet; null: a recording without audio; a Buffer (maybe empty): its audio. */
  recording: Buffer | null | undefined;
  mediaToken: string | undefined;
  /** R11: undefined: none; 'pending': being made; else its participants and timeline. */
  speakers: FakeSpeakers | 'pending' | undefined;
  createdAt: string;
}

export interface LoggedRequest {
  endpoint: RecallEndpoint | Download | 'unknown';
  method: string;
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  body: string;
}

export interface FakeRecall {
  /** Base URL for `RecallBotProvider` (`http://127.0.0.1:<port>`). */
  url: string;
  apiKey: string;
  /** Requests received per endpoint, including refused ones. */
  calls: Record<RecallEndpoint | Download, number>;
  /** Requests answered 429 per endpoint. */
  rateLimited: Record<RecallEndpoint, number>;
  /** When each request reached the rate check (the fake's clock), admitted or not, per endpoint. */
  arrivals: Record<RecallEndpoint, number[]>;
  /** Most requests sent in any sliding window (a minute by default), per endpoint, refused ones included. */
  peakPerMinute: Record<RecallEndpoint, number>;
  /** Mutable at any time. */
  limits: Record<RecallEndpoint, number>;
  requests: LoggedRequest[];
  /** While true, ad-hoc creates answer 507. */
  adhocPoolEmpty: boolean;
  /** Retry-After sent with 507 (seconds), or null to send none (older docs). */
  noCapacityRetryAfter: number | null;
  now(): number;
  advanceTime(ms: number): void;
  failNext(endpoint: RecallEndpoint | Download, failure: FakeRecallFailure, times?: number): void;
  /** Forgets a bot, as the provider does when it is deleted elsewhere or expires. */
  removeBot(botId: string): void;
  /** Drops the queued failures of an endpoint that were not served. */
  clearFailures(endpoint: RecallEndpoint | Download): void;
  /** How many queued failures of an endpoint have not been served yet. */
  failuresLeft(endpoint: RecallEndpoint | Download): number;
  /**
   * Holds the next create after its key is marked in flight and before it commits, so a test can
   * send a duplicate meanwhile. `arrived` resolves once the create is being held.
   */
  holdNextCreate(): { arrived: Promise<void>; release(): void; clientGaveUp(): boolean };
  bots(): FakeBot[];
  bot(id: string): FakeBot | undefined;
  pushStatus(botId: string, code: string, subCode?: string | null, message?: string | null): void;
  /** Attach a recording: bytes (possibly empty) served from a download link, or null for none. */
  setRecording(botId: string, audio: Buffer | null): void;
  /** R11: the recording's participant events: 'pending' while being made, then the data. */
  setSpeakers(botId: string, speakers: FakeSpeakers | 'pending'): void;
  close(): Promise<void>;
}

const BOT_PATH = /^\/api\/v1\/bot\/?$/;
const ONE_BOT_PATH = /^\/api\/v1\/bot\/([^/]+)\/?$/;
const LEAVE_PATH = /^\/api\/v1\/bot\/([^/]+)\/leave_call\/?$/;
const IN_CALL = new Set([
  'joining_call',
  'in_waiting_room',
  'in_call_not_recording',
  'recording_permission_allowed',
  'in_call_recording',
]);
const MEDIA_PATH = /^\/media\/([A-Za-z0-9_-]+)\.mp3$/;
const SPEAKERS_PATH = /^\/media\/([A-Za-z0-9_-]+)\/(participants|speaker_timeline)\.json$/;
const ADHOC_MS = 10 * 60_000;

type IdempotencyEntry = { state: 'in_flight' } | { state: 'done'; status: number; body: string; at: number };

export async function startFakeRecall(options: FakeRecallOptions = {}): Promise<FakeRecall> {
  const WINDOW_MS = options.windowMs ?? 60_000;
  const apiKey = options.apiKey ?? `recall-test-${randomBytes(12).toString('hex')}`;
  const retentionMs = options.idempotencyRetentionMs ?? 3_600_000;
  const defaultPageSize = options.pageSize ?? 10;
  let offsetMs = 0;
  const now = (): number => Date.now() + offsetMs;
  const iso = (ms: number = now()): string => new Date(ms).toISOString();

  const zero = (): Record<RecallEndpoint, number> => ({
    create: 0,
    list: 0,
    retrieve: 0,
    delete: 0,
    leave_call: 0,
  });
  const limits: Record<RecallEndpoint, number> = {
    list: 60,
    create: 60,
    retrieve: 300,
    delete: 300,
    leave_call: 300,
    ...options.limits,
  };
  const admitted: Record<RecallEndpoint, number[]> = {
    create: [],
    list: [],
    retrieve: [],
    delete: [],
    leave_call: [],
  };
  const failures = new Map<RecallEndpoint | Download, FakeRecallFailure[]>();
  const holds: { arrived: () => void; released: Promise<void>; clientGaveUp: () => void }[] = [];
  const idempotency = new Map<string, IdempotencyEntry>();
  const bots = new Map<string, FakeBot>();
  /** Download token → bot id; a link stays valid while the bot keeps its recording. */
  const media = new Map<string, string>();
  const hung: http.ServerResponse[] = [];
  let url = '';

  const fake: FakeRecall = {
    url: '',
    apiKey,
    calls: { ...zero(), download: 0, speakers_download: 0 },
    rateLimited: zero(),
    arrivals: { create: [], list: [], retrieve: [], delete: [], leave_call: [] },
    peakPerMinute: zero(),
    limits,
    requests: [],
    adhocPoolEmpty: false,
    noCapacityRetryAfter: null,
    now,
    advanceTime: (ms) => {
      offsetMs += ms;
    },
    failNext: (endpoint, failure, times = 1) => {
      const queue = failures.get(endpoint) ?? [];
      for (let i = 0; i < times; i++) queue.push(failure);
      failures.set(endpoint, queue);
    },
    clearFailures: (endpoint) => failures.delete(endpoint),
    removeBot: (botId) => bots.delete(botId),
    failuresLeft: (endpoint) => failures.get(endpoint)?.length ?? 0,
    holdNextCreate: () => {
      let arrived!: () => void;
      let release!: () => void;
      const arrivedPromise = new Promise<void>((resolve) => (arrived = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      let gaveUp = false;
      holds.push({ arrived, released, clientGaveUp: () => (gaveUp = true) });
      return { arrived: arrivedPromise, release, clientGaveUp: () => gaveUp };
    },
    bots: () => [...bots.values()],
    bot: (id) => bots.get(id),
    pushStatus: (botId, code, subCode = null, message = null) => {
      const bot = bots.get(botId);
      if (!bot) throw new Error(`fake recall: no bot ${botId}`);
      bot.statusChanges.push({ code, sub_code: subCode, message, created_at: iso() });
    },
    setSpeakers: (botId, speakers) => {
      const bot = bots.get(botId);
      if (!bot) throw new Error(`fake recall: no bot ${botId}`);
      bot.speakers = speakers;
      if (!bot.mediaToken) {
        bot.mediaToken = randomBytes(12).toString('hex');
        media.set(bot.mediaToken, bot.id);
      }
    },
    setRecording: (botId, audio) => {
      const bot = bots.get(botId);
      if (!bot) throw new Error(`fake recall: no bot ${botId}`);
      bot.recording = audio;
      bot.mediaToken = randomBytes(12).toString('hex');
      media.set(bot.mediaToken, bot.id);
    },
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  function json(
    res: http.ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  }

  function platformOf(meetingUrl: string): { platform: string; meeting_id: string } {
    let host = '';
    let path = '';
    try {
      const parsed = new URL(meetingUrl);
      host = parsed.hostname;
      path = parsed.pathname;
    } catch {
      // keep empty
    }
    const platform = host.endsWith('meet.google.com')
      ? 'google_meet'
      : host.endsWith('zoom.us')
        ? 'zoom'
        : host.endsWith('teams.microsoft.com') || host.endsWith('teams.live.com')
          ? 'microsoft_teams'
          : 'webex';
    return { platform, meeting_id: path.split('/').filter(Boolean).at(-1) ?? '' };
  }

  function serialize(bot: FakeBot): Record<string, unknown> {
    let recordings: unknown[] = [];
    if (bot.recording !== undefined) {
      let audioMixed: unknown = null;
      if (bot.recording !== null) {
        audioMixed = {
          id: randomUUID(),
          status: { code: 'done', sub_code: null, updated_at: iso() },
          format: 'mp3',
          data: { download_url: `${url}/media/${bot.mediaToken}.mp3` },
        };
      }
      recordings = [
        {
          id: `rec-${bot.id}`,
          status: { code: 'done', sub_code: null, updated_at: iso() },
          media_shortcuts: { audio_mixed: audioMixed, participant_events: participantEvents(bot) },
        },
      ];
    }
    const dispatched = bot.statusChanges.some((change) => change.code !== 'ready');
    return {
      id: bot.id,
      bot_name: bot.botName,
      meeting_url: platformOf(bot.meetingUrl),
      // Readable only for scheduled bots that have not joined.
      join_at: dispatched ? null : bot.joinAt,
      metadata: bot.metadata,
      status_changes: bot.statusChanges,
      recordings,
      created_at: bot.createdAt,
    };
  }

  /** R11: `media_shortcuts.participant_events` as Recall shows it: links once done. */
  function participantEvents(bot: FakeBot): unknown {
    if (bot.speakers === undefined) return null;
    if (bot.speakers === 'pending')
      return {
        id: randomUUID(),
        status: { code: 'processing', sub_code: null, updated_at: iso() },
        data: {},
      };
    return {
      id: randomUUID(),
      status: { code: 'done', sub_code: null, updated_at: iso() },
      data: {
        participants_download_url: `${url}/media/${bot.mediaToken}/participants.json`,
        speaker_timeline_download_url: `${url}/media/${bot.mediaToken}/speaker_timeline.json`,
      },
    };
  }

  /** R11: the download schemas' participant: {id, name, is_host, platform, extra_data, email}. */
  function participantJson(p: FakeParticipant): Record<string, unknown> {
    return {
      id: p.id,
      name: p.name,
      is_host: false,
      platform: 'desktop',
      extra_data: null,
      email: p.email ?? null,
    };
  }

  /** A relative offset with its absolute time (from the first in_call_recording). */
  function stamp(bot: FakeBot, seconds: number | null): unknown {
    if (seconds === null) return null;
    const startedAt =
      bot.statusChanges.find((c) => c.code === 'in_call_recording')?.created_at ?? bot.createdAt;
    return { relative: seconds, absolute: new Date(Date.parse(startedAt) + seconds * 1000).toISOString() };
  }

  /** Sliding-minute limit: admits and records the request, or answers the seconds to wait. */
  function admit(endpoint: RecallEndpoint): number | null {
    const t = now();
    fake.arrivals[endpoint].push(t);
    // The peak counts every request that reached us in the last minute, refused or not: it is
    // what the client sent, so a client over the limit shows a peak over the limit.
    const sent = fake.arrivals[endpoint].filter((at) => at > t - WINDOW_MS).length;
    fake.peakPerMinute[endpoint] = Math.max(fake.peakPerMinute[endpoint], sent);
    const window = admitted[endpoint].filter((at) => at > t - WINDOW_MS);
    admitted[endpoint] = window;
    if (window.length >= limits[endpoint]) {
      const oldest = window[0] ?? t;
      return Math.max(1, Math.ceil((oldest + WINDOW_MS - t) / 1000));
    }
    window.push(t);
    return null;
  }

  function authorized(header: string | undefined): boolean {
    return header === `Token ${apiKey}` || header === apiKey;
  }

  async function handleCreate(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rawBody: string,
    failure: FakeRecallFailure | undefined,
  ): Promise<void> {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(rawBody) as Record<string, unknown>;
    } catch {
      json(res, 400, { detail: 'JSON parse error' });
      return;
    }
    if (typeof body.meeting_url !== 'string' || body.meeting_url === '') {
      json(res, 400, { meeting_url: ['This field is required.'] });
      return;
    }
    const metadata = body.metadata ?? {};
    if (
      typeof metadata !== 'object' ||
      metadata === null ||
      Object.values(metadata).some((v) => typeof v !== 'string' || v.length > 500)
    ) {
      json(res, 400, { metadata: ['Values must be strings of at most 500 characters.'] });
      return;
    }
    let joinAtMs: number | null = null;
    if (body.join_at !== undefined && body.join_at !== null) {
      joinAtMs = typeof body.join_at === 'string' ? Date.parse(body.join_at) : NaN;
      if (Number.isNaN(joinAtMs)) {
        json(res, 400, { join_at: ['Datetime has wrong format.'] });
        return;
      }
    }

    // A scripted answer (an outage at the provider's edge, a cut connection) comes before the key
    // is consulted and leaves it as it was: a key whose create completed still replays it later.
    if (failure !== undefined && failure !== 'drop_after_commit') {
      applyFailure(req, res, failure);
      return;
    }
    const key = headerValue(req.headers['idempotency-key']);
    const scope = key === undefined ? undefined : `POST /api/v1/bot/ ${key}`;
    if (scope !== undefined) {
      const entry = idempotency.get(scope);
      if (entry?.state === 'in_flight') {
        json(res, 409, { detail: 'A request with this Idempotency-Key is already being processed.' });
        return;
      }
      if (entry?.state === 'done' && now() - entry.at < retentionMs) {
        res.writeHead(entry.status, { 'content-type': 'application/json' }).end(entry.body);
        return;
      }
      idempotency.set(scope, { state: 'in_flight' });
    }
    const forget = () => {
      if (scope !== undefined) idempotency.delete(scope);
    };

    if (fake.adhocPoolEmpty && (joinAtMs === null || joinAtMs - now() < ADHOC_MS)) {
      forget();
      const headers: Record<string, string> =
        fake.noCapacityRetryAfter === null ? {} : { 'retry-after': String(fake.noCapacityRetryAfter) };
      json(res, 507, { detail: 'No ad-hoc bots are available. Please retry in 30 seconds.' }, headers);
      return;
    }
    const hold = holds.shift();
    if (hold) {
      res.on('close', () => {
        if (!res.writableEnded) hold.clientGaveUp();
      });
      hold.arrived();
      await hold.released;
    }

    const bot: FakeBot = {
      id: randomUUID(),
      meetingUrl: body.meeting_url,
      botName: typeof body.bot_name === 'string' ? body.bot_name : 'Meeting Notetaker',
      joinAt: joinAtMs === null ? null : new Date(joinAtMs).toISOString(),
      metadata: metadata as Record<string, string>,
      recordingConfig: body.recording_config ?? null,
      statusChanges: [{ code: 'ready', sub_code: null, message: null, created_at: iso() }],
      recording: undefined,
      mediaToken: undefined,
      speakers: undefined,
      createdAt: iso(),
    };
    bots.set(bot.id, bot);
    const responseBody = JSON.stringify(serialize(bot));
    if (scope !== undefined)
      idempotency.set(scope, { state: 'done', status: 201, body: responseBody, at: now() });
    if (failure === 'drop_after_commit') {
      req.socket.destroy();
      return;
    }
    res.writeHead(201, { 'content-type': 'application/json' }).end(responseBody);
  }

  function handleList(res: http.ServerResponse, query: URLSearchParams): void {
    const metadata = [...query.entries()]
      .filter(([name]) => name.startsWith('metadata__'))
      .map(([name, value]) => [name.slice('metadata__'.length), value] as const);
    const statuses = query.getAll('status');
    const after = query.get('join_at_after');
    const before = query.get('join_at_before');
    const afterMs = after === null ? null : Date.parse(after);
    const beforeMs = before === null ? null : Date.parse(before);
    if (Number.isNaN(afterMs) || Number.isNaN(beforeMs)) {
      json(res, 400, { join_at_after: ['Enter a valid date/time.'] });
      return;
    }
    const pageSize = Math.max(
      1,
      Math.min(100, Number(query.get('page_size') ?? defaultPageSize) || defaultPageSize),
    );
    const cursor = query.get('cursor');
    const offset = cursor === null ? 0 : Number(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Number.isInteger(offset) || offset < 0) {
      json(res, 400, { detail: 'Invalid cursor' });
      return;
    }

    const matching = [...bots.values()].filter((bot) => {
      if (metadata.some(([k, v]) => bot.metadata[k] !== v)) return false;
      if (statuses.length > 0 && !statuses.includes(bot.statusChanges.at(-1)?.code ?? 'ready')) return false;
      const joinAt = bot.joinAt === null ? null : Date.parse(bot.joinAt);
      if (afterMs !== null && (joinAt === null || joinAt < afterMs)) return false;
      if (beforeMs !== null && (joinAt === null || joinAt > beforeMs)) return false;
      return true;
    });
    const page = matching.slice(offset, offset + pageSize);
    const link = (at: number): string => {
      const params = new URLSearchParams(query);
      params.set('cursor', Buffer.from(String(at)).toString('base64url'));
      return `${url}/api/v1/bot/?${params.toString()}`;
    };
    json(res, 200, {
      next: offset + pageSize < matching.length ? link(offset + pageSize) : null,
      previous: offset > 0 ? link(Math.max(0, offset - pageSize)) : null,
      results: page.map(serialize),
    });
  }

  function applyFailure(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    failure: FakeRecallFailure,
  ): void {
    if (failure === 'reset' || failure === 'drop_after_commit') {
      req.socket.destroy();
    } else if (failure === 'hang') {
      hung.push(res);
    } else if (failure === 'cut_midway') {
      req.socket.destroy();
    } else {
      json(
        res,
        failure.status,
        failure.body ?? { detail: `scripted HTTP ${failure.status}` },
        failure.headers,
      );
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, rawBody: string): Promise<void> {
    const parsed = new URL(req.url ?? '/', 'http://fake');
    const method = req.method ?? 'GET';
    const oneBot = ONE_BOT_PATH.exec(parsed.pathname) ?? LEAVE_PATH.exec(parsed.pathname);
    const leave = LEAVE_PATH.test(parsed.pathname);
    const mediaMatch = MEDIA_PATH.exec(parsed.pathname);
    let endpoint: RecallEndpoint | Download | 'unknown' = 'unknown';
    if (BOT_PATH.test(parsed.pathname) && method === 'POST') endpoint = 'create';
    else if (BOT_PATH.test(parsed.pathname) && method === 'GET') endpoint = 'list';
    else if (leave && method === 'POST') endpoint = 'leave_call';
    else if (oneBot && !leave && method === 'GET') endpoint = 'retrieve';
    else if (oneBot && !leave && method === 'DELETE') endpoint = 'delete';
    else if (mediaMatch && method === 'GET') endpoint = 'download';
    const speakersMatch = SPEAKERS_PATH.exec(parsed.pathname);
    if (speakersMatch && method === 'GET') endpoint = 'speakers_download';

    fake.requests.push({
      endpoint,
      method,
      path: `${parsed.pathname}${parsed.search}`,
      authorization: headerValue(req.headers.authorization),
      idempotencyKey: headerValue(req.headers['idempotency-key']),
      body: rawBody,
    });

    if (endpoint === 'unknown') {
      json(res, 404, { detail: 'Not found.' });
      return;
    }
    fake.calls[endpoint]++;
    const failure = failures.get(endpoint)?.shift();

    if (endpoint === 'speakers_download') {
      // R11: pre-signed links too, no API key involved.
      if (failure !== undefined) return applyFailure(req, res, failure);
      const owner = speakersMatch ? bots.get(media.get(speakersMatch[1]!) ?? '') : undefined;
      const data = owner?.speakers;
      if (!owner || data === undefined || data === 'pending') {
        res
          .writeHead(403, { 'content-type': 'application/xml' })
          .end('<Error><Code>AccessDenied</Code></Error>');
        return;
      }
      if (speakersMatch![2] === 'participants') return json(res, 200, data.participants.map(participantJson));
      return json(
        res,
        200,
        data.timeline.map((t) => ({
          participant: participantJson(t.participant),
          start_timestamp: stamp(owner, t.start),
          end_timestamp: stamp(owner, t.end),
        })),
      );
    }

    if (endpoint === 'download') {
      // A pre-signed storage link: no API key involved.
      if (failure !== undefined && failure !== 'cut_midway') return applyFailure(req, res, failure);
      const owner = mediaMatch ? bots.get(media.get(mediaMatch[1]!) ?? '') : undefined;
      const bytes = owner?.recording;
      if (failure === 'cut_midway' && bytes) {
        res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(bytes.length) });
        res.write(bytes.subarray(0, Math.floor(bytes.length / 2)), () => res.socket?.destroy());
        return;
      }
      if (!bytes) {
        res
          .writeHead(403, { 'content-type': 'application/xml' })
          .end('<Error><Code>AccessDenied</Code></Error>');
        return;
      }
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(bytes.length) }).end(bytes);
      return;
    }

    if (!authorized(headerValue(req.headers.authorization))) {
      json(res, 401, { detail: 'Invalid token.' });
      return;
    }
    const wait = admit(endpoint);
    if (wait !== null) {
      fake.rateLimited[endpoint]++;
      json(
        res,
        429,
        { detail: `Request was throttled. Expected available in ${wait} seconds.` },
        { 'retry-after': String(wait) },
      );
      return;
    }

    if (endpoint === 'create') return handleCreate(req, res, rawBody, failure);
    if (failure !== undefined) return applyFailure(req, res, failure);
    if (endpoint === 'list') return handleList(res, parsed.searchParams);

    const bot = bots.get(decodeURIComponent(oneBot![1]!));
    if (!bot) {
      json(res, 404, { detail: 'Not found.' });
      return;
    }
    if (endpoint === 'retrieve') {
      json(res, 200, serialize(bot));
      return;
    }
    if (endpoint === 'leave_call') {
      const current = bot.statusChanges.at(-1)?.code ?? 'ready';
      if (!IN_CALL.has(current)) {
        json(res, 400, { detail: 'Bot is not in a call.' });
        return;
      }
      bot.statusChanges.push({
        code: 'call_ended',
        sub_code: 'bot_received_leave_call',
        message: null,
        created_at: iso(),
      });
      json(res, 200, serialize(bot));
      return;
    }
    if ((bot.statusChanges.at(-1)?.code ?? 'ready') !== 'ready') {
      json(res, 405, { detail: 'Method "DELETE" not allowed: the bot has already been dispatched.' });
      return;
    }
    bots.delete(bot.id);
    res.writeHead(204).end();
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((err: unknown) => {
        if (!res.headersSent) json(res, 500, { detail: String(err) });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  url = `http://127.0.0.1:${port}`;
  fake.url = url;
  return fake;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

// ---------------------------------------------------------------------------------------------
// Signed provider webhooks (Standard Webhooks, which Recall delivers through Svix).
// Legacy Recall workspaces send `svix-id`/`svix-timestamp`/`svix-signature`; workspaces with a
// workspace verification secret send the same values as `webhook-id`/`webhook-timestamp`/
// `webhook-signature`. https://docs.recall.ai/docs/authenticating-requests-from-recallai,
// https://docs.svix.com/receiving/verifying-payloads/how-manual
// Written independently of src/events/webhooks.ts so a verifier is checked against a second
// implementation of the scheme.
// ---------------------------------------------------------------------------------------------

export function newRecallWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** "v1," + base64(HMAC-SHA256(base64-decoded secret after "whsec_", `${id}.${timestamp}.${body}`)). */
export function recallWebhookSignature(
  secret: string,
  id: string,
  timestamp: number | string,
  body: string,
): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export interface SignedWebhookOptions {
  /** Signs with each (space-separated signatures, as during a secret rotation). */
  secrets: string[];
  /** The exact bytes sent; an object is JSON-encoded once. */
  body: string | object;
  /** Default a fresh `msg_…` id; reuse one to replay a delivery. */
  id?: string;
  /** Seconds since the epoch; default now. Pass an old one for a stale delivery. */
  timestamp?: number;
  /** Header names: `svix-*` (default) or `webhook-*`. */
  prefix?: 'svix' | 'webhook';
  /** Replaces the computed signature header (a forged or garbled signature). */
  signatureOverride?: string;
}

export function signedWebhookRequest(options: SignedWebhookOptions): {
  id: string;
  body: string;
  headers: Record<string, string>;
} {
  const body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const id = options.id ?? `msg_${randomBytes(12).toString('base64url')}`;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const prefix = options.prefix ?? 'svix';
  const signature =
    options.signatureOverride ??
    options.secrets.map((secret) => recallWebhookSignature(secret, id, timestamp, body)).join(' ');
  return {
    id,
    body,
    headers: {
      'content-type': 'application/json',
      [`${prefix}-id`]: id,
      [`${prefix}-timestamp`]: String(timestamp),
      [`${prefix}-signature`]: signature,
    },
  };
}

/** POSTs a signed webhook to `url` and answers the receiver's status and body. */
export async function sendSignedWebhook(
  url: string,
  options: SignedWebhookOptions,
): Promise<{ id: string; status: number; body: string }> {
  const request = signedWebhookRequest(options);
  const response = await fetch(url, { method: 'POST', headers: request.headers, body: request.body });
  return { id: request.id, status: response.status, body: await response.text() };
}

/** A `bot.status_change` webhook signed with `secret` as Recall signs it, delivered to `api`. */
export async function sendStatusWebhook(
  api: Pick<FastifyInstance, 'inject'>,
  secret: string,
  bot: { id: string; metadata: Record<string, string> },
  code: string,
): Promise<{ status: number; outcome: string | undefined }> {
  const req = signedWebhookRequest({
    secrets: [secret],
    body: {
      event: 'bot.status_change',
      data: {
        bot: { id: bot.id, metadata: bot.metadata },
        status: { code, sub_code: null, created_at: new Date().toISOString() },
      },
    },
  });
  const res = await api.inject({
    method: 'POST',
    url: '/providers/recall/webhooks',
    headers: req.headers,
    payload: req.body,
  });
  return { status: res.statusCode, outcome: res.json<{ outcome?: string }>().outcome };
}
