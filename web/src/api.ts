/** The Verbatim HTTP API from the browser: same origin, `Authorization: Bearer <key>`. */
// Types only (erased from the bundle): the statuses are declared once, in the server's domain.
import type { MeetingSource, MeetingStatus, MinutesStatus } from '../../src/domain/status.ts';

const KEY = 'verbatim.apiKey';

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}
export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
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
  opts: { contentType?: string; timeoutMs?: number; raw?: boolean } = {},
): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey() ?? ''}` };
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
  if (opts.raw) return (await res.text()) as T;
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export interface Reason {
  code: string;
  message: string | null;
  plain: string;
}

export interface Meeting {
  id: string;
  title: string;
  source: MeetingSource;
  status: MeetingStatus;
  durationMs: number | null;
  windows: {
    total: number;
    done: number;
    inFlight: number;
    held: number;
    exhausted: number;
    missing: number;
  };
  progress: { stage: string; message: string } | null;
  transcriptComplete: boolean;
  /** How many times the published transcript was revised with late audio (L19). */
  revision: number;
  minutes: {
    status: MinutesStatus;
    reason: Reason | null;
    content: Minutes | null;
    writtenAt: string | null;
    revision: number | null;
    stale: boolean;
  };
  failure: Reason | null;
  declaredChunks: number | null;
  missingChunks: number[];
  missingChunkCount: number;
  lateAudio: {
    waitingChunks: number;
    lateChunks: number;
    repairing: boolean;
    lastRepairAt: string | null;
    failure: Reason | null;
    message: string | null;
  };
  /** J20: stretches with no transcript whose audio is held: the gap a completed meeting shows. */
  heldAudio: { awaiting: number; failed: number; keptUntil: string | null; message: string } | null;
  untranscribedWhenAudioDeleted: { inFlight: number; exhausted: number } | null;
  createdAt: string;
  finalizingAt: string | null;
  completedAt: string | null;
  failedAt: string | null;
}

export interface Minutes {
  writer: 'llm' | 'extractive';
  model: string | null;
  summary: string;
  decisions: string[];
  actionItems: string[];
  note: string | null;
}

export interface Segment {
  startMs: number;
  endMs: number;
  text: string;
}

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
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey() ?? ''}` };
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
