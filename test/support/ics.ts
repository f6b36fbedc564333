/** ICS text builders for the calendar tests. */

export function stamp(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

export function vevent(uid: string, start: Date, extra: string[] = [], minutes = 30): string {
  return [
    'BEGIN:VEVENT',
    `UID:${uid}`,
    `DTSTAMP:${stamp(new Date())}`,
    `DTSTART:${stamp(start)}`,
    `DTEND:${stamp(new Date(start.getTime() + minutes * 60_000))}`,
    `SUMMARY:${uid}`,
    ...extra,
    'END:VEVENT',
  ].join('\r\n');
}
