import ICAL from 'ical.js';
import { AppError, ErrorKind } from './errors.ts';
import { canonicalMeetingUrl, meetingPlatformOf } from './meeting-url.ts';

type IcalEvent = InstanceType<typeof ICAL.Event>;
type IcalTime = InstanceType<typeof ICAL.Time>;
type IcalRecur = InstanceType<typeof ICAL.Recur>;

/** One occurrence of a calendar event, as the bot scheduler needs it. */
export interface CalendarOccurrence {
  /** The event's UID, with the occurrence's start for a recurring event. */
  uid: string;
  title: string;
  start: Date;
  end: Date;
  meetingUrl: string | null;
  canceled: boolean;
}

/**
 * S8: what one feed may cost to read. Over any of these the feed is refused whole
 * (`feed.invalid_calendar`), never cut short: a cut feed would read as events deleted.
 */
export interface IcsBudget {
  /** Occurrences in the window, all events together. */
  maxOccurrences: number;
  /** Occurrences in the window of one event; its rule may take 50 times as many steps to get there. */
  maxEventOccurrences: number;
  /** Wall-clock time for the whole parse. */
  parseMs: number;
}

export const DEFAULT_ICS_BUDGET: IcsBudget = {
  maxOccurrences: 5000,
  maxEventOccurrences: 500,
  parseMs: 5000,
};

/** Rule steps an event may take per occurrence it is allowed in the window. */
const STEPS_PER_OCCURRENCE = 50;

export const INVALID_CALENDAR = 'feed.invalid_calendar';

/** A feed that cannot be read as a calendar, or costs more than its budget. The message is ours, never feed text. */
export function invalidCalendar(reason: string): AppError {
  return new AppError(ErrorKind.permanent, INVALID_CALENDAR, reason);
}

