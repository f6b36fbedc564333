import { useState } from 'preact/hooks';
import { call, type Ask as AskAnswer, type AskPassage, type SearchResult } from '../api.ts';
import { clock } from '../format.ts';

type Highlight = SearchResult['hits'][number]['highlights'][number];

/** Where a hit or a citation opens: its meeting's transcript at that moment (minutes: the meeting). */
function hrefOf(meetingId: string, startMs: number | null): string {
  return startMs === null ? `#/meetings/${meetingId}` : `#/meetings/${meetingId}?t=${startMs}`;
}

/** The snippet with its matched words in <mark>, built as elements: no HTML from the server. */
function Marked({ text, highlights }: { text: string; highlights: Highlight[] }) {
  const parts = [];
  let at = 0;
  for (const [i, h] of highlights.entries()) {
    parts.push(text.slice(at, h.start), <mark key={i}>{text.slice(h.start, h.end)}</mark>);
    at = h.end;
  }
  parts.push(text.slice(at));
  return <span>{parts}</span>;
}

/** O5: the answer's [n] marks become links to the passages they cite. */
function AnswerText({ text, passages }: { text: string; passages: AskPassage[] }) {
  const parts = text.split(/(\[\d+(?:, \d+)*\])/g);
  return (
    <p data-testid="ask-answer">
      {parts.map((part, i) => {
        const cited = /^\[(\d+(?:, \d+)*)\]$/.exec(part);
        if (!cited?.[1]) return part;
        return (
          <span key={i}>
            [
            {cited[1].split(', ').map((n, j) => {
              const p = passages.find((x) => x.n === Number(n));
              return (
                <span key={n}>
                  {j > 0 ? ', ' : ''}
                  {p ? (
                    <a href={hrefOf(p.meetingId, p.startMs)} data-citation={n}>
                      {n}
                    </a>
                  ) : (
                    n
                  )}
                </span>
              );
            })}
            ]
          </span>
        );
      })}
    </p>
  );
}

/** O4 and O5 on the meetings page: search what was said, and ask a question over the meetings. */
export function SearchPanel() {
  const [query, setQuery] = useState('');
  const [results, setResults] = useState<SearchResult[] | null>(null);
  const [question, setQuestion] = useState('');
  const [answer, setAnswer] = useState<AskAnswer | null>(null);
  const [busy, setBusy] = useState<'search' | 'ask' | null>(null);
  const [error, setError] = useState<string | null>(null);

  const search = async (e: Event) => {
    e.preventDefault();
    if (!query.trim()) return;
    setBusy('search');
    setError(null);
    try {
      const res = await call<{ results: SearchResult[] }>(
        'GET',
        `/v1/search?q=${encodeURIComponent(query.trim())}&limit=20`,
      );
      setResults(res.results);
    } catch (err) {
      setError(`Search failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(null);
    }
  };

  const ask = async (e: Event) => {
    e.preventDefault();
    if (!question.trim()) return;
    setBusy('ask');
    setError(null);
    try {
      setAnswer(await call<AskAnswer>('POST', '/v1/ask', { question: question.trim() }));
    } catch (err) {
      setError(`The question could not be answered: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(null);
    }
  };

  return (
    <section class="card" aria-labelledby="said-heading">
      <h2 id="said-heading">Find what was said</h2>
      <form onSubmit={(e) => void search(e)} class="row" role="search">
        <label for="said-search" class="grow">
          Search every transcript and the minutes
          <input
            id="said-search"
            type="search"
            value={query}
            maxLength={500}
            placeholder='vendor contract, "exact phrase", budget -marketing'
            onInput={(e) => setQuery(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={busy !== null}>
          Search
        </button>
      </form>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {results !== null &&
        (results.length === 0 ? (
          <p data-testid="search-empty">No meeting said that.</p>
        ) : (
          <ol class="search-results" aria-label="Search results" data-testid="search-results">
            {results.map((r) => (
              <li key={r.meeting.id} data-meeting-id={r.meeting.id}>
                <a href={`#/meetings/${r.meeting.id}`}>{r.meeting.title}</a>{' '}
                <span class="muted">
                  <time dateTime={r.meeting.createdAt}>
                    {new Date(r.meeting.createdAt).toLocaleDateString()}
                  </time>{' '}
                  · {r.hitCount} {r.hitCount === 1 ? 'hit' : 'hits'}
                </span>
                <ul>
                  {r.hits.map((h, i) => (
                    <li key={i}>
                      <a href={hrefOf(r.meeting.id, h.startMs)} data-hit-ms={h.startMs ?? ''}>
                        {h.startMs === null ? 'minutes' : clock(h.startMs / 1000)}
                      </a>{' '}
                      <Marked text={h.snippet} highlights={h.highlights} />
                    </li>
                  ))}
                </ul>
              </li>
            ))}
          </ol>
        ))}
      <form onSubmit={(e) => void ask(e)} class="row">
        <label for="ask-question" class="grow">
          Ask your meetings
          <input
            id="ask-question"
            value={question}
            maxLength={1000}
            placeholder="What did we decide about the vendor contract?"
            onInput={(e) => setQuestion(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={busy !== null}>
          {busy === 'ask' ? 'Asking…' : 'Ask'}
        </button>
      </form>
      {answer && (
        <div class="answer" data-testid="ask-panel" data-mode={answer.mode}>
          {answer.note && <p class="muted">{answer.note}</p>}
          {answer.answer && <AnswerText text={answer.answer} passages={answer.passages} />}
          {answer.passages.length > 0 && (
            <ol class="passages" aria-label={answer.mode === 'model' ? 'Sources' : 'Passages'}>
              {answer.passages.map((p) => (
                <li key={p.n} value={p.n}>
                  <a href={hrefOf(p.meetingId, p.startMs)}>
                    {p.meetingTitle}
                    {p.startMs === null ? ' (minutes)' : ` at ${clock(p.startMs / 1000)}`}
                  </a>
                  : {p.text}
                </li>
              ))}
            </ol>
          )}
        </div>
      )}
    </section>
  );
}
