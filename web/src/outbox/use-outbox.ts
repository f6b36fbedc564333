import { useEffect, useState } from 'preact/hooks';
import type { OutboxStatus } from './chunk-sender.ts';
import { outbox } from './index.ts';

/** The outbox's status, live. Null until IndexedDB is open. */
export function useOutbox(): OutboxStatus | null {
  const [status, setStatus] = useState<OutboxStatus | null>(null);
  useEffect(() => {
    let off: (() => void) | undefined;
    let gone = false;
    void outbox().then(({ sender }) => {
      if (!gone) off = sender.subscribe(setStatus);
    });
    return () => {
      gone = true;
      off?.();
    };
  }, []);
  return status;
}

/** Chunks and Ends waiting in this browser, over every meeting. */
export function waiting(s: OutboxStatus | null): { chunks: number; ends: number; meetings: string[] } {
  if (!s) return { chunks: 0, ends: 0, meetings: [] };
  const chunks = Object.values(s.pending).reduce((n, c) => n + c, 0);
  const ends = Object.keys(s.endPending).length;
  const meetings = [...new Set([...Object.keys(s.pending), ...Object.keys(s.endPending)])];
  return { chunks, ends, meetings };
}

export function describeWaiting(w: { chunks: number; ends: number }): string {
  const parts = [];
  if (w.chunks > 0) parts.push(`${w.chunks} ${w.chunks === 1 ? 'chunk' : 'chunks'} of audio`);
  if (w.ends > 0) parts.push(`${w.ends === 1 ? 'an End meeting' : `${w.ends} End meetings`}`);
  return parts.join(' and ');
}
