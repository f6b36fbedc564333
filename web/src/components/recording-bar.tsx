import { useEffect, useState } from 'preact/hooks';
import { clock } from '../format.ts';
import { watchSession, type SessionState } from '../session.ts';

/**
 * E1: while this tab's microphone is on, a bar on every page says so and leads back to the
 * meeting. E6: the screen is kept awake meanwhile (a phone that sleeps stops the microphone),
 * asked again when the page comes back into view, released when recording stops.
 */
export function RecordingBar({ route }: { route: string }) {
  const [s, setS] = useState<SessionState | null>(null);
  useEffect(() => watchSession(setS), []);
  const on = s !== null && (s.phase === 'starting' || s.phase === 'recording' || s.phase === 'stopping');
  useWakeLock(on);
  if (!on || !s) return null;
  const here = route.startsWith(`/meetings/${s.meetingId}`);
  return (
    <div class="recording-bar" role="status" data-testid="recording-bar" data-phase={s.phase}>
      <span class="dot" aria-hidden="true">
        ●
      </span>{' '}
      {s.phase === 'stopping' ? 'Stopping the recording…' : 'The microphone is on: recording'}{' '}
      <time>{clock(s.elapsedSeconds)}</time>
      {!here && (
        <>
          {' '}
          <a href={`#/meetings/${s.meetingId}`}>Open the meeting</a>
        </>
      )}
    </div>
  );
}

function useWakeLock(on: boolean): void {
  useEffect(() => {
    if (!on || !('wakeLock' in navigator)) return;
    let lock: WakeLockSentinel | null = null;
    let stopped = false;
    const ask = () => {
      if (document.visibilityState !== 'visible') return;
      navigator.wakeLock
        .request('screen')
        .then((l) => {
          if (stopped) void l.release();
          else lock = l;
        })
        .catch(() => undefined); // refused (battery saver, no permission): recording goes on
    };
    ask();
    document.addEventListener('visibilitychange', ask);
    return () => {
      stopped = true;
      document.removeEventListener('visibilitychange', ask);
      void lock?.release();
    };
  }, [on]);
}
