import { AppError, ErrorKind, networkErrorCode, redactSecrets } from '../domain/errors.ts';
import type {
  Bot,
  BotPage,
  BotProvider,
  BotStatusChange,
  CreateBotRequest,
  ListBotsQuery,
  BotParticipant,
  BotSpeakers,
  RecordingDownload,
} from '../ports.ts';
import { parseRetryAfter } from './provider-http.ts';
import { EgressError, EgressGuard } from '../net/egress.ts';
import type { EgressResponse, EgressStreamResponse } from '../net/egress.ts';

/** R11: the participants or speaker timeline of one recording (JSON) is never larger than this. */
const SPEAKER_DOWNLOAD_MAX_BYTES = 20 * 1024 * 1024;
import { PassThrough } from 'node:stream';
import type { Readable } from 'node:stream';

/*
 * Recall.ai's bot API, as documented:
 * - Auth: `Authorization: Token <key>` (the `Token` prefix is optional).
 *   https://docs.recall.ai/reference/authentication
 * - Create `POST /api/v1/bot/` {meeting_url, join_at (ISO 8601), bot_name, metadata, recording_config}
 *   → 201 with the bot. A `join_at` more than 10 minutes ahead makes a *scheduled* bot, which never
 *   gets 507; sooner (or none) claims an ad-hoc bot from a pool that can run dry → 507.
 *   https://docs.recall.ai/reference/bot_create, https://docs.recall.ai/docs/creating-and-scheduling-bots
 * - Idempotency-Key on POST/PUT/PATCH, scoped to user + path: a matching request still being
 *   processed → 409; one completed "in the previous hour" → the original response replayed.
 *   https://docs.recall.ai/reference/idempotency
 * - Retrieve `GET /api/v1/bot/{id}/`; the bot has `status_changes` [{code, sub_code, message,
 *   created_at}] oldest first and `recordings[].media_shortcuts.{audio_mixed,video_mixed}.data.
 *   download_url` (pre-signed S3 links; audio_mixed needs `recording_config.audio_mixed_mp3`).
 *   https://docs.recall.ai/reference/bot_retrieve, https://docs.recall.ai/docs/receive-a-recording,
 *   https://docs.recall.ai/docs/how-to-get-mixed-audio-async
 * - List `GET /api/v1/bot/` with `metadata__<key>=<value>`, `status` (repeatable), `join_at_after`,
 *   `join_at_before`; answers {next, previous, results} where `next` is the next page's full URL.
 *   Base limit 60 requests/min per workspace. https://docs.recall.ai/reference/bot_list,
 *   https://docs.recall.ai/docs/custom-metadata
 * - Delete `DELETE /api/v1/bot/{id}/` → 204, only for scheduled bots that have not joined;
 *   405 once dispatched (then Remove Bot From Call is the way). https://docs.recall.ai/reference/bot_destroy
 * - Errors: 400 bad request, 401 no valid key, 402 out of credit (self-serve), 403 blocked by the
 *   WAF, 405 see delete, 409 conflict (retry with backoff), 429 "retry after the duration in the
 *   Retry-After header", 502/503/504 dropped under load, 507 out of ad-hoc bots "retry in 30 seconds".
 *   https://docs.recall.ai/reference/errors
 * - Rate limits per workspace: list 60/min, create 60/min (older docs: 120), retrieve and delete
 *   300/min — shared by every caller holding the key (R2 budgets them; this adapter does not).
 */

export interface RecallBotProviderOptions {
  /** Region root, e.g. `https://us-east-1.recall.ai` (a trailing `/api/v1` is tolerated). */
  baseUrl: string;
  apiKey: string;
  /** Deadline for one API call. Default 30 000. */
  timeoutMs?: number;
  /** Deadline for downloading one recording. Default 600 000. */
  downloadTimeoutMs?: number;
  /**
   * S5: the guard recording links go through (the provider names them; they are not ours to
   * trust). Default: the guard with no internal range allowed.
   */
  egress?: EgressGuard;
  /** The largest recording downloaded (`bot.recording_too_large` past it). Default 500 MB. */
  maxDownloadBytes?: number;
}

type Operation = 'create' | 'retrieve' | 'list' | 'delete' | 'leave_call' | 'download';

