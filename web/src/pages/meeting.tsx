import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError, call, NetworkError, type Meeting, type Minutes, type Segment } from '../api.ts';
import { StatusBadge } from '../components/status.tsx';
import { SharingPanel, useMayChange, VisibilityBadge } from '../components/sharing.tsx';
import { clock, download, downloadBytes, duration, when } from '../format.ts';
import { navigate, usePoll } from '../hooks.ts';
import { KeptAudio, RejectedChunks, UnsavedAudio } from '../components/outbox-notices.tsx';
import { outbox } from '../outbox/index.ts';
import { useOutbox } from '../outbox/use-outbox.ts';
import { useMeetingStream, type Draft, type StreamLink } from '../stream.ts';
import {
  addTabAudio,
  endMeeting,
  recordingElsewhere,
  serverClosed,
  session,
  startRecording,
  stopTabAudio,
  watchSession,
  type SessionState,
} from '../session.ts';
import { codeIs } from '../codes.ts';
import { PlayerBar, usePlayer } from '../components/player.tsx';

const STEPS: Array<{ stage: string; label: string }> = [
  { stage: 'grace', label: 'Waiting for the last audio' },
  { stage: 'waiting_for_windows', label: 'Waiting on windows still being transcribed' },
  { stage: 'last_stretch', label: 'Transcribing the last stretch' },
  { stage: 'writing_minutes', label: 'Writing the minutes' },
  { stage: 'finishing', label: 'Deleting the audio and finishing' },
];

function useSession(): SessionState | null {
  const [s, setS] = useState(session());
  useEffect(() => watchSession(setS), []);
  return s;
}

/** How often a settled live meeting is looked at again, for audio that arrives late. */
const SETTLED_POLL_MS = 10_000;

