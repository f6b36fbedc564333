/**
 * R1: one meeting, however its link was written. Two attendees' calendars, or a feed and the API,
 * often carry the same call as different strings: another case in the host, a trailing slash, an
 * `authuser` or tracking parameter, a fragment. The canonical form keeps what selects the call (and,
 * for Zoom, its passcode) and drops the rest, so copies meet on one recording.
 */
export function canonicalMeetingUrl(input: URL): string {
  const url = new URL(input.toString());
  url.hash = '';
  url.username = '';
  url.password = '';
  const host = url.hostname.toLowerCase();
  let keep: (name: string) => boolean;
  if (host === 'meet.google.com') {
    // The meeting code is the whole identity; codes are case-insensitive.
    url.pathname = url.pathname.toLowerCase();
    keep = () => false;
  } else if (host === 'zoom.us' || host.endsWith('.zoom.us')) {
    keep = (name) => name === 'pwd';
  } else {
    keep = (name) => !/^utm_/i.test(name) && name !== 'authuser';
  }
  const params = [...url.searchParams.entries()]
    .filter(([name]) => keep(name))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  url.search = '';
  for (const [name, value] of params) url.searchParams.append(name, value);
  if (url.pathname.length > 1) url.pathname = url.pathname.replace(/\/+$/, '');
  return url.toString();
}
