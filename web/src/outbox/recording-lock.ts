/**
 * This browser's recording lock for a meeting: a Web Lock shared by every tab of the profile, held
 * by the tab recording the meeting for as long as it records. The browser drops it when that tab
 * closes or dies, which is how a draft left behind is told from one still being written.
 */

const lockName = (meetingId: string) => `verbatim.recording.${meetingId}`;

/** True when this browser can tell a live tab's lock from none (Web Locks are supported). */
export const locksSupported = (): boolean => 'locks' in navigator;

/**
 * Takes the meeting's recording lock, or null if another holder has it. The lock is held until the
 * returned function is called.
 */
export function lockMeeting(meetingId: string): Promise<(() => void) | null> {
  if (!locksSupported()) return Promise.resolve(() => undefined);
  return new Promise((resolve, reject) => {
    navigator.locks
      .request(lockName(meetingId), { ifAvailable: true }, (lock) => {
        if (!lock) {
          resolve(null);
          return undefined;
        }
        return new Promise<void>((release) => resolve(release));
      })
      .catch(reject);
  });
}

/** Runs `fn` holding the meeting's recording lock; null, without running it, if another holds it. */
export async function withMeetingLock<T>(meetingId: string, fn: () => Promise<T>): Promise<T | null> {
  const release = await lockMeeting(meetingId);
  if (!release) return null;
  try {
    return await fn();
  } finally {
    release();
  }
}

/** True when some tab of this browser holds the meeting's recording lock. */
export async function meetingLockHeld(meetingId: string): Promise<boolean> {
  if (!locksSupported()) return false;
  const { held } = await navigator.locks.query();
  return (held ?? []).some((l) => l.name === lockName(meetingId));
}
