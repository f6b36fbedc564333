import ICAL from 'ical.js';

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

const MEETING_HOSTS =
  /(^|\.)(zoom\.us|meet\.google\.com|teams\.microsoft\.com|teams\.live\.com|webex\.com|whereby\.com)$/i;
const URLS = /https:\/\/[^\s<>"'\\]+/g;

/** The first video-call link in the event's URL, location or description (R1). */
export function meetingUrlOf(...texts: Array<string | null | undefined>): string | null {
  for (const text of texts) {
    for (const match of (text ?? '').matchAll(URLS)) {
      try {
        const url = new URL(match[0].replace(/[).,;]+$/, ''));
        if (MEETING_HOSTS.test(url.hostname)) return url.toString();
      } catch {
        /* not a URL */
      }
    }
  }
  return null;
}

/**
 * R1: the events of an ICS feed between `from` and `until`, recurring ones expanded (bounded),
 * through ical.js. A feed that does not parse throws.
 */
export function parseIcs(text: string, from: Date, until: Date, maxOccurrences = 500): CalendarOccurrence[] {
  const root = new ICAL.Component(ICAL.parse(text) as unknown[]);
  const out: CalendarOccurrence[] = [];
  for (const vevent of root.getAllSubcomponents('vevent')) {
    const event = new ICAL.Event(vevent);
    const url = vevent.getFirstPropertyValue('url');
    const status = String(vevent.getFirstPropertyValue('status') ?? '').toUpperCase();
    const meetingUrl = meetingUrlOf(typeof url === 'string' ? url : null, event.location, event.description);
    const base = {
      title: event.summary || 'Meeting',
      meetingUrl,
      canceled: status === 'CANCELLED',
    };
    if (!event.isRecurring()) {
      const start = event.startDate.toJSDate();
      const end = event.endDate.toJSDate();
      if (end > from && start < until) out.push({ ...base, uid: event.uid, start, end });
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
      // ical.js's declaration of the details does not resolve; its shape is documented.
      const details = event.getOccurrenceDetails(next) as unknown as {
        startDate: { toJSDate(): Date };
        endDate: { toJSDate(): Date };
      };
      const start = details.startDate.toJSDate();
      if (start >= until) break;
      const end = details.endDate.toJSDate();
      if (end <= from) continue;
      out.push({ ...base, uid: `${event.uid}#${start.toISOString()}`, start, end });
      kept++;
    }
  }
  return out;
}