const OPERATION_LABEL: Record<Operation, string> = {
  create: 'create bot',
  retrieve: 'retrieve bot',
  list: 'list bots',
  delete: 'delete bot',
  leave_call: 'remove bot from call',
  download: 'recording download',
};

const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Recall: "Out of adhoc bots -- Please retry in 30 seconds." */
const NO_CAPACITY_RETRY_SECONDS = 30;

/** Meeting bots through Recall.ai's API (or a server with the same shape). */
export class RecallBotProvider implements BotProvider {
  readonly name = 'recall';
  // Private fields stay out of JSON.stringify and util.inspect, so the key cannot leak through a
  // logged adapter.
  readonly #apiKey: string;
  readonly #root: string;
  readonly #timeoutMs: number;
  readonly #downloadTimeoutMs: number;
  readonly #egress: EgressGuard;
  readonly #maxDownloadBytes: number;

  constructor(options: RecallBotProviderOptions) {
    if (!options.apiKey) {
      throw new AppError(ErrorKind.permanent, 'bot.bad_config', 'bot provider API key is not set');
    }
    this.#apiKey = options.apiKey;
    this.#root = options.baseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#downloadTimeoutMs = options.downloadTimeoutMs ?? 600_000;
    this.#egress = options.egress ?? new EgressGuard();
    this.#maxDownloadBytes = options.maxDownloadBytes ?? 500 * 1024 * 1024;
  }

