import { useEffect, useState } from 'preact/hooks';
import { call, type Meeting } from '../api.ts';
import { Upload } from '../components/upload.tsx';
import { SearchResults } from '../components/search.tsx';
import { OutboxSummary } from '../components/outbox-notices.tsx';
import { StatusBadge } from '../components/status.tsx';
import { VisibilityBadge } from '../components/sharing.tsx';
import { duration, when } from '../format.ts';
import { navigate, usePoll } from '../hooks.ts';
import { startRecording } from '../session.ts';

/** E1: a first page that shows at once (bench r: the list ≤ 500 ms with 500 meetings). */
const PAGE = 25;
const MAX_SHOWN = 200;

export function MeetingsPage() {
  const [query, setQuery] = useState('');
  const [mode, setMode] = useState<'search' | 'ask'>('search');
  const [submitted, setSubmitted] = useState<{ mode: 'search' | 'ask'; text: string; n: number } | null>(
    null,
  );
  const [meetings, setMeetings] = useState<Meeting[] | null>(null);
  /** E1: how many of the newest meetings are listed; Show more adds a page (the API gives 200 at most). */
  const [shown, setShown] = useState(PAGE);
  const [more, setMore] = useState(false);
  const [previews, setPreviews] = useState<Record<string, { text: string; speakers: string[] }>>({});
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
        // In search mode the box filters the list by title as it is typed.
        const q = mode === 'search' && query.trim() ? `&q=${encodeURIComponent(query.trim())}` : '';
        const res = await call<{
          meetings: Meeting[];
          nextCursor: string | null;
          previews?: typeof previews;
        }>('GET', `/v1/meetings?limit=${shown}${q}`);
        setMeetings(res.meetings);
        setMore(res.nextCursor !== null);
        setPreviews(res.previews ?? {});
        setError(null);
      } catch (err) {
        setError(`The meeting list could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    5000,
    [query, mode, shown],
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

  // E7: the example is the newest meeting's title, which the box finds (nothing on an empty install).
  const example = meetings?.[0]?.title;
  return (
    <>
      <section class="card actions" aria-labelledby="new-heading">
        <h2 id="new-heading" class="visually-hidden">
          New meeting
        </h2>
        <form onSubmit={(e) => void record(e)} class="row">
          <label for="meeting-title" class="grow">
            <span class="visually-hidden">Title</span>
            <input
              id="meeting-title"
              value={title}
              maxLength={300}
              placeholder="Title of a new meeting (optional)"
              onInput={(e) => setTitle(e.currentTarget.value)}
            />
          </label>
          <button type="submit" disabled={starting}>
            ● Record
          </button>
        </form>
        <Upload />
      </section>

      <OutboxSummary titles={Object.fromEntries((meetings ?? []).map((m) => [m.id, m.title]))} />

      <section class="card" aria-labelledby="list-heading">
        <h2 id="list-heading">Meetings</h2>
        <FindBox
          query={query}
          mode={mode}
          example={example}
          onQuery={setQuery}
          onMode={setMode}
          onSubmit={() => setSubmitted({ mode, text: query.trim(), n: (submitted?.n ?? 0) + 1 })}
        />
        {submitted && <SearchResults key={submitted.n} mode={submitted.mode} text={submitted.text} />}
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        {meetings === null ? (
          <p>Loading…</p>
        ) : meetings.length === 0 ? (
          <p>
            {query && mode === 'search'
              ? 'No meeting has that in its title. Press Find to search what was said.'
              : 'No meetings yet. Record one, or upload a recording.'}
          </p>
        ) : (
          <>
            <MeetingList meetings={meetings} previews={previews} names={names} />
            {more &&
              (shown < MAX_SHOWN ? (
                <button type="button" class="secondary" onClick={() => setShown(shown + PAGE)}>
                  Show more meetings
                </button>
              ) : (
                <p class="muted">Older meetings: search for them by title or by what was said.</p>
              ))}
          </>
        )}
      </section>
    </>
  );
}

/** E1: each meeting as a line: title, status, when, how long, who spoke, and its first words. */
function MeetingList({
  meetings,
  previews,
  names,
}: {
  meetings: Meeting[];
  previews: Record<string, { text: string; speakers: string[] }>;
  names: Record<string, string>;
}) {
  return (
    <ul class="meetings" aria-label="Meetings">
      {meetings.map((m) => (
        <li key={m.id} data-meeting-id={m.id}>
          <div class="meeting-line">
            <a href={`#/meetings/${m.id}`} class="meeting-title">
              {m.title}
            </a>
            <StatusBadge meeting={m} />
            {m.visibility !== 'workspace' && <VisibilityBadge meeting={m} />}
          </div>
          <div class="muted meeting-meta">
            <time dateTime={m.createdAt} data-testid="meeting-when">
              {when(m.createdAt)}
            </time>
            {m.durationMs !== null && <span data-testid="meeting-duration"> · {duration(m.durationMs)}</span>}
            {previews[m.id]?.speakers.length ? <> · {previews[m.id]!.speakers.join(', ')}</> : null}
            {m.ownerUserId && names[m.ownerUserId] ? <> · by {names[m.ownerUserId]}</> : null}
          </div>
          {previews[m.id]?.text ? (
            <p class="preview" data-testid="meeting-preview">
              {previews[m.id]!.text}
            </p>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

/** E1: one box: it filters the list by title as it is typed; Find searches what was said, or Ask asks. */
function FindBox({
  query,
  mode,
  example,
  onQuery,
  onMode,
  onSubmit,
}: {
  query: string;
  mode: 'search' | 'ask';
  example: string | undefined;
  onQuery: (q: string) => void;
  onMode: (m: 'search' | 'ask') => void;
  onSubmit: () => void;
}) {
  return (
    <form
      class="row find"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        if (query.trim()) onSubmit();
      }}
    >
      <label for="find" class="grow">
        <span class="visually-hidden">
          {mode === 'ask' ? 'Ask your meetings' : 'Search titles and what was said'}
        </span>
        <input
          id="find"
          type="search"
          value={query}
          maxLength={1000}
          placeholder={
            mode === 'ask'
              ? 'Ask a question, e.g. what did we decide?'
              : example
                ? `Search titles and what was said, e.g. ${example}`
                : 'Search titles and what was said'
          }
          onInput={(e) => onQuery(e.currentTarget.value)}
        />
      </label>
      <fieldset class="mode">
        <legend class="visually-hidden">Search or ask</legend>
        <label class="inline">
          <input type="radio" name="mode" checked={mode === 'search'} onChange={() => onMode('search')} />
          Search
        </label>
        <label class="inline">
          <input type="radio" name="mode" checked={mode === 'ask'} onChange={() => onMode('ask')} />
          Ask
        </label>
      </fieldset>
      <button type="submit" data-testid="find-submit">
        {mode === 'ask' ? 'Ask' : 'Find'}
      </button>
    </form>
  );
}
