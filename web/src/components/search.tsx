import { useEffect, useState } from 'preact/hooks';
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

/**
 * O4 and O5 on the meetings page, from its one box: what was said (search), or an answer over the
 * meetings (ask). E7: a meeting's hit count is the hits shown; more in it are said so, with a link.
 */
export function SearchResults({ mode, text }: { mode: 'search' | 'ask'; text: string }) {
  const [results, setResults] = useState<SearchResult[] | null>(null);
  const [answer, setAnswer] = useState<AskAnswer | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const run = async () => {
      try {
        if (mode === 'search') {
          const res = await call<{ results: SearchResult[] }>(
            'GET',
            `/v1/search?q=${encodeURIComponent(text)}&limit=20`,
          );
          setResults(res.results);
        } else {
          setAnswer(await call<AskAnswer>('POST', '/v1/ask', { question: text }));
        }
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        setError(mode === 'search' ? `Search failed: ${why}` : `The question could not be answered: ${why}`);
      }
    };
    void run();
  }, [mode, text]);

  if (error)
    return (
      <p role="alert" class="error">
        {error}
      </p>
    );
  if (mode === 'ask') {
    if (!answer) return <p role="status">Asking…</p>;
    return (
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
    );
  }
  if (!results) return <p role="status">Searching what was said…</p>;
  if (results.length === 0) return <p data-testid="search-empty">No transcript or minutes said that.</p>;
  return (
    <section aria-labelledby="said-heading" class="said">
      <h3 id="said-heading">What was said</h3>
      <ol class="search-results" aria-label="Search results" data-testid="search-results">
        {results.map((r) => (
          <li key={r.meeting.id} data-meeting-id={r.meeting.id}>
            <a href={`#/meetings/${r.meeting.id}`}>{r.meeting.title}</a>{' '}
            <span class="muted">
              <time dateTime={r.meeting.createdAt}>{new Date(r.meeting.createdAt).toLocaleDateString()}</time>{' '}
              ·{' '}
              <span data-testid="hit-count">
                {r.hits.length} {r.hits.length === 1 ? 'hit' : 'hits'}
              </span>
              {r.hitCount > r.hits.length && (
                <>
                  {' '}
                  (<a href={`#/meetings/${r.meeting.id}`}>more in this meeting</a>)
                </>
              )}
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
    </section>
  );
}