  async createBot(request: CreateBotRequest): Promise<Bot> {
    if (!request.idempotencyKey) {
      // Without a key a lost response could leave two bots in one call.
      throw new AppError(
        ErrorKind.permanent,
        'bot.bad_request',
        'a bot is never created without an idempotency key',
      );
    }
    const body: Record<string, unknown> = {
      meeting_url: request.meetingUrl,
      join_at: request.joinAt.toISOString(),
      metadata: request.metadata,
      // Mixed audio as an MP3 artifact, next to the default mixed video.
      recording_config: { audio_mixed_mp3: {} },
    };
    if (request.botName !== undefined) body.bot_name = request.botName;
    const { json } = await this.#call('create', 'POST', this.#botsUrl(), {
      body,
      idempotencyKey: request.idempotencyKey,
    });
    const bot = parseBot(json);
    return bot.meetingUrl === null ? { ...bot, meetingUrl: request.meetingUrl } : bot;
  }

  async retrieveBot(id: string): Promise<Bot> {
    const { json } = await this.#call('retrieve', 'GET', this.#botUrl(id));
    return parseBot(json);
  }

  async listBots(query: ListBotsQuery = {}): Promise<BotPage> {
    const { json } = await this.#call('list', 'GET', this.#listUrl(query));
    const page = asRecord(json);
    if (!page || !Array.isArray(page.results)) throw badResponse('list bots', 'answered without `results`');
    const next = typeof page.next === 'string' && page.next !== '' ? page.next : null;
    return { bots: page.results.map((raw) => parseBot(raw)), next };
  }

  async deleteBot(id: string): Promise<void> {
    // 404: the bot is already gone, which is what the caller wants.
    await this.#call('delete', 'DELETE', this.#botUrl(id), { notFoundIsSuccess: true });
  }

  async leaveCall(id: string): Promise<void> {
    try {
      await this.#call('leave_call', 'POST', `${this.#botUrl(id)}leave_call/`, { notFoundIsSuccess: true });
    } catch (err) {
      if (err instanceof AppError && err.code === 'bot.not_in_call') return;
      throw err;
    }
  }

  async downloadRecording(bot: Bot): Promise<RecordingDownload | null> {
    if (!bot.recordingUrl) return null;
    let url: URL;
    try {
      url = new URL(bot.recordingUrl);
    } catch {
      throw badResponse('retrieve bot', 'gave a recording link that is not a URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw badResponse('retrieve bot', 'gave a recording link that is not http(s)');
    }
    // A pre-signed link: no Authorization header (the key must not travel to the storage host).
    // Neither the link (it carries a signature) nor the fetch error goes into messages.
    // S5: through the egress guard — an internal address named by the provider is refused, and
    // each redirect is checked again. B10: the body is handed on as it arrives.
    let answer: EgressStreamResponse;
    try {
      answer = await this.#egress.requestStream(url, {
        timeoutMs: this.#downloadTimeoutMs,
        maxBytes: this.#maxDownloadBytes,
        maxRedirects: 3,
      });
    } catch (err) {
      if (err instanceof EgressError) throw downloadRefusal(err);
      throw this.#transportError('download', err, this.#downloadTimeoutMs, false);
    }
    if (answer.status < 200 || answer.status >= 300) {
      answer.body.destroy();
      throw downloadFailure(answer.status);
    }
    const length = Number(answer.headers['content-length']);
    const declaredBytes = Number.isSafeInteger(length) && length >= 0 ? length : null;
    if (declaredBytes !== null && declaredBytes > this.#maxDownloadBytes) {
      answer.body.destroy();
      throw downloadRefusal(
        new EgressError(
          'too_large',
          `is ${declaredBytes} bytes, over the limit of ${this.#maxDownloadBytes}`,
        ),
      );
    }
    const stream = new PassThrough();
    // A failure before the store reads it is kept in `stream.errored` (see stageAndPutStream).
    stream.on('error', () => undefined);
    answer.body.on('error', (err) =>
      stream.destroy(
        err instanceof EgressError
          ? downloadRefusal(err)
          : this.#transportError('download', err, this.#downloadTimeoutMs, false),
      ),
    );
    stream.on('close', () => answer.body.destroy());
    answer.body.pipe(stream);
    if (declaredBytes === 0 || !(await hasBytes(stream))) {
      stream.destroy();
      return null;
    }
    return { stream, declaredBytes };
  }

  async downloadSpeakers(bot: Bot): Promise<BotSpeakers | null> {
    if (!bot.speakerLinks) return null;
    const participants = parseParticipants(await this.#downloadJson(bot.speakerLinks.participants));
    const timeline = parseSpeakerTimeline(await this.#downloadJson(bot.speakerLinks.timeline));
    return { participants, timeline };
  }

  /** A small JSON document from a pre-signed link, through the egress guard, without the key. */
  async #downloadJson(link: string): Promise<unknown> {
    let url: URL;
    try {
      url = new URL(link);
    } catch {
      throw badResponse('retrieve bot', 'gave a participant events link that is not a URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw badResponse('retrieve bot', 'gave a participant events link that is not http(s)');
    let answer: EgressResponse;
    try {
      answer = await this.#egress.request(url, {
        timeoutMs: this.#timeoutMs,
        maxBytes: SPEAKER_DOWNLOAD_MAX_BYTES,
        maxRedirects: 3,
      });
    } catch (err) {
      if (err instanceof EgressError) throw downloadRefusal(err);
      throw this.#transportError('download', err, this.#timeoutMs, false);
    }
    if (answer.status < 200 || answer.status >= 300) throw downloadFailure(answer.status);
    try {
      return JSON.parse(answer.body.toString('utf8')) as unknown;
    } catch {
      throw badResponse('participant events download', 'answered with something not JSON');
    }
  }

  #botsUrl(): string {
    return `${this.#root}/api/v1/bot/`;
  }

  #botUrl(id: string): string {
    if (!id) throw new AppError(ErrorKind.permanent, 'bot.bad_request', 'a bot id is required');
    return `${this.#root}/api/v1/bot/${encodeURIComponent(id)}/`;
  }

  #listUrl(query: ListBotsQuery): string {
    if (query.cursor !== undefined && /^https?:\/\//i.test(query.cursor)) {
      // Recall's `next` is the next page's full URL. Follow it only on our own origin: a link to
      // another host is re-rooted here, so the key is never sent anywhere but the configured API.
      const next = new URL(query.cursor);
      const root = new URL(this.#root);
      return next.origin === root.origin ? next.href : `${root.origin}${next.pathname}${next.search}`;
    }
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query.metadata ?? {})) params.append(`metadata__${key}`, value);
    for (const status of query.statuses ?? []) params.append('status', status);
    if (query.joinAtAfter) params.set('join_at_after', query.joinAtAfter.toISOString());
    if (query.joinAtBefore) params.set('join_at_before', query.joinAtBefore.toISOString());
    if (query.pageSize !== undefined) params.set('page_size', String(query.pageSize));
    if (query.cursor !== undefined) params.set('cursor', query.cursor);
    const search = params.toString();
    return search ? `${this.#botsUrl()}?${search}` : this.#botsUrl();
  }

  async #call(
    operation: Operation,
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    opts: { body?: unknown; idempotencyKey?: string; notFoundIsSuccess?: boolean } = {},
  ): Promise<{ status: number; json: unknown }> {
    const headers: Record<string, string> = {
      Authorization: `Token ${this.#apiKey}`,
      Accept: 'application/json',
    };
    const init: RequestInit = {
      method,
      headers,
      signal: AbortSignal.timeout(this.#timeoutMs),
      // A redirect would be a misconfigured base URL; never replay the key to wherever it points.
      redirect: 'manual',
    };
    if (opts.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    if (opts.idempotencyKey !== undefined) headers['Idempotency-Key'] = opts.idempotencyKey;

    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const response = await fetch(url, init);
      status = response.status;
      retryAfter = response.headers.get('retry-after');
      text = await response.text();
    } catch (err) {
      throw this.#transportError(operation, err, this.#timeoutMs, true);
    }
    if (status === 404 && opts.notFoundIsSuccess) return { status, json: null };
    if (status >= 300) {
      throw this.#httpFailure(operation, status, text, retryAfter, opts.idempotencyKey !== undefined);
    }
    if (text.trim() === '') return { status, json: null };
    try {
      return { status, json: JSON.parse(text) as unknown };
    } catch {
      throw badResponse(OPERATION_LABEL[operation], 'answered with a body that is not JSON');
    }
  }

  /** Classifies a non-2xx answer (J6). Codes say what happened; kinds say what to do. */
  #httpFailure(
    operation: Operation,
    status: number,
    bodyText: string,
    retryAfterHeader: string | null,
    idempotent: boolean,
  ): AppError {
    const snippet = this.#scrub(providerMessage(bodyText));
    const message = `bot provider answered HTTP ${status} to ${OPERATION_LABEL[operation]}${snippet ? `: ${snippet}` : ''}`;
    const retryAfterSeconds = parseRetryAfter(retryAfterHeader);
    const retry = retryAfterSeconds === undefined ? {} : { retryAfterSeconds };

    if (status >= 300 && status < 400) {
      return new AppError(
        ErrorKind.permanent,
        'bot.bad_config',
        `${message} (a redirect: check the base URL)`,
      );
    }
    // Recall answers 400 to a leave request for a bot that is not in a call: nothing to leave.
    if (operation === 'leave_call' && status === 400) {
      return new AppError(ErrorKind.permanent, 'bot.not_in_call', message);
    }
    switch (status) {
      case 402:
        return new AppError(ErrorKind.quotaExhausted, 'bot.quota_exhausted', message);
      case 429:
        return new AppError(ErrorKind.transient, 'bot.rate_limited', message, retry);
      case 507:
        return new AppError(ErrorKind.transient, 'bot.no_capacity', message, {
          retryAfterSeconds: retryAfterSeconds ?? NO_CAPACITY_RETRY_SECONDS,
        });
      case 409:
        return new AppError(
          ErrorKind.transient,
          idempotent ? 'bot.idempotency_in_flight' : 'bot.conflict',
          message,
          retry,
        );
      case 408:
        return new AppError(ErrorKind.transient, 'bot.timeout', message, retry);
      case 401:
      case 403:
        return new AppError(ErrorKind.permanent, 'bot.auth', message);
      case 404:
        return new AppError(ErrorKind.permanent, 'bot.not_found', message);
      case 405:
        return new AppError(
          ErrorKind.permanent,
          operation === 'delete' ? 'bot.already_dispatched' : 'bot.bad_request',
          message,
        );
      default:
        if (status >= 500) return new AppError(ErrorKind.transient, 'bot.server_error', message, retry);
        return new AppError(ErrorKind.permanent, 'bot.bad_request', message);
    }
  }

  /** Timeouts and connection failures are transient: an outage must never lose work. */
  #transportError(operation: Operation, err: unknown, timeoutMs: number, keepCause: boolean): AppError {
    const label = `bot provider (${OPERATION_LABEL[operation]})`;
    const cause = keepCause ? { cause: err } : {};
    const name = (err as { name?: unknown } | null)?.name;
    const net = networkErrorCode(err);
    if (name === 'TimeoutError' || (net !== undefined && TIMEOUT_CODES.has(net))) {
      return new AppError(
        ErrorKind.transient,
        'bot.timeout',
        `${label} did not answer within ${timeoutMs} ms`,
        cause,
      );
    }
    if (net) {
      return new AppError(ErrorKind.transient, 'bot.unreachable', `${label} is unreachable (${net})`, cause);
    }
    const text = this.#scrub(errorText(err));
    if (/invalid url|failed to parse url|ERR_INVALID_URL/i.test(text)) {
      return new AppError(ErrorKind.permanent, 'bot.bad_config', `${label}: the base URL is invalid`, cause);
    }
    return new AppError(ErrorKind.transient, 'bot.unreachable', `${label} request failed: ${text}`, cause);
  }

  #scrub(text: string): string {
    return redactSecrets(text.split(this.#apiKey).join('[redacted]')).slice(0, 200);
  }
}

