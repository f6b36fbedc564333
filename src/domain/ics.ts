import ICAL from 'ical.js';
import { canonicalMeetingUrl, meetingPlatformOf } from './meeting-url.ts';

type IcalEvent = InstanceType<typeof ICAL.Event>;

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

const URLS = /https:\/\/[^\s<>"'\\]+/g;

/** The first video-call link in the event's URL, location or description (R1). */
export function meetingUrlOf(...texts: Array<string | null | undefined>): string | null {
  for (const text of texts) {
    for (const match of (text ?? '').matchAll(URLS)) {
      try {
        const url = new URL(match[0].replace(/[).,;]+$/, ''));
        if (meetingPlatformOf(url)) return canonicalMeetingUrl(url);
      } catch {
        /* not a URL */
      }
    }
  }
  return null;
}

/**
 * R1: the events of an ICS feed between `from` and `until`, recurring ones expanded (bounded),
 * through ical.js. An occurrence changed on its own (a VEVENT with the series' UID and a
 * RECURRENCE-ID: moved, retitled, given another link or canceled) replaces that occurrence of the
 * series and keeps its identity, so a moved occurrence is reconciled as moved. A feed that does not
 * parse throws.
 */
export function parseIcs(text: string, from: Date, until: Date, maxOccurrences = 500): CalendarOccurrence[] {
  const root = new ICAL.Component(ICAL.parse(text) as unknown[]);
  const vevents = root.getAllSubcomponents('vevent');
  const masters = new Map<string, IcalEvent>();
  const exceptions: IcalEvent[] = [];
  for (const vevent of vevents) {
    const event = new ICAL.Event(vevent);
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
  const occurrence = (event: IcalEvent, uid: string, start: Date, end: Date): CalendarOccurrence => {
    const url = event.component.getFirstPropertyValue('url');
    const status = String(event.component.getFirstPropertyValue('status') ?? '').toUpperCase();
    return {
      uid,
      title: event.summary || 'Meeting',
      start,
      end,
      meetingUrl: meetingUrlOf(typeof url === 'string' ? url : null, event.location, event.description),
      canceled: status === 'CANCELLED',
    };
  };
  const inRange = (start: Date, end: Date) => end > from && start < until;
  for (const event of masters.values()) {
    if (!event.isRecurring()) {
      const start = event.startDate.toJSDate();
      const end = event.endDate.toJSDate();
      if (inRange(start, end)) out.push(occurrence(event, event.uid, start, end));
      continue;
    }
    const it = event.iterator();
    // Occurrences before `from` do not count towards the cap (a series may have started years ago);
    // the step bound only stops a runaway rule.
    let kept = 0;
    for (
      let steps = 0, next = it.next();
      next && kept < maxOccurrences && steps < 100_000;
      steps++, next = it.next()
    ) {
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
      if (slot.getTime() >= until.getTime() + 24 * 60 * 60_000) break;
      const start = details.startDate.toJSDate();
      const end = details.endDate.toJSDate();
      if (!inRange(start, end)) continue;
      out.push(occurrence(details.item as IcalEvent, `${event.uid}#${slot.toISOString()}`, start, end));
      kept++;
    }
  }
  for (const event of orphans) {
    // An exception whose series is not in the feed stands alone, under the same identity.
    const start = event.startDate.toJSDate();
    const end = event.endDate.toJSDate();
    if (inRange(start, end)) {
      out.push(occurrence(event, `${event.uid}#${event.recurrenceId.toJSDate().toISOString()}`, start, end));
    }
  }
  return out;
}
