import { useEffect, useState } from 'preact/hooks';
import { call, type Meeting } from '../api.ts';
import { Upload } from '../components/upload.tsx';
import { SearchPanel } from '../components/search.tsx';
import { OutboxSummary } from '../components/outbox-notices.tsx';
import { StatusBadge } from '../components/status.tsx';
import { VisibilityBadge } from '../components/sharing.tsx';
import { age } from '../format.ts';
import { navigate, usePoll } from '../hooks.ts';
import { startRecording } from '../session.ts';

export function MeetingsPage() {
  const [query, setQuery] = useState('');
  const [meetings, setMeetings] = useState<Meeting[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [title, setTitle] = useState('');
  const [starting, setStarting] = useState(false);

  const [names, setNames] = useState<Record<string, string>>({});
  // U9: whose each meeting is, by name (the workspace's members, read once).
  useEffect(() => {
    void call<{ members: Array<{ userId: string; name: string }> }>('GET', '/v1/members')
      .then((r) => setNames(Object.fromEntries(r.members.map((m) => [m.userId, m.name]))))
      .catch(() => undefined);
  }, []);

  usePoll(
    async () => {
      try {
        const q = query.trim() ? `&q=${encodeURIComponent(query.trim())}` : '';
        const res = await call<{ meetings: Meeting[] }>('GET', `/v1/meetings?limit=50${q}`);
        setMeetings(res.meetings);
        setError(null);
      } catch (err) {
        setError(`The meeting list could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    5000,
    [query],
  );

  const record = async (e: Event) => {
    e.preventDefault();
    setStarting(true);
    setError(null);
    try {
      const m = await call<Meeting>('POST', '/v1/meetings', {
        source: 'live',
        title: title.trim() || 'Live meeting',
      });
      // Started inside the click, so the browser lets the audio start without another gesture.
      await startRecording(m.id);
      navigate(`/meetings/${m.id}`);
    } catch (err) {
      setError(`Recording could not start: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setStarting(false);
    }
  };

  return (
    <>
      <section class="card" aria-labelledby="new-heading">
        <h2 id="new-heading">New live meeting</h2>
        <form onSubmit={(e) => void record(e)} class="row">
          <label for="meeting-title" class="grow">
            Title
            <input
              id="meeting-title"
              value={title}
              maxLength={300}
              placeholder="Weekly sync"
              onInput={(e) => setTitle(e.currentTarget.value)}
            />
          </label>
          <button type="submit" disabled={starting}>
            ● Record
          </button>
        </form>
      </section>

      <OutboxSummary titles={Object.fromEntries((meetings ?? []).map((m) => [m.id, m.title]))} />

      <Upload />

      <SearchPanel />

      <section class="card" aria-labelledby="list-heading">
        <h2 id="list-heading">Meetings</h2>
        <label for="search">
          Search by title
          <input id="search" type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        </label>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        {meetings === null ? (
          <p>Loading…</p>
        ) : meetings.length === 0 ? (
          <p>{query ? 'No meeting has that in its title.' : 'No meetings yet.'}</p>
        ) : (
          <ul class="meetings" aria-label="Meetings">
            {meetings.map((m) => (
              <li key={m.id} data-meeting-id={m.id}>
                <a href={`#/meetings/${m.id}`}>{m.title}</a>
                <span class="muted">
                  {m.source} · <time dateTime={m.createdAt}>{age(m.createdAt)} ago</time>
                  {m.ownerUserId && names[m.ownerUserId] ? <> · by {names[m.ownerUserId]}</> : null}
                </span>
                <StatusBadge meeting={m} />
                {m.visibility !== 'workspace' && <VisibilityBadge meeting={m} />}
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}