/**
 * Whether a stream has a first byte: waits for one (left in place for the next reader) or for
 * the end. A failure before either rejects.
 */
function hasBytes(stream: Readable): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const settle = () => {
      stream.off('readable', onReadable);
      stream.off('end', onEnd);
      stream.off('error', onError);
    };
    const onReadable = () => {
      const chunk = stream.read() as Buffer | null;
      if (chunk === null) return;
      settle();
      stream.unshift(chunk);
      resolve(chunk.length > 0);
    };
    const onEnd = () => {
      settle();
      resolve(false);
    };
    const onError = (err: Error) => {
      settle();
      reject(err);
    };
    stream.on('readable', onReadable);
    stream.once('end', onEnd);
    stream.once('error', onError);
  });
}

/** A recording link the guard would not fetch, or that failed on the way. */
function downloadRefusal(err: EgressError): AppError {
  switch (err.category) {
    case 'egress_refused':
    case 'bad_url':
      return new AppError(ErrorKind.permanent, 'egress.refused', `recording link refused: ${err.message}`);
    case 'too_large':
      return new AppError(ErrorKind.permanent, 'bot.recording_too_large', `recording ${err.message}`);
    case 'connection_failed':
    case 'connection_refused':
    case 'dns_failure':
    case 'timeout':
    case 'too_many_redirects':
      return new AppError(
        ErrorKind.transient,
        'bot.recording_unavailable',
        `recording download failed: ${err.category}`,
      );
  }
}

