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
  const all = [...url.searchParams.entries()];
  const kept = all.filter(([name]) => keep(name));
  // Rebuilt only when something is dropped: rebuilding re-encodes (a Teams link's %7b becomes %7B),
  // and links stored before this form existed must still compare equal.
  if (kept.length !== all.length) {
    url.search = '';
    for (const [name, value] of kept) url.searchParams.append(name, value);
  }
  if (url.pathname.length > 1) url.pathname = url.pathname.replace(/\/+$/, '');
  return url.toString();
}
