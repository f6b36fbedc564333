import { useEffect, useState } from 'preact/hooks';
import { authHeaders, type Meeting, type Segment } from './api.ts';
// Types only: the window statuses are declared once, in the server's domain.
import type { WindowStatus } from '../../src/domain/status.ts';

/**
 * L23: a meeting followed live through GET /v1/meetings/{id}/events. fetch() rather than
 * EventSource, because the stream needs the Authorization header. After a cut the stream is opened
 * again with the last event id, so nothing is missed and nothing comes twice.
 */

interface StreamWindow {
  windowId: string;
  index: number;
  startMs: number;
  endMs: number;
  status: WindowStatus;
  segments: Segment[];
}

export interface Draft {
  draftId: string;
  chunkSeq: number;
  startMs: number;
  endMs: number;
  text: string;
}

/** live: events arrive as they happen; connecting: (re)opening; off: this server has no stream. */
export type StreamLink = 'live' | 'connecting' | 'off';

export interface MeetingStream {
  link: StreamLink;
  meeting: Meeting | null;
  /** The final words so far, in order (null until the stream has sent them). */
  segments: Segment[] | null;
  /** L22: provisional words of the stretches no final window covers yet. */
  drafts: Draft[];
}

const RECONNECT_MS = 2000;

export function useMeetingStream(id: string): MeetingStream {
  const [state, setState] = useState<MeetingStream>({
    link: 'connecting',
    meeting: null,
    segments: null,
    drafts: [],
  });
  useEffect(() => {
    const abort = new AbortController();
    const windows = new Map<string, StreamWindow>();
    const drafts = new Map<string, Draft>();
    let meeting: Meeting | null = null;
    let lastId: string | null = null;
    const publish = (link: StreamLink) => {
      const shown = [...windows.values()].filter((w) => w.status !== 'superseded');
      const finals = shown.filter((w) => w.status === 'transcribed');
      const covered = (d: Draft) => {
        const middle = (d.startMs + d.endMs) / 2;
        return finals.some((w) => middle >= w.startMs && middle < w.endMs);
      };
      for (const [key, d] of drafts) if (covered(d)) drafts.delete(key);
      setState({
        link,
        meeting,
        segments: meeting ? shown.sort((a, b) => a.startMs - b.startMs).flatMap((w) => w.segments) : null,
        drafts: [...drafts.values()].sort((a, b) => a.startMs - b.startMs),
      });
    };
    const onEvent = (event: string, data: unknown) => {
      if (event === 'window') {
        const w = data as StreamWindow;
        windows.set(w.windowId, w);
      } else if (event === 'draft') {
        const d = data as Draft;
        drafts.set(d.draftId, d);
      } else if (event === 'meeting') {
        meeting = data as Meeting;
        if (meeting.transcriptComplete) drafts.clear();
      }
    };

    // A page the browser keeps for Back (the back/forward cache) would keep its stream's
    // connection, and a browser opens six to one server: the seventh page would wait. The stream
    // ends when the page is hidden that way and opens again (from its last id) when it is shown.
    let current: AbortController | null = null;
    const onHide = () => current?.abort();
    window.addEventListener('pagehide', onHide);
    const follow = async (): Promise<'again' | 'off'> => {
      const headers: Record<string, string> = {
        ...authHeaders(),
        accept: 'text/event-stream',
      };
      if (lastId !== null) headers['last-event-id'] = lastId;
      const conn = new AbortController();
      current = conn;
      abort.signal.addEventListener('abort', () => conn.abort(), { once: true });
      const res = await fetch(`/v1/meetings/${id}/events`, { headers, signal: conn.signal });
      // No such route (an older server) or no such meeting: the page polls instead. F3: 204, the
      // meeting is settled and nothing came since: it polls too (it stops once it has read it).
      if (res.status === 404 || res.status === 401 || res.status === 403 || res.status === 204) return 'off';
      if (!res.ok || !res.body) return 'again';
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return 'again';
        buffer += value;
        let end: number;
        let changed = false;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let event = 'message';
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('id:')) lastId = line.slice(3).trim();
            else if (line.startsWith('event:')) event = line.slice(6).trim();
            else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
          }
          if (data.length === 0) continue;
          // F3: `end`, the meeting is settled (everything before it was sent): the stream is done.
          if (event === 'deleted' || event === 'end') {
            if (changed && meeting) publish('live');
            return 'off';
          }
          onEvent(event, JSON.parse(data.join('\n')));
          changed = true;
        }
        // A batch ends with the meeting event: show the batch whole.
        if (changed && meeting) publish('live');
      }
    };

    void (async () => {
      while (!abort.signal.aborted) {
        let next: 'again' | 'off' = 'again';
        try {
          next = await follow();
        } catch {
          next = 'again';
        }
        if (abort.signal.aborted) return;
        if (next === 'off') {
          publish('off');
          return;
        }
        publish('connecting');
        await new Promise((r) => setTimeout(r, RECONNECT_MS));
      }
    })();
    return () => {
      window.removeEventListener('pagehide', onHide);
      abort.abort();
    };
  }, [id]);
  return state;
}
