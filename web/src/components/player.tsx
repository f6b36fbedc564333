import { useEffect, useRef, useState } from 'preact/hooks';
import { authHeaders, type Meeting } from '../api.ts';
import { clock } from '../format.ts';

/**
 * E4: the audio asked for at a time (the server gives at most 5 minutes): a minute starts at once
 * (about 2 MB); at its end the next is asked for.
 */
const STRETCH_MS = 60_000;

export interface Player {
  /** The moment being heard (ms on the meeting's timeline), null when nothing plays. */
  atMs: number | null;
  play: (fromMs: number) => void;
  error: string | null;
  audioRef: { current: HTMLAudioElement | null };
}

/**
 * E4: plays a meeting's kept audio from any line: its stretch is fetched (with the page's
 * credentials) and played from a blob; the moment heard is reported so the transcript can mark
 * the line; at a stretch's end the next one is fetched.
 */
export function usePlayer(meeting: Meeting): Player {
  const audioRef = useRef<HTMLAudioElement | null>(null);
  const from = useRef(0);
  const url = useRef<string | null>(null);
  const [atMs, setAtMs] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** The newest ▶: an answer to an older one is dropped, and its fetch aborted. */
  const asked = useRef<AbortController | null>(null);
  const play = (fromMs: number) => {
    asked.current?.abort();
    const ask = new AbortController();
    asked.current = ask;
    void (async () => {
      setError(null);
      try {
        const start = Math.max(0, Math.floor(fromMs));
        const res = await fetch(
          `/v1/meetings/${meeting.id}/audio?fromMs=${start}&toMs=${start + STRETCH_MS}`,
          {
            headers: authHeaders(),
            signal: ask.signal,
          },
        );
        if (!res.ok) {
          const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null;
          throw new Error(body?.error?.message ?? `the server answered ${res.status}`);
        }
        const blob = await res.blob();
        if (ask !== asked.current) return;
        if (url.current) URL.revokeObjectURL(url.current);
        url.current = URL.createObjectURL(blob);
        from.current = fromMs;
        const audio = audioRef.current;
        if (!audio) return;
        audio.src = url.current;
        await audio.play();
      } catch (err) {
        if (ask.signal.aborted) return;
        setError(`The audio could not be played: ${err instanceof Error ? err.message : String(err)}`);
      }
    })();
  };
  useEffect(() => {
    const audio = audioRef.current;
    if (!audio) return;
    const onTime = () => setAtMs(from.current + audio.currentTime * 1000);
    const onEnded = () => {
      const next = from.current + STRETCH_MS;
      if (meeting.durationMs !== null && next < meeting.durationMs) play(next);
      else setAtMs(null);
    };
    audio.addEventListener('timeupdate', onTime);
    audio.addEventListener('ended', onEnded);
    return () => {
      audio.removeEventListener('timeupdate', onTime);
      audio.removeEventListener('ended', onEnded);
    };
  });
  useEffect(
    () => () => {
      if (url.current) URL.revokeObjectURL(url.current);
    },
    [],
  );
  return { atMs, play, error, audioRef };
}

/** E4: the player and the privacy promise, above a transcript whose audio is kept. */
export function PlayerBar({ meeting, player }: { meeting: Meeting; player: Player }) {
  if (!meeting.playback) return null;
  return (
    <div class="player" data-testid="player">
      <p class="muted">
        The audio is kept for playback until {new Date(meeting.playback.until).toLocaleDateString()}, as this
        workspace chose; then it is deleted. Press ▶ beside a paragraph to hear it.
        {player.atMs !== null && <> Playing at {clock(player.atMs / 1000)}.</>}
      </p>
      <audio ref={player.audioRef} controls aria-label="Meeting audio" data-testid="player-audio" />
      {player.error && (
        <p role="alert" class="error">
          {player.error}
        </p>
      )}
    </div>
  );
}