function downloadFailure(status: number): AppError {
  const message = `recording download answered HTTP ${status}`;
  // Pre-signed links expire (Recall: re-retrieve the bot for a fresh one); storage hiccups pass.
  if (status === 403 || status === 404 || status === 410) {
    return new AppError(
      ErrorKind.transient,
      'bot.recording_link_expired',
      `${message}: retrieve the bot again for a fresh link`,
    );
  }
  if (status === 408 || status === 429 || status >= 500) {
    return new AppError(ErrorKind.transient, 'bot.recording_unavailable', message);
  }
  return new AppError(ErrorKind.permanent, 'bot.recording_unavailable', message);
}

function badResponse(operation: string, what: string): AppError {
  return new AppError(ErrorKind.transient, 'bot.bad_response', `bot provider ${what} (${operation})`);
}

function parseBot(value: unknown): Bot {
  const raw = asRecord(value);
  if (!raw || typeof raw.id !== 'string' || raw.id === '') {
    throw badResponse('bot', 'answered with a bot that has no id');
  }
  const statusChanges = Array.isArray(raw.status_changes)
    ? raw.status_changes.flatMap((change) => parseStatusChange(change))
    : [];
  const latest = statusChanges.at(-1)?.code ?? statusCode(raw.status) ?? 'ready';
  return {
    id: raw.id,
    meetingUrl: typeof raw.meeting_url === 'string' ? raw.meeting_url : null,
    joinAt: parseDate(raw.join_at),
    metadata: stringRecord(raw.metadata),
    status: latest,
    statusChanges,
    recorded: Array.isArray(raw.recordings) && raw.recordings.length > 0,
    recordingUrl: recordingUrl(raw.recordings),
    ...participantEvents(raw.recordings),
  };
}

/**
 * R11: the first recording's `media_shortcuts.participant_events`: its two download links once it
 * is done; pending while it is being made.
 */
