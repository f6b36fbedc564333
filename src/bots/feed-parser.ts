import { Worker } from 'node:worker_threads';
import { assertNever } from '../domain/errors.ts';
import { invalidCalendar, type CalendarOccurrence, type IcsBudget } from '../domain/ics.ts';
import type { Logger } from '../log.ts';
import type { FeedParseMessage, FeedParseRequest } from './feed-parser-thread.ts';

/**
 * S8: feeds are parsed in a thread of their own, so a feed that costs seconds of CPU never stalls
 * the worker's event loop (its lease sweeps, heartbeats and running jobs). The thread checks the
 * time budget itself between steps; a step it cannot interrupt (one ical.js call that loops, a
 * huge line) is stopped by terminating the thread, and the next feed gets a fresh one. One thread
 * per process, kept between feeds (starting one costs more than most parses), one feed at a time.
 * See docs/security.md, "Calendar parsing budget".
 */

/** The thread stops itself at the budget; this is how long past it we wait before stopping it. */
const GRACE_MS = 250;
/** A thread that has not even started by then is broken, not slow. */
const START_TIMEOUT_MS = 60_000;
/** Heap for the thread: a 5 MB feed needs a fraction of it. */
const HEAP_MB = 256;
/** An idle thread is let go after this. */
const IDLE_MS = 60_000;

let thread: Worker | null = null;
let idleTimer: NodeJS.Timeout | null = null;
let queue: Promise<unknown> = Promise.resolve();

/** `parseIcs` in the parser thread, under `budget`: over it, or unreadable, throws `feed.invalid_calendar`. */
export async function parseIcsInThread(
  text: string,
  from: Date,
  until: Date,
  budget: IcsBudget,
  log: Logger,
): Promise<CalendarOccurrence[]> {
  const run = queue.then(() => parseOnce({ text, from, until, budget }, log));
  queue = run.catch(() => undefined);
  return run;
}

function parseOnce(request: FeedParseRequest, log: Logger): Promise<CalendarOccurrence[]> {
  if (idleTimer) clearTimeout(idleTimer);
  const worker = (thread ??= startThread());
  worker.ref();
  return new Promise<CalendarOccurrence[]>((resolve, reject) => {
    let settled = false;
    const settle = (outcome: { occurrences: CalendarOccurrence[] } | { error: Error }, stop = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      if (stop) stopThread(worker);
      else {
        worker.unref();
        idleTimer = setTimeout(() => stopThread(worker), IDLE_MS).unref();
      }
      if ('error' in outcome) reject(outcome.error);
      else resolve(outcome.occurrences);
    };
    let timer = setTimeout(
      () =>
        settle({ error: new Error(`the calendar parser did not start within ${START_TIMEOUT_MS} ms`) }, true),
      START_TIMEOUT_MS,
    );
    const onMessage = (message: FeedParseMessage) => {
      switch (message.type) {
        case 'started':
          clearTimeout(timer);
          timer = setTimeout(
            () =>
              settle(
                { error: invalidCalendar(`reading the feed took longer than ${request.budget.parseMs} ms`) },
                true,
              ),
            request.budget.parseMs + GRACE_MS,
          );
          return;
        case 'parsed':
          return settle({ occurrences: message.occurrences });
        case 'invalid':
          return settle({ error: invalidCalendar(message.reason) });
        case 'failed':
          // Not one of our refusals: kept for the operator; the tenant sees only the category.
          log.warn({ err: message.error }, 'calendar feed parser failed');
          return settle({ error: invalidCalendar('the feed could not be read as a calendar') });
        default:
          return assertNever(message, 'feed parser message');
      }
    };
    const onError = (err: Error & { code?: string }) => {
      const error =
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? invalidCalendar(`reading the feed needed more than ${HEAP_MB} MB of memory`)
          : err;
      settle({ error }, true);
    };
    const onExit = (code: number) =>
      settle({ error: new Error(`the calendar parser stopped (exit code ${code})`) }, true);
    worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    worker.postMessage(request);
  });
}

function stopThread(worker: Worker): void {
  if (thread === worker) thread = null;
  worker.terminate().catch(() => undefined);
}

function startThread(): Worker {
  const options = { resourceLimits: { maxOldGenerationSizeMb: HEAP_MB } };
  let worker: Worker;
  if (!import.meta.url.endsWith('.ts')) {
    // Built: the thread is the .js file beside this one.
    worker = new Worker(new URL('./feed-parser-thread.js', import.meta.url), options);
  } else {
    // From source through tsx: Node 20 does not apply `--import tsx` to a worker thread's entry,
    // so a small module registers tsx in the thread and then imports the .ts entry.
    const entry = new URL('./feed-parser-thread.ts', import.meta.url).href;
    const boot = [
      `import { register } from ${JSON.stringify(import.meta.resolve('tsx/esm/api'))};`,
      'register();',
      `await import(${JSON.stringify(entry)});`,
    ].join('\n');
    worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), {
      ...options,
      execArgv: [],
    });
  }
  // A thread that dies while idle is replaced by the next parse.
  worker.on('exit', () => {
    if (thread === worker) thread = null;
  });
  worker.on('error', () => undefined);
  return worker;
}
