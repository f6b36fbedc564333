/**
 * S8: the thread calendar feeds are parsed in (src/bots/feed-parser.ts starts it and stops it at
 * the time budget). For each request it says when it starts (the budget runs from then, not from
 * a slow module load) and answers once.
 */
import { parentPort } from 'node:worker_threads';
import { AppError } from '../domain/errors.ts';
import { INVALID_CALENDAR, parseIcs, type CalendarOccurrence, type IcsBudget } from '../domain/ics.ts';

export interface FeedParseRequest {
  text: string;
  from: Date;
  until: Date;
  budget: IcsBudget;
}

export type FeedParseMessage =
  | { type: 'started' }
  | { type: 'parsed'; occurrences: CalendarOccurrence[] }
  | { type: 'invalid'; reason: string }
  /** Not one of ours: a bug, or ical.js tripping over the feed. */
  | { type: 'failed'; error: string };

const port = parentPort;
port?.on('message', ({ text, from, until, budget }: FeedParseRequest) => {
  const send = (message: FeedParseMessage) => port.postMessage(message);
  send({ type: 'started' });
  try {
    send({ type: 'parsed', occurrences: parseIcs(text, from, until, budget) });
  } catch (err) {
    if (err instanceof AppError && err.code === INVALID_CALENDAR)
      send({ type: 'invalid', reason: err.message });
    else send({ type: 'failed', error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  }
});
