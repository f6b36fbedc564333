/**
 * The Verbatim HTTP API from the browser, same origin: signed in as a person, the session cookie
 * (HttpOnly, sent by the browser) and the session's CSRF token on every write (U3); or, for
 * installs used by machines, `Authorization: Bearer <key>`.
 */
// Types only (erased from the bundle): the statuses are declared once, in the server's domain.
import type {
  AskResponse,
  MeetingResponse,
  MinutesContent,
  ReasonResponse,
  SearchResponse,
  TranscriptResponse,
} from '../../src/api/schemas.ts';

const KEY = 'verbatim.apiKey';

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}
export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

let csrfToken: string | null = null;
/** U3: the session's CSRF token, from the sign-in or session answer; null when signed out. */
export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}

/** The credentials of a request: the key when one is kept, else the session's CSRF token on writes. */
export function authHeaders(method = 'GET'): Record<string, string> {
  const key = apiKey();
  if (key) return { authorization: `Bearer ${key}` };
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) return { 'x-csrf-token': csrfToken };
  return {};
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** No answer at all: the server is down or the network is. Always worth retrying. */
export class NetworkError extends Error {}

export async function call<T>(
  method: string,
  path: string,
  body?: BodyInit | object,
  opts: { contentType?: string; timeoutMs?: number; raw?: boolean; bytes?: boolean } = {},
): Promise<T> {
  const headers: Record<string, string> = authHeaders(method);
  let payload: BodyInit | undefined;
  if (body instanceof ArrayBuffer || body instanceof Blob) {
    payload = body;
    headers['content-type'] = opts.contentType ?? 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['content-type'] = 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: payload,
      signal: AbortSignal.timeout(opts.timeoutMs ?? 20_000),
    });
  } catch (err) {
    throw new NetworkError(err instanceof Error ? err.message : String(err));
  }
  if (!res.ok) {
    let code = `http.${res.status}`;
    let message = res.statusText;
    try {
      const json = (await res.json()) as { error?: { code?: string; message?: string } };
      code = json.error?.code ?? code;
      message = json.error?.message ?? message;
    } catch {
      /* not JSON: keep the status line */
    }
    throw new ApiError(res.status, code, message);
  }
  if (opts.bytes) return (await res.arrayBuffer()) as T;
  if (opts.raw) return (await res.text()) as T;
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

// The response shapes are declared once, as the server's TypeBox schemas (src/api/schemas.ts).
export type Reason = ReasonResponse;
export type Meeting = MeetingResponse;
export type Minutes = MinutesContent;

export type Transcript = TranscriptResponse;
export type Segment = TranscriptResponse['segments'][number];
export type SearchResult = SearchResponse['results'][number];
export type Ask = AskResponse;
export type AskPassage = AskResponse['passages'][number];

/**
 * One request whose every outcome is a value, never an exception: status 0 for no answer (network
 * error, timeout), otherwise the status, our error code if the body is ours, and the JSON body.
 * The outbox decides from these alone (web/src/outbox/answers.ts).
 */
export async function answer(
  method: string,
  path: string,
  body?: ArrayBuffer,
  opts: { contentType?: string; timeoutMs?: number } = {},
): Promise<{ status: number; code: string | null; body: unknown; message: string }> {
  const headers: Record<string, string> = authHeaders(method);
  if (body) headers['content-type'] = opts.contentType ?? 'application/octet-stream';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body, signal: AbortSignal.timeout(opts.timeoutMs ?? 20_000) });
  } catch (err) {
    return { status: 0, code: null, body: null, message: err instanceof Error ? err.message : String(err) };
  }
  let json: unknown = null;
  try {
    json = await res.json();
  } catch {
    /* not JSON (a proxy's page): no code */
  }
  const error = (json as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return {
    status: res.status,
    code: typeof error?.code === 'string' ? error.code : null,
    body: json,
    message: typeof error?.message === 'string' ? error.message : `${res.status} ${res.statusText}`,
  };
}
