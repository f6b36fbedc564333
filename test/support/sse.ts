/** A client of a meeting's event stream (L23), as a browser reads it, for tests. */
import { spawnVerbatim, waitFor, freePort, type Harness, type WorkerProcess } from './harness.ts';

export interface SseEvent {
  id: number | null;
  event: string;
  data: any;
}

/**
 * A client of GET /v1/meetings/{id}/events over real HTTP, as a browser's fetch reads it: the
 * events as they arrive, the id of the last one, and a way to hang up.
 */
export function listen(base: string, key: string, meetingId: string, lastEventId?: number) {
  const events: SseEvent[] = [];
  const abort = new AbortController();
  let status = 0;
  const done = (async () => {
    const res = await fetch(`${base}/v1/meetings/${meetingId}/events`, {
      headers: {
        authorization: `Bearer ${key}`,
        accept: 'text/event-stream',
        ...(lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {}),
      },
      signal: abort.signal,
    });
    status = res.status;
    if (!res.ok || !res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(piece, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let id: number | null = null;
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) id = Number(line.slice(4));
          else if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length > 0) events.push({ id, event, data: JSON.parse(data.join('\n')) });
      }
    }
  })().catch((err: unknown) => {
    if (!abort.signal.aborted) throw err;
  });
  return {
    events,
    status: () => status,
    lastId: () => events.reduce<number | null>((a, e) => (e.id === null ? a : e.id), null),
    close: async () => {
      abort.abort();
      await done;
    },
    done,
  };
}

export async function spawnApi(h: Harness): Promise<{ proc: WorkerProcess; base: string }> {
  const port = await freePort();
  const proc = spawnVerbatim(['api'], h.env({ VERBATIM_PORT: String(port) }));
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`api on ${port}`, async () => {
    const res = await fetch(`${base}/healthz`).catch(() => null);
    return res?.ok ?? false;
  });
  return { proc, base };
}

/**
 * A transcript's segments as the stream shows them: time and the recogniser's words (speakers are
 * checked apart; E2's sentence formatting reads a live window on its own, so a sentence cut by a
 * window boundary may end there while live and not in the transcript read whole).
 */
export function plainSegments(
  segments: Array<{ startMs: number; endMs: number; text: string; rawText?: string }>,
) {
  return segments.map((s) => ({ startMs: s.startMs, endMs: s.endMs, text: s.rawText ?? s.text }));
}

/** The transcript a stream's client shows: each window's last state, superseded ones dropped. */
export function transcriptOf(events: SseEvent[]): Array<{ startMs: number; endMs: number; text: string }> {
  const windows = new Map<string, any>();
  for (const e of events) if (e.event === 'window') windows.set(e.data.windowId, e.data);
  return [...windows.values()]
    .filter((w) => w.status !== 'superseded')
    .sort((a, b) => a.startMs - b.startMs)
    .flatMap((w) => plainSegments(w.segments));
}
