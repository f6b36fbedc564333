import { useEffect, useState } from 'preact/hooks';
import { clock } from '../format.ts';

interface Shared {
  meeting: { title: string; status: string; createdAt: string; durationMs: number | null };
  transcript: {
    complete: boolean;
    segments: Array<{ startMs: number; endMs: number; text: string; speaker: string | null }>;
  };
  minutes: { summary?: string; actionItems?: Array<{ text: string }> } | null;
  expiresAt: string;
}

/**
 * U5/U9: what a share link shows (`#/s/<token>`), with no sign-in: one meeting, read-only. The
 * token stays in the page's address after '#', so it never reaches a server log.
 */
export function SharedPage({ token }: { token: string }) {
  const [shown, setShown] = useState<Shared | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    void (async () => {
      try {
        const res = await fetch(`/v1/shared/${encodeURIComponent(token)}`);
        if (res.status === 404) throw new Error('This link is unknown, was revoked, or has expired.');
        if (!res.ok) throw new Error(`The server answered ${res.status}.`);
        setShown((await res.json()) as Shared);
      } catch (err) {
        setError(err instanceof Error ? err.message : String(err));
      }
    })();
  }, [token]);
  if (error)
    return (
      <main class="narrow">
        <p role="alert" class="error">
          {error}
        </p>
      </main>
    );
  if (!shown) return <main class="narrow">Loading…</main>;
  return (
    <main>
      <h1>{shown.meeting.title}</h1>
      <p class="muted">
        Shared with you, read-only ·{' '}
        <time dateTime={shown.meeting.createdAt}>{new Date(shown.meeting.createdAt).toLocaleString()}</time> ·
        link valid until {new Date(shown.expiresAt).toLocaleDateString()}
      </p>
      {shown.minutes?.summary && (
        <section class="card" aria-labelledby="shared-minutes">
          <h2 id="shared-minutes">Minutes</h2>
          <p>{shown.minutes.summary}</p>
        </section>
      )}
      <section class="card" aria-labelledby="shared-transcript">
        <h2 id="shared-transcript">Transcript</h2>
        {shown.transcript.segments.length === 0 ? (
          <p>{shown.transcript.complete ? 'Nothing was said.' : 'The transcript is not ready yet.'}</p>
        ) : (
          <ol class="transcript" data-testid="shared-transcript">
            {shown.transcript.segments.map((s) => (
              <li key={s.startMs}>
                <span class="muted">{clock(Math.floor(s.startMs / 1000))}</span>{' '}
                {s.speaker ? <strong>{s.speaker}: </strong> : null}
                {s.text}
              </li>
            ))}
          </ol>
        )}
      </section>
    </main>
  );
}