export function MeetingPage({ id, at = null }: { id: string; at?: number | null }) {
  const [actionError, setActionError] = useState<string | null>(null);
  /** Bumped by Regenerate, to start polling again a meeting that had settled. */
  const [wake, setWake] = useState(0);
  const reread = () => setWake((w) => w + 1);
  const rec = useSession();
  const box = useOutbox();
  const mine = rec?.meetingId === id ? rec : null;
  const pending = box?.pending[id] ?? 0;
  // A chunk acknowledged (a late one too, L19), or a new revision the stream tells of (a correction
  // made elsewhere, E3), wakes polling of a meeting that had settled.
  const acknowledged = box?.acknowledged[id] ?? -1;
  // L23: the meeting pushed live; the polling below reads the server only while the stream is down.
  const stream = useMeetingStream(id);
  const streamRef = useRef(stream);
  streamRef.current = stream;
  // When the stream is cut, what it last showed stays until a poll made after the cut answers:
  // the page neither jumps back to an older polled transcript nor drops its drafts meanwhile.
  const wasLive = useRef(false);
  const cutAt = useRef(0);
  if (stream.link === 'live') wasLive.current = true;
  else if (wasLive.current) {
    wasLive.current = false;
    cutAt.current = Date.now();
  }
  const {
    meetingPolled,
    setMeeting,
    segments,
    loadError,
    unreachable,
    nextSeq,
    endRequested,
    setEndRequested,
    elsewhere,
    polledAt,
  } = useMeetingPoll(id, streamRef, [wake, acknowledged, stream.meeting?.revision ?? -1]);

  // The stream's view while it is live, and after a cut until a poll newer than the cut answers.
  // (Cut, or ended because the meeting is settled (F3): the page polls, and reads it whole.)
  const streaming = stream.link === 'live' || polledAt <= cutAt.current;
  const meetingShown = streaming && stream.meeting ? stream.meeting : meetingPolled;
  // L25: the stream follows the meeting's own track; a meeting with tracks shows the transcript
  // read whole (every track, the echo shown once), polled.
  const tracked = (meetingPolled?.tracks.length ?? 0) > 0 || (stream.meeting?.tracks.length ?? 0) > 0;
  // E3: a published transcript is shown as read whole, with its corrections.
  const published = meetingPolled?.transcriptComplete === true && segments.length > 0;
  const segmentsShown = streaming && stream.segments && !tracked && !published ? stream.segments : segments;
  const meeting = meetingShown;

  if (loadError && !meeting) {
    return (
      <p role="alert" class="error">
        This meeting could not be loaded: {loadError}
      </p>
    );
  }
  if (!meeting) {
    return unreachable ? (
      <p role="status" class="warn" data-testid="unreachable">
        The server cannot be reached right now; audio kept in this browser is sent when it is back.
      </p>
    ) : (
      <p>Loading…</p>
    );
  }

  const recordingHere = mine && (mine.phase === 'recording' || mine.phase === 'starting');
  const live = meeting.source === 'live';
  const open = meeting.status === 'created' || meeting.status === 'recording';
  const ending =
    endRequested || mine?.phase === 'stopping' || (box?.ended[id] ?? false) || (box?.endPending[id] ?? false);
  const trouble = box?.trouble[id];
  const rejectedCount = box?.rejected[id]?.length ?? 0;

  const end = async () => {
    setActionError(null);
    try {
      await endMeeting(id);
      setEndRequested(true);
    } catch (err) {
      setActionError(`End meeting did not work: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const resume = async () => {
    setActionError(null);
    try {
      await startRecording(id);
    } catch (err) {
      setActionError(`Recording could not start: ${err instanceof Error ? err.message : String(err)}`);
    }
  };

  return (
    <article
      aria-labelledby="meeting-title"
      data-meeting-status={meeting.status}
      data-chunks-captured={mine?.chunksCaptured ?? ''}
      data-draft-seconds={mine?.draftSeconds ?? ''}
      data-phase={mine?.phase ?? ''}
    >
      <MeetingHead meeting={meeting} onChange={(m) => (setMeeting(m), reread())} />
      <SharingPanel meeting={meeting} />

      {unreachable && (
        <p role="status" class="warn" data-testid="unreachable">
          The server cannot be reached right now. Recording goes on; audio is kept in this browser and sent
          when it is back.
        </p>
      )}
      {actionError && (
        <p role="alert" class="error">
          {actionError}
        </p>
      )}
      {mine?.error && (
        <p role="alert" class="error" data-testid="recording-error">
          {mine.error}
        </p>
      )}
      {mine && <UnsavedAudio chunks={mine.unsaved} title={meeting.title} />}

      {((live && open && !ending) || recordingHere) && (
        <RecorderCard
          meeting={meeting}
          mine={recordingHere ? mine : null}
          elsewhere={elsewhere}
          nextSeq={nextSeq}
          onResume={() => void resume()}
          onEnd={() => void end()}
          onError={setActionError}
        />
      )}

      {live && (pending > 0 || rejectedCount > 0 || trouble || (mine && open)) && (
        <OutboxCard meetingId={id} title={meeting.title} pending={pending} captured={mine?.chunksCaptured} />
      )}

      {ending && open && (
        <section class="card" aria-label="Ending">
          <p role="status" data-testid="ending" data-end-kept={box?.endPending[id] ? '1' : '0'}>
            Ending the meeting:{' '}
            {pending > 0
              ? `sending the last ${pending} ${pending === 1 ? 'chunk' : 'chunks'} first.`
              : 'telling the server.'}
            {box?.endPending[id] ? ' The End is kept in this browser until the server has it.' : ''}
          </p>
        </section>
      )}

      {(meeting.status === 'finalizing' || meeting.status === 'processing') && (
        <Finalizing meeting={meeting} />
      )}

      {meeting.status === 'complete' && (
        <MinutesPanel meeting={meeting} onChange={(m) => (setMeeting(m), reread())} />
      )}

      <AudioNotices meeting={meeting} />

      <Transcript
        meeting={meeting}
        segments={segmentsShown}
        drafts={streaming ? stream.drafts : []}
        link={stream.link}
        at={at}
        onChanged={reread}
      />
    </article>
  );
}

function Finalizing({ meeting }: { meeting: Meeting }) {
  const current = meeting.progress?.stage;
  const index = STEPS.findIndex((s) => s.stage === current);
  return (
    <section class="card" aria-labelledby="progress-heading" data-testid="finalizing">
      <h2 id="progress-heading">{meeting.status === 'finalizing' ? 'Finalizing' : 'Transcribing'}</h2>
      <p role="status" data-stage={current ?? ''}>
        {meeting.progress?.message}
      </p>
      <p class="muted">
        {meeting.windows.done} of {meeting.windows.total} windows transcribed
        {meeting.windows.inFlight ? `, ${meeting.windows.inFlight} in progress` : ''}
        {meeting.windows.held ? `, ${meeting.windows.held} awaiting another try` : ''}.
      </p>
      {meeting.status === 'finalizing' && (
        <ol class="steps">
          {STEPS.map((s, i) => (
            <li
              key={s.stage}
              class={i < index ? 'done' : i === index ? 'current' : ''}
              aria-current={i === index ? 'step' : undefined}
            >
              {s.label}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

function minutesMarkdown(title: string, m: Minutes): string {
  const list = (items: string[]) => (items.length ? items.map((i) => `- ${i}`).join('\n') : '_None._');
  return [
    `# ${title}`,
    '',
    '## Summary',
    '',
    m.summary,
    '',
    '## Decisions',
    '',
    list(m.decisions),
    '',
    '## Action items',
    '',
    list(m.actionItems),
    '',
    ...(m.note ? [`_${m.note}_`, ''] : []),
  ].join('\n');
}

function MinutesPanel({ meeting, onChange }: { meeting: Meeting; onChange: (m: Meeting) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const { minutes } = meeting;
  const regenerate = async () => {
    setBusy(true);
    setError(null);
    try {
      onChange(await call<Meeting>('POST', `/v1/meetings/${meeting.id}/minutes`));
    } catch (err) {
      setError(`Regenerate did not work: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="minutes-heading" data-minutes-status={minutes.status}>
      <h2 id="minutes-heading">Minutes</h2>
      {minutes.stale && minutes.content && (
        <p role="status" class="warn" data-testid="minutes-stale">
          {minutes.status === 'pending'
            ? 'The transcript was revised (audio that arrived late, or who said what); the minutes are being rewritten. Below are the minutes of the earlier transcript.'
            : `These minutes are from an earlier transcript. ${minutes.reason?.plain ?? ''}`}
        </p>
      )}
      {minutes.content && (minutes.status === 'written' || minutes.stale) ? (
        <>
          <p data-testid="minutes-summary">{minutes.content.summary}</p>
          <h3>Decisions</h3>
          {minutes.content.decisions.length ? (
            <ul>
              {minutes.content.decisions.map((d, i) => (
                <li key={i}>{d}</li>
              ))}
            </ul>
          ) : (
            <p class="muted">None recorded.</p>
          )}
          <h3>Action items</h3>
          {minutes.content.actionItems.length ? (
            <ul>
              {minutes.content.actionItems.map((d, i) => (
                <li key={i}>{d}</li>
              ))}
            </ul>
          ) : (
            <p class="muted">None recorded.</p>
          )}
          {minutes.content.note && <p class="muted">{minutes.content.note}</p>}
          <button
            type="button"
            onClick={() =>
              download(
                `${meeting.title}-minutes.md`,
                minutesMarkdown(meeting.title, minutes.content!),
                'text/markdown',
              )
            }
          >
            Export minutes (Markdown)
          </button>
        </>
      ) : minutes.status === 'pending' ? (
        <p role="status">Writing the minutes…</p>
      ) : (
        <>
          <p role="alert" data-testid="minutes-reason">
            {minutes.reason?.plain ?? 'There are no minutes for this meeting.'}
          </p>
          {/* With nothing transcribed there is nothing to summarise: Regenerate cannot help. */}
          {!codeIs(minutes.reason?.code, 'minutes.no_transcript') && (
            <button type="button" onClick={() => void regenerate()} disabled={busy}>
              Regenerate minutes
            </button>
          )}
        </>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}

const LINK_TEXT: Record<StreamLink, string> = {
  live: 'Captions live',
  connecting: 'Reconnecting… (updating every few seconds meanwhile)',
  off: 'Updating every few seconds',
};

/** E1, E3: the meeting's title, renamed in place, and its deletion after a confirmation that says what goes. */
function MeetingHead({ meeting, onChange }: { meeting: Meeting; onChange: (m: Meeting) => void }) {
  const [title, setTitle] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const rename = async (typed: string) => {
    setError(null);
    try {
      onChange(await call<Meeting>('PATCH', `/v1/meetings/${meeting.id}`, { title: typed }));
      setTitle(null);
    } catch (err) {
      setError(`Renaming failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const remove = async () => {
    setError(null);
    try {
      await call('DELETE', `/v1/meetings/${meeting.id}`);
      navigate('/');
    } catch (err) {
      setError(`The meeting was not deleted: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const recording = meeting.status === 'created' || meeting.status === 'recording';
  const mayChange = useMayChange(meeting);
  return (
    <>
      <header class="meeting-head">
        {title === null ? (
          <h1 id="meeting-title">{meeting.title}</h1>
        ) : (
          <form
            class="row"
            data-testid="rename-meeting"
            onSubmit={(e) => {
              e.preventDefault();
              if (title.trim()) void rename(title.trim());
            }}
          >
            <label class="grow">
              <span class="visually-hidden">Meeting title</span>
              <input
                id="meeting-title"
                value={title}
                maxLength={300}
                autoFocus
                onInput={(e) => setTitle(e.currentTarget.value)}
                onKeyDown={(e) => {
                  if (e.key === 'Escape') setTitle(null);
                }}
              />
            </label>
            <button type="submit" disabled={!title.trim()}>
              Save
            </button>
            <button type="button" class="secondary" onClick={() => setTitle(null)}>
              Cancel
            </button>
          </form>
        )}
        <StatusBadge meeting={meeting} />
        <VisibilityBadge meeting={meeting} />
        <span class="meeting-meta muted">
          <time dateTime={meeting.createdAt}>{when(meeting.createdAt)}</time>
          {meeting.durationMs !== null && <> · {duration(meeting.durationMs)}</>}
        </span>
        {title === null && mayChange && (
          <span class="head-actions">
            <button type="button" class="secondary" onClick={() => setTitle(meeting.title)}>
              Rename
            </button>
            <button
              type="button"
              class="secondary danger"
              disabled={recording}
              onClick={() => setConfirming(true)}
            >
              Delete…
            </button>
          </span>
        )}
      </header>
      {confirming && (
        <section
          class="card confirm"
          role="alertdialog"
          aria-labelledby="delete-heading"
          aria-describedby="delete-what"
        >
          <h2 id="delete-heading">Delete “{meeting.title}”?</h2>
          <p id="delete-what">
            Its transcript, corrections, speakers, minutes and share links are deleted for everyone in the
            workspace, and any audio still kept for it. Search and ask no longer find it. This cannot be
            undone.
          </p>
          <div class="row">
            <button type="button" class="danger" onClick={() => void remove()}>
              Delete meeting
            </button>
            <button type="button" class="secondary" autoFocus onClick={() => setConfirming(false)}>
              Keep it
            </button>
          </div>
        </section>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </>
  );
}

/** E2: a pause at least this long, or another speaker, starts a new paragraph. */
const PARAGRAPH_PAUSE_MS = 2_000;
/** A paragraph longer than this is cut at its next sentence end (at twice this, anywhere): no wall of text. */
const PARAGRAPH_MAX_MS = 60_000;

interface ShownLine {
  key: string;
  startMs: number;
  endMs: number;
  text: string;
  rawText: string;
  draft: boolean;
  speaker: { id: string; name: string } | null;
  correctionId: string | null;
  review: { correctionId: string; text: string } | null;
}

interface Paragraph {
  key: string;
  startMs: number;
  draft: boolean;
  speaker: ShownLine['speaker'];
  lines: ShownLine[];
}

/** E2: lines grouped into paragraphs by speaker, pause and draft-or-final. */
function paragraphsOf(lines: ShownLine[]): Paragraph[] {
  const out: Paragraph[] = [];
  for (const l of lines) {
    const p = out.at(-1);
    const prev = p?.lines.at(-1);
    const joins =
      p &&
      prev &&
      p.draft === l.draft &&
      (p.speaker?.id ?? null) === (l.speaker?.id ?? null) &&
      l.startMs - prev.endMs < PARAGRAPH_PAUSE_MS &&
      !(l.startMs - p.startMs > PARAGRAPH_MAX_MS && /[.?!]$/.test(prev.text)) &&
      l.startMs - p.startMs <= 2 * PARAGRAPH_MAX_MS;
    if (joins) p.lines.push(l);
    else out.push({ key: l.key, startMs: l.startMs, draft: l.draft, speaker: l.speaker, lines: [l] });
  }
  return out;
}

/**
 * E2: the reader's place, by time: the first segment at least partly on screen (the moment in
 * its middle) and how far from the top it is. When finals replace drafts (other nodes, re-cut
 * times), the view is put back so the segment holding that moment sits where it sat, and stays in
 * sight if it came out shorter: nothing the reader is looking at moves.
 */
function useTimeAnchor(list: { current: HTMLElement | null }, following: { current: boolean }) {
  const anchor = useRef<{ ms: number; top: number; node: HTMLElement } | null>(null);
  const segments = () => [...(list.current?.querySelectorAll<HTMLElement>('[data-start-ms]') ?? [])];
  const span = (el: HTMLElement) => [Number(el.dataset.startMs), Number(el.dataset.endMs)] as const;
  const measure = () => {
    for (const el of segments()) {
      const r = el.getBoundingClientRect();
      if (r.bottom > 0) {
        const [start, end] = span(el);
        anchor.current = { ms: Math.floor((start + Math.max(start, end)) / 2), top: r.top, node: el };
        return;
      }
    }
    anchor.current = null;
  };
  useEffect(() => {
    window.addEventListener('scroll', measure, { passive: true });
    return () => window.removeEventListener('scroll', measure);
  }, []);
  const restore = () => {
    const a = anchor.current;
    if (a && !following.current && list.current) {
      // The segment holding the moment; else the last one starting before it.
      let best: HTMLElement | null = null;
      for (const el of segments()) {
        const [start, end] = span(el);
        if (start > a.ms) break;
        best = el;
        if (a.ms < end) break;
      }
      if (best) {
        const r = best.getBoundingClientRect();
        // The same node keeps its place exactly; a new one shorter than what was hidden of the
        // old one above the top is shown from its first line.
        const top = best === a.node || r.height + a.top > 0 ? a.top : 0;
        const moved = r.top - top;
        if (Math.abs(moved) >= 1) window.scrollBy(0, moved);
      }
    }
    measure();
  };
  return restore;
}

/**
 * W4: the speakers as people named and merged them, read apart from the words (a live stream's
 * words were sent with the names of their time), again after each change.
 */
function useNamedSpeakers(meeting: Meeting, segments: Segment[], renamed: number) {
  const [named, setNamed] = useState<Map<string, { id: string; name: string }>>(new Map());
  useEffect(() => {
    if (!segments.some((s) => s.speaker)) return;
    void call<{ speakers: Array<{ id: string; name: string; mergedInto: string | null }> }>(
      'GET',
      `/v1/meetings/${meeting.id}/speakers`,
    )
      .then(({ speakers }) => {
        const byId = new Map(speakers.map((sp) => [sp.id, sp]));
        const final = (id: string) => {
          let sp = byId.get(id);
          for (let hops = 0; sp?.mergedInto && hops < 32; hops++) sp = byId.get(sp.mergedInto) ?? sp;
          return sp ? { id: sp.id, name: sp.name } : null;
        };
        setNamed(new Map(speakers.flatMap((sp) => (final(sp.id) ? [[sp.id, final(sp.id)!]] : []))));
      })
      .catch(() => undefined);
  }, [meeting.id, meeting.revision, renamed, segments.length]);
  return named;
}

/** E3: a line corrected, or a correction taken back; then the transcript is read again. */
function correctionActions(meetingId: string, onError: (e: string | null) => void, onDone: () => void) {
  const correct = async (line: ShownLine, text: string) => {
    onError(null);
    try {
      await call('POST', `/v1/meetings/${meetingId}/corrections`, {
        startMs: line.startMs,
        rawText: line.rawText,
        text,
      });
      onDone();
    } catch (err) {
      onError(`The correction was not saved: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const takeBack = async (correctionId: string) => {
    onError(null);
    try {
      await call('DELETE', `/v1/meetings/${meetingId}/corrections/${correctionId}`);
      onDone();
    } catch (err) {
      onError(`That did not work: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return { correct, takeBack };
}

/**
 * Where the reader is: following the words as they come unless they scrolled away from the end,
 * a cited moment shown once, and otherwise the place kept by time (useTimeAnchor).
 */
function useTranscriptPlace(lines: ShownLine[], at: number | null, open: boolean) {
  // Follow the words as they come, unless the reader scrolled away from the end.
  const following = useRef(true);
  useEffect(() => {
    const onScroll = () => {
      const fromEnd = document.documentElement.scrollHeight - window.scrollY - window.innerHeight;
      following.current = fromEnd < 120;
    };
    window.addEventListener('scroll', onScroll, { passive: true });
    return () => window.removeEventListener('scroll', onScroll);
  }, []);
  const listRef = useRef<HTMLOListElement | null>(null);
  const restoreAnchor = useTimeAnchor(listRef, following);
  // The segment a link pointed at: the last final one starting at or before that moment.
  const citedKey =
    at === null ? null : (lines.filter((l) => !l.draft && l.startMs <= at).at(-1)?.key ?? null);
  const citedRef = useRef<HTMLSpanElement | null>(null);
  const shownFor = useRef<string | null>(null);
  useLayoutEffect(() => {
    if (citedKey !== null && shownFor.current !== `${at}:${citedKey}` && citedRef.current) {
      shownFor.current = `${at}:${citedKey}`;
      following.current = false;
      citedRef.current.scrollIntoView({ block: 'center' });
      restoreAnchor();
      return;
    }
    if (open && following.current && lines.length > 0) {
      window.scrollTo({ top: document.documentElement.scrollHeight });
      return;
    }
    restoreAnchor();
  });

  return { listRef, citedKey, citedRef };
}

/** Finals and drafts in the order they were spoken; a draft is replaced in place by its final text. */
function Transcript({
  meeting,
  segments,
  drafts,
  link,
  at,
  onChanged,
}: {
  meeting: Meeting;
  segments: Segment[];
  drafts: Draft[];
  link: StreamLink;
  /** A moment to open at (from a search hit or a citation): its final segment is marked and shown. */
  at: number | null;
  /** Something the reader changed (a speaker's name, a correction): read the meeting again. */
  onChanged: () => void;
}) {
  const [error, setError] = useState<string | null>(null);
  const [correcting, setCorrecting] = useState(false);
  const mayChange = useMayChange(meeting);
  const player = usePlayer(meeting);
  const [editing, setEditing] = useState<string | null>(null);
  const [renamed, setRenamed] = useState(0);
  const named = useNamedSpeakers(meeting, segments, renamed);
  // E2: the server sends the words formatted (the transcript and the live stream alike).
  const lines: ShownLine[] = [
    ...segments.map((s, i) => ({
      // A line's key is its own span (and speaker), not its place in the list: a window
      // transcribed out of order or a repair does not remount the lines after it (nor close a
      // correction being typed).
      key: lineKey(s, segments, i),
      startMs: s.startMs,
      endMs: s.endMs,
      text: s.text,
      rawText: s.rawText ?? s.text,
      draft: false,
      speaker: s.speaker ? (named.get(s.speaker.id) ?? s.speaker) : null,
      correctionId: s.correctionId ?? null,
      review: s.review ?? null,
    })),
    ...drafts.map((d) => ({
      key: `d-${d.draftId}`,
      startMs: d.startMs,
      endMs: d.endMs,
      text: d.text,
      rawText: d.text,
      draft: true,
      speaker: null,
      correctionId: null,
      review: null,
    })),
  ].sort((a, b) => a.startMs - b.startMs);
  const paragraphs = paragraphsOf(lines);
  const open = meeting.status === 'recording' || meeting.status === 'created';
  const { listRef, citedKey, citedRef } = useTranscriptPlace(lines, at, open);
  const { correct, takeBack } = correctionActions(
    meeting.id,
    setError,
    () => (setEditing(null), onChanged()),
  );
  const failed = meeting.status === 'failed';
  const reviews = lines.filter((l) => l.review).length;
  return (
    <section class="card" aria-labelledby="transcript-heading">
      <div class="row spread">
        <h2 id="transcript-heading">
          Transcript{meeting.transcriptComplete || failed ? '' : ' (so far)'}
          {meeting.revision > 0 && (
            <span class="muted" data-testid="transcript-revision">
              {' '}
              (revision {meeting.revision})
            </span>
          )}
        </h2>
        {segments.length > 0 && mayChange && meeting.transcriptComplete && (
          <button
            type="button"
            class="secondary"
            aria-pressed={correcting}
            data-testid="correct-toggle"
            onClick={() => (setCorrecting(!correcting), setEditing(null))}
          >
            {correcting ? 'Done correcting' : 'Correct the text'}
          </button>
        )}
      </div>
      {!meeting.transcriptComplete && !failed && (
        <p class={`link link-${link}`} role="status" data-testid="caption-link" data-link={link}>
          {LINK_TEXT[link]}
        </p>
      )}
      <PlayerBar meeting={meeting} player={player} />
      {correcting && (
        <p class="muted">
          Click a sentence to correct it. Corrections are kept with the transcript, used by search, exports
          and the minutes, and recorded in the audit log.
        </p>
      )}
      {reviews > 0 && (
        <p role="status" class="warn" data-testid="review-notice">
          {reviews === 1 ? 'One correction needs' : `${reviews} corrections need`} a look: audio that arrived
          late changed the words it corrected. Each is marked below.
        </p>
      )}
      {lines.length === 0 ? (
        <p class="muted">
          {failed
            ? 'Nothing was transcribed.'
            : 'The transcript appears here as the meeting is spoken: first as draft captions, then final.'}
        </p>
      ) : (
        <ol class="transcript" aria-live={open ? 'polite' : 'off'} data-testid="transcript" ref={listRef}>
          {paragraphs.map((p, i) => (
            <ParagraphView
              key={p.key}
              meetingId={meeting.id}
              paragraph={p}
              showSpeaker={p.speaker !== null && p.speaker.id !== paragraphs[i - 1]?.speaker?.id}
              cited={p.lines.some((l) => l.key === citedKey)}
              citedKey={citedKey}
              citedRef={citedRef}
              onPlay={meeting.playback ? () => player.play(p.startMs) : null}
              playingAt={player.atMs}
              correcting={correcting}
              editing={editing}
              onEdit={setEditing}
              onCorrect={(l, text) => void correct(l, text)}
              onTakeBack={(id) => void takeBack(id)}
              onRenamed={() => {
                setRenamed((n) => n + 1);
                onChanged();
              }}
              onError={setError}
            />
          ))}
        </ol>
      )}
      {segments.length > 0 && <TranscriptExports meeting={meeting} onError={setError} />}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}

/** E2: one paragraph: who spoke and when, then its sentences (each a correction target, E3). */
function ParagraphView({
  meetingId,
  paragraph: p,
  showSpeaker,
  cited,
  citedKey,
  citedRef,
  onPlay,
  playingAt,
  correcting,
  editing,
  onEdit,
  onCorrect,
  onTakeBack,
  onRenamed,
  onError,
}: {
  meetingId: string;
  paragraph: Paragraph;
  showSpeaker: boolean;
  cited: boolean;
  citedKey: string | null;
  citedRef: { current: HTMLSpanElement | null };
  /** E4: plays the audio from this paragraph (null: no audio is kept). */
  onPlay: (() => void) | null;
  /** E4: the moment being heard; its sentence is marked. */
  playingAt: number | null;
  correcting: boolean;
  editing: string | null;
  onEdit: (key: string | null) => void;
  onCorrect: (line: ShownLine, text: string) => void;
  onTakeBack: (correctionId: string) => void;
  onRenamed: () => void;
  onError: (error: string | null) => void;
}) {
  return (
    <li
      class={p.draft ? 'draft' : cited ? 'cited' : undefined}
      data-draft={p.draft ? '1' : undefined}
      data-cited={cited ? '1' : undefined}
    >
      <div class="para-head">
        {showSpeaker && p.speaker ? (
          <SpeakerLabel meetingId={meetingId} speaker={p.speaker} onRenamed={onRenamed} onError={onError} />
        ) : null}
        <time>{clock(p.startMs / 1000)}</time>
        {onPlay && !p.draft && (
          <button
            type="button"
            class="link play"
            aria-label={`Play from ${clock(p.startMs / 1000)}`}
            data-testid="play-from"
            onClick={onPlay}
          >
            ▶
          </button>
        )}
      </div>
      <p class="para">
        {p.lines.map((l) =>
          editing === l.key ? (
            <CorrectionForm
              key={l.key}
              line={l}
              onSave={(text) => onCorrect(l, text)}
              onCancel={() => onEdit(null)}
            />
          ) : (
            <span key={l.key}>
              {correcting && !l.draft ? (
                <button
                  type="button"
                  class="seg editable"
                  data-start-ms={l.startMs}
                  data-end-ms={l.endMs}
                  data-corrected={l.correctionId ? '1' : undefined}
                  title="Correct this sentence"
                  onClick={() => onEdit(l.key)}
                >
                  {l.text}
                </button>
              ) : (
                <span
                  ref={l.key === citedKey ? citedRef : undefined}
                  class={`seg${l.correctionId ? ' corrected' : ''}${l.key === citedKey ? ' cited' : ''}${heard(l, playingAt) ? ' playing' : ''}`}
                  data-cited={l.key === citedKey ? '1' : undefined}
                  data-playing={heard(l, playingAt) ? '1' : undefined}
                  data-start-ms={l.startMs}
                  data-end-ms={l.endMs}
                  data-corrected={l.correctionId ? '1' : undefined}
                  title={l.correctionId ? `Corrected. The recogniser heard: “${l.rawText}”` : undefined}
                >
                  {l.text}
                </span>
              )}
              {l.review && (
                <span class="review" data-testid="needs-look">
                  {' '}
                  [A correction needs a look: it said “{l.review.text}”.{' '}
                  <button type="button" class="link" onClick={() => onCorrect(l, l.review!.text)}>
                    Use it
                  </button>{' '}
                  <button type="button" class="link" onClick={() => onTakeBack(l.review!.correctionId)}>
                    Keep what was heard
                  </button>
                  ]
                </span>
              )}{' '}
            </span>
          ),
        )}
      </p>
    </li>
  );
}

/** A final line's key: its span and speaker, and how many lines before it had the same. */
function lineKey(s: Segment, all: Segment[], i: number): string {
  const own = `f-${s.startMs}-${s.endMs}-${s.speaker?.id ?? ''}`;
  let same = 0;
  for (let k = i - 1; k >= 0 && all[k]!.startMs === s.startMs; k--)
    if (`f-${all[k]!.startMs}-${all[k]!.endMs}-${all[k]!.speaker?.id ?? ''}` === own) same++;
  return same === 0 ? own : `${own}-${same}`;
}

/** E4: whether the moment being played falls in this line. */
function heard(l: ShownLine, atMs: number | null): boolean {
  return atMs !== null && l.startMs <= atMs && atMs < l.endMs;
}

/** E3: one sentence edited in place; Escape or Cancel leaves it as it was. */
function CorrectionForm({
  line,
  onSave,
  onCancel,
}: {
  line: ShownLine;
  onSave: (text: string) => void;
  onCancel: () => void;
}) {
  const [text, setText] = useState(line.text);
  return (
    <form
      class="correction"
      data-testid="correction-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (text.trim()) onSave(text.trim());
      }}
    >
      <label>
        <span class="visually-hidden">Corrected text at {clock(line.startMs / 1000)}</span>
        <textarea
          value={text}
          rows={2}
          maxLength={10_000}
          autoFocus
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Escape') onCancel();
          }}
        />
      </label>
      <button type="submit" disabled={!text.trim()}>
        Save
      </button>
      <button type="button" class="secondary" onClick={onCancel}>
        Cancel
      </button>
      {line.correctionId && <span class="muted"> The recogniser heard: “{line.rawText}”</span>}
    </form>
  );
}

/** W5: the transcript as a file: text, captions, Markdown or Word, each with its speakers. */
function TranscriptExports({
  meeting,
  onError,
}: {
  meeting: Meeting;
  onError: (error: string | null) => void;
}) {
  const exportAs = async (format: 'txt' | 'vtt' | 'srt' | 'md' | 'docx') => {
    onError(null);
    try {
      const path = `/v1/meetings/${meeting.id}/transcript?format=${format}`;
      if (format === 'docx') {
        const bytes = await call<ArrayBuffer>('GET', path, undefined, { bytes: true });
        downloadBytes(
          `${meeting.title}.docx`,
          bytes,
          'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
        );
        return;
      }
      const text = await call<string>('GET', path, undefined, { raw: true });
      const type = { txt: 'text/plain', vtt: 'text/vtt', srt: 'application/x-subrip', md: 'text/markdown' }[
        format
      ];
      download(`${meeting.title}.${format}`, text, type);
    } catch (err) {
      onError(`Export failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return (
    <div class="row" role="group" aria-label="Export transcript">
      <button type="button" onClick={() => void exportAs('txt')}>
        Export TXT
      </button>
      <button type="button" onClick={() => void exportAs('vtt')}>
        Export WebVTT
      </button>
      <button type="button" onClick={() => void exportAs('srt')}>
        Export SRT
      </button>
      <button type="button" onClick={() => void exportAs('md')}>
        Export Markdown
      </button>
      <button type="button" onClick={() => void exportAs('docx')}>
        Export Word
      </button>
    </div>
  );
}

/**
 * W4: who said it, named where a source knows: a click on the name renames the speaker in place
 * (an empty name gives back the source's own label).
 */
function SpeakerLabel({
  meetingId,
  speaker,
  onRenamed,
  onError,
}: {
  meetingId: string;
  speaker: { id: string; name: string };
  onRenamed: () => void;
  onError: (error: string | null) => void;
}) {
  const [name, setName] = useState<string | null>(null);
  const save = async (typed: string) => {
    onError(null);
    try {
      await call('PATCH', `/v1/meetings/${meetingId}/speakers/${speaker.id}`, { name: typed.trim() || null });
      setName(null);
      onRenamed();
    } catch (err) {
      onError(`Renaming failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  if (name !== null)
    return (
      <form
        class="rename-speaker"
        data-testid="rename-speaker"
        onSubmit={(e) => {
          e.preventDefault();
          void save(name);
        }}
      >
        <input
          aria-label="Speaker name"
          value={name}
          maxLength={200}
          autoFocus
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
          onKeyDown={(e) => {
            if (e.key === 'Escape') setName(null);
          }}
        />
        <button type="submit">Save</button>
        <button type="button" onClick={() => setName(null)}>
          Cancel
        </button>
      </form>
    );
  return (
    <button
      type="button"
      class="speaker"
      data-testid="speaker"
      data-speaker-id={speaker.id}
      title="Rename this speaker"
      onClick={() => setName(speaker.name)}
    >
      {speaker.name}
    </button>
  );
}

/** The recorder: the elapsed time and input level while this tab records, or how to go on. */
function RecorderCard({
  meeting,
  mine,
  elsewhere,
  nextSeq,
  onResume,
  onEnd,
  onError,
}: {
  meeting: Meeting;
  /** This tab's recording of the meeting, while it records. */
  mine: NonNullable<ReturnType<typeof useSession>> | null;
  elsewhere: boolean;
  nextSeq: number | null;
  onResume: () => void;
  onEnd: () => void;
  onError: (message: string | null) => void;
}) {
  const recordingHere = mine !== null;
  const tab = mine?.tab ?? null;
  const addTab = async () => {
    onError(null);
    try {
      await addTabAudio();
    } catch (err) {
      onError(`The tab's audio could not be added: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return (
    <section class="card recorder" aria-label="Recording">
      {recordingHere ? (
        <>
          <p class="elapsed">
            <span class="dot" aria-hidden="true" /> Recording{' '}
            <time data-testid="elapsed">{clock(mine.elapsedSeconds)}</time>
          </p>
          <label for="level">Input level</label>
          <meter id="level" min={0} max={1} low={0.05} high={0.9} value={mine.level} />
          {tab && (
            <p data-testid="tab-audio">
              <label for="tab-level">The call’s audio (Others)</label>{' '}
              <meter id="tab-level" min={0} max={1} low={0.05} high={0.9} value={tab.level} />
            </p>
          )}
        </>
      ) : elsewhere ? (
        <p role="status" data-testid="recording-elsewhere">
          This meeting is being recorded in another tab of this browser. Use that tab to continue or end it.
        </p>
      ) : (
        <p>
          {meeting.status === 'created' || nextSeq !== null
            ? 'Not recording in this tab.'
            : 'This meeting was recorded elsewhere; you can end it here.'}
        </p>
      )}
      <div class="row">
        {!recordingHere && !elsewhere && (meeting.status === 'created' || nextSeq !== null) && (
          <button type="button" onClick={onResume}>
            ● {meeting.status === 'created' ? 'Record' : 'Continue recording'}
          </button>
        )}
        {recordingHere && !tab && mine.phase === 'recording' && (
          <button
            type="button"
            onClick={() => void addTab()}
            title="Record a browser tab's or the screen's audio (a call) beside your microphone: you and the others as two speakers"
          >
            ＋ Record a tab’s audio
          </button>
        )}
        {recordingHere && tab && (
          <button type="button" onClick={() => void stopTabAudio(null)}>
            Stop the tab’s audio
          </button>
        )}
        <button type="button" class="danger" onClick={onEnd}>
          ■ End meeting
        </button>
      </div>
    </section>
  );
}

/** L-outbox: the audio this browser still holds for the meeting, and why it is not sent yet. */
function OutboxCard({
  meetingId: id,
  title,
  pending,
  captured,
}: {
  meetingId: string;
  title: string;
  pending: number;
  captured: number | undefined;
}) {
  const box = useOutbox();
  const trouble = box?.trouble[id];
  return (
    <section class="card" aria-label="Audio sent">
      <p role="status" data-testid="outbox" data-pending={pending} data-captured={captured ?? ''}>
        {pending > 0
          ? `${pending} ${pending === 1 ? 'chunk' : 'chunks'} of audio kept in this browser, waiting to be sent.`
          : 'All audio captured so far is on the server.'}
        {box?.offlineUntil && pending > 0
          ? ` The server cannot be reached; trying again in ${Math.max(0, Math.ceil((box.offlineUntil - Date.now()) / 1000))} s.`
          : ''}
      </p>
      {trouble && (
        <p role="status" class="warn" data-testid="outbox-trouble">
          {trouble.message}
          {trouble.deleted
            ? ''
            : ` Next try in ${Math.max(0, Math.ceil((trouble.retryAt - Date.now()) / 1000))} s.`}
        </p>
      )}
      {trouble?.notFound && <KeptAudio meetingId={id} title={title} />}
      <RejectedChunks meetingId={id} title={title} />
    </section>
  );
}

/**
 * What the meeting says of its audio: why it failed, stretches held for another try (J20), stretches
 * with no transcript, late audio being repaired in (L19).
 */
function AudioNotices({ meeting }: { meeting: Meeting }) {
  return (
    <>
      {meeting.status === 'failed' && meeting.failure && (
        <section class="card failure" aria-labelledby="failure-heading">
          <h2 id="failure-heading">Why this meeting failed</h2>
          <p role="alert" data-testid="failure-reason">
            {meeting.failure.plain}
          </p>
        </section>
      )}
      {meeting.heldAudio && (
        // J20: the gap shown: stretches still being tried, or kept for an operator to retry.
        <p role="status" class={meeting.heldAudio.failed > 0 ? 'warn' : 'muted'} data-testid="held-audio">
          {meeting.heldAudio.message}
        </p>
      )}

      {meeting.status === 'complete' &&
        !meeting.heldAudio &&
        meeting.untranscribedWhenAudioDeleted &&
        meeting.untranscribedWhenAudioDeleted.exhausted + meeting.untranscribedWhenAudioDeleted.inFlight >
          0 && (
          <p class="warn">
            {meeting.untranscribedWhenAudioDeleted.exhausted + meeting.untranscribedWhenAudioDeleted.inFlight}{' '}
            stretch(es) of this meeting have no transcript (recognition gave up or the audio never arrived).
          </p>
        )}

      {meeting.lateAudio.message && (
        <p
          role="status"
          class={meeting.lateAudio.failure && meeting.lateAudio.lateChunks > 0 ? 'warn' : 'muted'}
          data-testid="late-audio"
          data-revision={meeting.revision}
          data-late={meeting.lateAudio.lateChunks}
        >
          {meeting.lateAudio.message}
        </p>
      )}
    </>
  );
}

/**
 * The meeting as the server has it: read from the stream while it is live, polled otherwise (the
 * transcript too), with what this browser keeps of it (its outbox's next chunk and End). A
 * recording in this tab of a meeting ended elsewhere is stopped. `wakes` start polling again a
 * meeting that had settled.
 */
function useMeetingPoll(
  id: string,
  streamRef: { current: ReturnType<typeof useMeetingStream> },
  wakes: number[],
) {
  const [meetingPolled, setMeeting] = useState<Meeting | null>(null);
  const [segments, setSegments] = useState<Segment[]>([]);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [unreachable, setUnreachable] = useState(false);
  const [nextSeq, setNextSeq] = useState<number | null>(null);
  const [endRequested, setEndRequested] = useState(false);
  /** Another tab of this browser holds this meeting's recording lock. */
  const [elsewhere, setElsewhere] = useState(false);
  const [polledAt, setPolledAt] = useState(0);
  /** E3: the revision (and wake) of the transcript last read whole, for a published one the stream follows. */
  const readWhole = useRef<string | null>(null);

  usePoll(
    async () => {
      try {
        const pushed = streamRef.current;
        const viaStream = pushed.link === 'live' && pushed.meeting !== null;
        const asked = Date.now();
        const m = viaStream ? pushed.meeting! : await call<Meeting>('GET', `/v1/meetings/${id}`);
        setMeeting(m);
        setUnreachable(false);
        // Ended in another browser or through the API: this tab's microphone must not go on.
        const mineNow = session();
        if (
          m.status !== 'created' &&
          m.status !== 'recording' &&
          mineNow?.meetingId === id &&
          (mineNow.phase === 'recording' || mineNow.phase === 'starting')
        )
          await serverClosed(id, `the meeting was ended elsewhere (it is now ${m.status})`);
        setLoadError(null);
        // A published transcript is read whole (with its corrections, E3) once per revision.
        const whole = m.transcriptComplete ? `${m.revision}:${wakes.join(',')}` : null;
        if (
          m.status !== 'created' &&
          (!viaStream || m.tracks.length > 0 || (whole && whole !== readWhole.current))
        ) {
          const t = await call<{ segments: Segment[] }>('GET', `/v1/meetings/${id}/transcript`);
          setSegments(t.segments);
          readWhole.current = whole;
        }
        if (!viaStream) setPolledAt(asked);
        setElsewhere(await recordingElsewhere(id));
        const stored = await (await outbox()).store.meeting(id);
        setNextSeq(stored?.nextSeq ?? null);
        setEndRequested(stored?.endRequested ?? false);
        const settled = m.status === 'complete' || m.status === 'failed';
        const late = m.lateAudio.lateChunks > 0 || m.lateAudio.repairing;
        if (viaStream) return true;
        if (!settled || m.minutes.status === 'pending' || late) return true;
        // L19: a live meeting can still get late audio (from this tab's outbox or another client):
        // look now and then, so a repair that lands shows without a reload.
        return m.source === 'live' ? SETTLED_POLL_MS : false;
      } catch (err) {
        if (err instanceof NetworkError || (err instanceof ApiError && err.status >= 500))
          setUnreachable(true);
        else setLoadError(err instanceof Error ? err.message : String(err));
        return true;
      }
    },
    1500,
    [id, endRequested, ...wakes],
  );
  return {
    meetingPolled,
    setMeeting,
    segments,
    loadError,
    unreachable,
    nextSeq,
    endRequested,
    setEndRequested,
    elsewhere,
    polledAt,
  };
}