function participantEvents(recordings: unknown): Pick<Bot, 'speakerLinks' | 'speakersPending'> {
  if (!Array.isArray(recordings)) return { speakerLinks: null, speakersPending: false };
  let pending = false;
  for (const recording of recordings) {
    const events = asRecord(asRecord(asRecord(recording)?.media_shortcuts)?.participant_events);
    if (!events) continue;
    const data = asRecord(events.data);
    const participants = data?.participants_download_url;
    const timeline = data?.speaker_timeline_download_url;
    if (
      typeof participants === 'string' &&
      participants !== '' &&
      typeof timeline === 'string' &&
      timeline !== ''
    )
      return { speakerLinks: { participants, timeline }, speakersPending: false };
    const code = statusCode(events.status);
    if (code !== 'failed' && code !== 'deleted') pending = true;
  }
  return { speakerLinks: null, speakersPending: pending };
}

function parseParticipant(value: unknown): BotParticipant | null {
  const raw = asRecord(value);
  if (!raw || (typeof raw.id !== 'number' && typeof raw.id !== 'string')) return null;
  return {
    id: String(raw.id),
    name: typeof raw.name === 'string' && raw.name.trim() !== '' ? raw.name : null,
    email: typeof raw.email === 'string' && raw.email.trim() !== '' ? raw.email : null,
  };
}

function seconds(value: unknown): number | null {
  const relative = asRecord(value)?.relative;
  return typeof relative === 'number' && Number.isFinite(relative) ? relative : null;
}

/** R11: the participants download: [{id, name, is_host, platform, extra_data, email}]. */
export function parseParticipants(value: unknown): BotParticipant[] {
  if (!Array.isArray(value)) throw badResponse('participants download', 'answered with something not a list');
  return value.flatMap((p) => parseParticipant(p) ?? []);
}

/**
 * R11: the speaker timeline download: [{participant, start_timestamp: {relative, absolute},
 * end_timestamp: {relative, absolute} | null}], relative seconds from the recording's start
 * (negative for speech before it).
 */
export function parseSpeakerTimeline(value: unknown): BotSpeakers['timeline'] {
  if (!Array.isArray(value))
    throw badResponse('speaker timeline download', 'answered with something not a list');
  return value.flatMap((entry) => {
    const raw = asRecord(entry);
    const participant = parseParticipant(raw?.participant);
    const startS = seconds(raw?.start_timestamp);
    if (!participant || startS === null) return [];
    return [{ participant, startS, endS: seconds(raw?.end_timestamp) }];
  });
}

function parseStatusChange(value: unknown): BotStatusChange[] {
  const raw = asRecord(value);
  if (!raw || typeof raw.code !== 'string') return [];
  return [
    {
      code: raw.code,
      subCode: typeof raw.sub_code === 'string' ? raw.sub_code : null,
      message: typeof raw.message === 'string' ? raw.message : null,
      at: parseDate(raw.created_at) ?? parseDate(raw.updated_at) ?? new Date(0),
    },
  ];
}

function statusCode(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const code = asRecord(value)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The mixed audio of the first recording that has one, else its mixed video (ffmpeg reads both). */
function recordingUrl(recordings: unknown): string | null {
  if (!Array.isArray(recordings)) return null;
  for (const kind of ['audio_mixed', 'video_mixed']) {
    for (const recording of recordings) {
      const shortcut = asRecord(asRecord(asRecord(recording)?.media_shortcuts)?.[kind]);
      const url = asRecord(shortcut?.data)?.download_url;
      if (typeof url === 'string' && url !== '') return url;
    }
  }
  return null;
}

function parseDate(value: unknown): Date | null {
  if (typeof value !== 'string' || value === '') return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

function stringRecord(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, entry] of Object.entries(asRecord(value) ?? {})) {
    if (typeof entry === 'string') out[key] = entry;
  }
  return out;
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** Recall (Django REST framework) errors: {"detail": …}, {"field": ["…"]} or a list of strings. */
function providerMessage(bodyText: string): string {
  let message = bodyText;
  try {
    const parsed = JSON.parse(bodyText) as unknown;
    const record = asRecord(parsed);
    const found = record
      ? [record.detail, record.message, record.error, record.code].find((v) => typeof v === 'string')
      : undefined;
    message = typeof found === 'string' ? found : JSON.stringify(parsed);
  } catch {
    // not JSON: the text itself
  }
  return message.replace(/\s+/g, ' ').trim();
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