const URLS = /https:\/\/[^\s<>"'\\]+/g;
const TRAILING = new Set([')', '.', ',', ';']);

/**
 * The first video-call link in the event's URL, location or description (R1). Linear in the text
 * (S8): the link pattern has one greedy class and no nested quantifier, and trailing punctuation is
 * trimmed by a loop, since `[).,;]+$` backtracks quadratically on a long run of `)`.
 */
export function meetingUrlOf(...texts: Array<string | null | undefined>): string | null {
  for (const text of texts) {
    for (const match of (text ?? '').matchAll(URLS)) {
      let end = match[0].length;
      while (end > 0 && TRAILING.has(match[0][end - 1]!)) end--;
      try {
        const url = new URL(match[0].slice(0, end));
        if (meetingPlatformOf(url)) return canonicalMeetingUrl(url);
      } catch {
        /* not a URL */
      }
    }
  }
  return null;
}

/**
 * R1: the events of an ICS feed between `from` and `until`, recurring ones expanded, through
 * ical.js. An occurrence changed on its own (a VEVENT with the series' UID and a RECURRENCE-ID:
 * moved, retitled, given another link or canceled) replaces that occurrence of the series and keeps
 * its identity, so a moved occurrence is reconciled as moved. A feed that does not parse, or is over
 * `budget` (S8), throws `feed.invalid_calendar` with the reason. Synchronous and CPU-bound: the
 * worker runs it in a thread (src/bots/feed-parser.ts), which also enforces the time budget when a
 * single step cannot be interrupted.
 */
export function parseIcs(
  text: string,
  from: Date,
  until: Date,
  budget: Partial<IcsBudget> = {},
): CalendarOccurrence[] {
  const { maxOccurrences, maxEventOccurrences, parseMs } = { ...DEFAULT_ICS_BUDGET, ...budget };
  const deadline = Date.now() + parseMs;
  const checkClock = () => {
    if (Date.now() > deadline) throw invalidCalendar(`reading the feed took longer than ${parseMs} ms`);
  };
  let root: InstanceType<typeof ICAL.Component>;
  try {
    root = new ICAL.Component(ICAL.parse(text) as unknown[]);
    // An empty body or a lone VEVENT must not read as a calendar with no events (all deleted).
    if (root.name !== 'vcalendar') throw new Error('not a VCALENDAR');
  } catch {
    // ical.js quotes the offending line; the reason stays ours.
    throw invalidCalendar('the feed is not an iCalendar (ICS) file');
  }
  checkClock();
  const vevents = root.getAllSubcomponents('vevent');
  const masters = new Map<string, IcalEvent>();
  const exceptions: IcalEvent[] = [];
  for (const vevent of vevents) {
    // Given no exceptions, ical.js relates every RECURRENCE-ID vevent of the calendar to each event,
    // whatever its UID: quadratic in the feed (16,000 events took 99 s), and another series'
    // exception could replace this one's occurrence. Exceptions are related below, by UID.
    const event = new ICAL.Event(vevent, { exceptions: [], strictExceptions: true });
    if (vevent.hasProperty('recurrence-id')) exceptions.push(event);
    else masters.set(event.uid, event);
  }
  const orphans: IcalEvent[] = [];
  for (const exception of exceptions) {
    const master = masters.get(exception.uid);
    if (master?.isRecurring()) master.relateException(exception);
    else orphans.push(exception);
  }
  const out: CalendarOccurrence[] = [];
  const links = new Map<IcalEvent, string | null>();
  const occurrence = (event: IcalEvent, uid: string, start: Date, end: Date): CalendarOccurrence => {
    // Every occurrence of a series shares its texts: each is scanned once.
    let meetingUrl = links.get(event);
    if (meetingUrl === undefined) {
      const url = event.component.getFirstPropertyValue('url');
      meetingUrl = meetingUrlOf(typeof url === 'string' ? url : null, event.location, event.description);
      links.set(event, meetingUrl);
    }
    const status = String(event.component.getFirstPropertyValue('status') ?? '').toUpperCase();
    return {
      uid,
      title: event.summary || 'Meeting',
      start,
      end,
      meetingUrl,
      canceled: status === 'CANCELLED',
    };
  };
  const push = (o: CalendarOccurrence) => {
    out.push(o);
    if (out.length > maxOccurrences) {
      throw invalidCalendar(
        `the feed has more than ${maxOccurrences} occurrences in the next ${days(from, until)} days`,
      );
    }
  };
  const inRange = (start: Date, end: Date) => end > from && start < until;
  let ordinal = 0;
  for (const event of masters.values()) {
    ordinal++;
    checkClock();
    if (!event.isRecurring()) {
      const start = event.startDate.toJSDate();
      const end = event.endDate.toJSDate();
      if (inRange(start, end)) push(occurrence(event, event.uid, start, end));
      continue;
    }
    const what = () => `event #${ordinal}${freqOf(event)}`;
    let it: ReturnType<IcalEvent['iterator']>;
    try {
      it = event.iterator(walkStart(event, from, until) ?? undefined);
    } catch {
      throw invalidCalendar(`${what()} has a recurrence rule that cannot be expanded`);
    }
    const maxSteps = STEPS_PER_OCCURRENCE * maxEventOccurrences;
    let kept = 0;
    for (let steps = 1; ; steps++) {
      if (steps > maxSteps) {
        throw invalidCalendar(`${what()} needs more than ${maxSteps} steps of its rule to reach the window`);
      }
      if ((steps & 63) === 0) checkClock();
      let next: IcalTime | null;
      try {
        next = it.next();
      } catch {
        // ical.js gives up on a rule it cannot fulfil ("max tries").
        throw invalidCalendar(`${what()} has a recurrence rule that cannot be expanded`);
      }
      if (!next) break;
      // ical.js's declaration of the details does not resolve (the linter sees an error type either
      // way); its shape is documented.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
      const details = event.getOccurrenceDetails(next) as {
        recurrenceId: { toJSDate(): Date };
        item: unknown;
        startDate: { toJSDate(): Date };
        endDate: { toJSDate(): Date };
      };
      const slot = details.recurrenceId.toJSDate();
      // A moved occurrence may now fall outside its slot's place in the series: bound the walk by
      // the slot, keep the occurrence by where it is now.
      if (slot.getTime() >= until.getTime() + DAY_MS) break;
      const start = details.startDate.toJSDate();
      const end = details.endDate.toJSDate();
      if (!inRange(start, end)) continue;
      if (++kept > maxEventOccurrences) {
        throw invalidCalendar(
          `${what()} has more than ${maxEventOccurrences} occurrences in the next ${days(from, until)} days`,
        );
      }
      push(occurrence(details.item as IcalEvent, `${event.uid}#${slot.toISOString()}`, start, end));
    }
  }
  for (const event of orphans) {
    // An exception whose series is not in the feed stands alone, under the same identity.
    const start = event.startDate.toJSDate();
    const end = event.endDate.toJSDate();
    if (inRange(start, end)) {
      push(occurrence(event, `${event.uid}#${event.recurrenceId.toJSDate().toISOString()}`, start, end));
    }
  }
  return out;
}

const DAY_MS = 24 * 60 * 60_000;
const PERIOD_SECONDS: Partial<Record<string, number>> = {
  SECONDLY: 1,
  MINUTELY: 60,
  HOURLY: 3600,
  DAILY: 86_400,
  WEEKLY: 604_800,
};

function days(from: Date, until: Date): number {
  return Math.round((until.getTime() - from.getTime()) / DAY_MS);
}

/** The rule's frequency for an error message: a word from a closed set, never feed text. */
function freqOf(event: IcalEvent): string {
  const freq = rulesOf(event)[0]?.freq;
  return freq && (freq in PERIOD_SECONDS || freq === 'MONTHLY' || freq === 'YEARLY') ? ` (FREQ=${freq})` : '';
}

function rulesOf(event: IcalEvent): IcalRecur[] {
  return event.component.getAllProperties('rrule').map((p) => p.getFirstValue() as IcalRecur);
}

/**
 * S8: where the walk through a series may start instead of DTSTART — the slot a whole number of
 * periods after DTSTART (counted on DTSTART's wall clock, as ical.js steps) at or before anything
 * that can reach the window. From there the rule yields what it would have yielded walking from
 * DTSTART, so a SECONDLY rule from the year 2000 costs a few hundred steps, not 800 million. Only
 * rules that repeat with their period skip: one RRULE, FREQ up to WEEKLY, no COUNT (it counts from
 * DTSTART), no BYSETPOS, no THISANDFUTURE exception; the others walk from DTSTART under the step
 * cap. Null: walk from DTSTART.
 */
function walkStart(event: IcalEvent, from: Date, until: Date): IcalTime | null {
  const rules = rulesOf(event);
  const rule = rules[0];
  if (rules.length !== 1 || !rule || rule.count || event.rangeExceptions.length > 0) return null;
  const unit = PERIOD_SECONDS[rule.freq];
  const parts = rule.parts as Record<string, unknown> | undefined;
  if (!unit || parts?.BYSETPOS !== undefined) return null;
  const period = unit * Math.max(1, Math.trunc(rule.interval || 1));
  const dtstart = event.startDate;
  // Every occurrence that reaches the window starts at or after this, and so does the slot of
  // every exception moved into the window (the walk must pass its slot to find it). The first
  // step from a skipped-to start may be that start even where the BY parts exclude it; it ends
  // before the window.
  let target = from.getTime() - Math.max(0, event.duration.toSeconds() * 1000);
  for (const exception of Object.values(event.exceptions)) {
    const start = exception.startDate.toJSDate();
    const end = exception.endDate.toJSDate();
    if (end > from && start < until) target = Math.min(target, exception.recurrenceId.toJSDate().getTime());
  }
  if (!Number.isFinite(target) || target <= dtstart.toJSDate().getTime()) return null;
  try {
    const targetWall = ICAL.Time.fromJSDate(new Date(target), true).convertToZone(dtstart.zone);
    let k = Math.floor((wallSeconds(targetWall) - wallSeconds(dtstart)) / period);
    // On the wall clock that slot is at or before the target; a zone's offset change (DST) can
    // still put it after, and ical.js's calendar before 1582 is not the JS one: correct by the
    // difference until the slot is less than a period before the target.
    let best: IcalTime | null = null;
    for (let tries = 0; k > 0 && tries < 4; tries++) {
      const start = dtstart.clone();
      // DAILY and WEEKLY move by days, which keeps the wall-clock time across DST as ical.js does.
      if (unit >= 86_400) start.adjust((k * period) / 86_400, 0, 0, 0);
      else start.adjust(0, 0, 0, k * period);
      const ahead = (target - start.toJSDate().getTime()) / 1000;
      if (ahead < 0) {
        k -= Math.ceil(-ahead / period);
        continue;
      }
      best = start;
      if (ahead < period) break;
      k += Math.floor(ahead / period);
    }
    return best;
  } catch {
    /* a zone ical.js cannot convert to: walk from DTSTART */
  }
  return null;
}

/** A time's wall-clock reading in seconds, ignoring its zone. */
function wallSeconds(t: IcalTime): number {
  const d = new Date(0);
  // Not Date.UTC: it reads years 0–99 as 1900–1999.
  d.setUTCFullYear(t.year, t.month - 1, t.day);
  d.setUTCHours(t.hour, t.minute, t.second, 0);
  return d.getTime() / 1000;
}
