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
  // Trailing slashes dropped by a loop: `\/+$` backtracks quadratically on a long run of them (S8).
  const path = url.pathname;
  let end = path.length;
  while (end > 1 && path[end - 1] === '/') end--;
  if (end < path.length) url.pathname = path.slice(0, end);
  return url.toString();
}

/**
 * R10: the video-call platforms a meeting bot can join (those Recall.ai supports), by host. A link
 * to anything else (a page about the meeting, an agenda) is not a meeting a bot can record.
 */
const MEETING_PLATFORMS: Array<[name: string, host: RegExp]> = [
  ['Zoom', /(^|\.)(zoom\.us|zoomgov\.com)$/i],
  ['Google Meet', /^meet\.google\.com$/i],
  ['Microsoft Teams', /(^|\.)(teams\.microsoft\.com|teams\.live\.com|teams\.cloud\.microsoft)$/i],
  ['Webex', /(^|\.)webex\.com$/i],
  ['GoTo Meeting', /(^|\.)(gotomeeting\.com|gotomeet\.me|meet\.goto\.com|app\.goto\.com)$/i],
];

export const MEETING_PLATFORM_NAMES = MEETING_PLATFORMS.map(([name]) => name);

/** The platform of a meeting link, or null when no bot can join it. */
export function meetingPlatformOf(url: URL): string | null {
  if (url.protocol !== 'https:') return null;
  const host = url.hostname.toLowerCase();
  return MEETING_PLATFORMS.find(([, pattern]) => pattern.test(host))?.[0] ?? null;
}
