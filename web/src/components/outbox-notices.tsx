import { joinWavs } from '../audio/wav.ts';
import { SAMPLE_RATE } from '../audio/recorder.ts';
import { useState } from 'preact/hooks';
import { downloadBytes } from '../format.ts';
import { outbox } from '../outbox/index.ts';
import { forgetUnsaved } from '../session.ts';
import { describeWaiting, useOutbox, waiting } from '../outbox/use-outbox.ts';

/** Shown over every screen after a 401: nothing is sent until someone signs in again. */
export function SignInAgain({ onSignIn }: { onSignIn: () => void }) {
  const box = useOutbox();
  if (!box?.needsSignIn) return null;
  const w = waiting(box);
  return (
    <section class="card warn" role="alert" data-testid="sign-in-again">
      <p>
        The server did not accept this tab’s sign-in (the session ended, or the API key was revoked), so
        nothing is being sent.{' '}
        {w.chunks + w.ends > 0
          ? `${describeWaiting(w)} ${w.chunks + w.ends === 1 ? 'is' : 'are'} kept in this browser and will be sent after you sign in again.`
          : ''}
      </p>
      <button type="button" onClick={onSignIn}>
        Sign in again
      </button>
    </section>
  );
}

/**
 * Shown over every screen when a whole outbox round failed (this browser's storage failed, the
 * server cannot be reached) with audio or an End waiting, or storage failed before it could even
 * be read: nothing goes out until the retry this names.
 */
export function OutboxProblem() {
  const box = useOutbox();
  if (!box) return null;
  const w = waiting(box);
  const offline = box.offlineUntil !== null && w.chunks + w.ends > 0;
  if (!box.lastError && !offline) return null;
  const at = box.retryAt ?? box.offlineUntil;
  return (
    <p role="alert" class="warn" data-testid="outbox-error">
      Audio kept in this browser is not being sent: {box.lastError ?? 'the server cannot be reached.'}
      {at !== null ? ` Trying again in ${Math.max(0, Math.ceil((at - Date.now()) / 1000))} s.` : ''}
    </p>
  );
}

/**
 * The audio kept for a meeting the server does not know (deleted there, or another workspace's):
 * download it, and only then discard it from this browser.
 */
export function KeptAudio({ meetingId, title }: { meetingId: string; title: string }) {
  const [downloaded, setDownloaded] = useState(false);
  const save = async () => {
    const wavs = await (await outbox()).store.keptAudio(meetingId);
    downloadBytes(`${title}-kept.wav`, joinWavs(wavs, SAMPLE_RATE), 'audio/wav');
    setDownloaded(true);
  };
  return (
    <span class="row" data-testid="kept-audio">
      <button type="button" onClick={() => void save()}>
        Download the kept audio (WAV)
      </button>
      {downloaded && (
        <button
          type="button"
          class="danger"
          onClick={() => void outbox().then(({ sender }) => sender.discard(meetingId))}
        >
          Discard it from this browser
        </button>
      )}
    </span>
  );
}

/** On the sign-in screen: what a closed tab or a signed-out session left waiting here. */
export function WaitingForSignIn() {
  const w = waiting(useOutbox());
  if (w.chunks + w.ends === 0) return null;
  return (
    <p role="status" class="warn" data-testid="outbox-waiting" data-chunks={w.chunks} data-ends={w.ends}>
      {describeWaiting(w)} from an earlier session {w.chunks + w.ends === 1 ? 'waits' : 'wait'} in this
      browser. {w.chunks + w.ends === 1 ? 'It is' : 'They are'} sent as soon as you sign in with a key of the
      same workspace.
    </p>
  );
}

/** On the meeting list: every meeting with audio or an End still in this browser, and why. */
export function OutboxSummary({ titles }: { titles: Record<string, string> }) {
  const box = useOutbox();
  if (!box) return null;
  const ids = [
    ...new Set([...waiting(box).meetings, ...Object.keys(box.rejected), ...Object.keys(box.trouble)]),
  ];
  if (ids.length === 0) return null;
  return (
    <section class="card" aria-labelledby="outbox-heading" data-testid="outbox-summary">
      <h2 id="outbox-heading">Audio kept in this browser</h2>
      <ul>
        {ids.map((id) => (
          <li key={id} data-meeting-id={id}>
            <a href={`#/meetings/${id}`}>{titles[id] ?? `Meeting ${id.slice(0, 8)}`}</a>:{' '}
            {describeWaiting({ chunks: box.pending[id] ?? 0, ends: box.endPending[id] ? 1 : 0 }) ||
              'nothing waiting'}
            {box.rejected[id]?.length ? `; ${box.rejected[id].length} refused by the server` : ''}.
            {box.trouble[id] && <span class="warn"> {box.trouble[id].message}</span>}
            {box.trouble[id]?.notFound && (
              <KeptAudio meetingId={id} title={titles[id] ?? `meeting-${id.slice(0, 8)}`} />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The chunks of one meeting the server refused for good: why, and their audio to download. */
export function RejectedChunks({ meetingId, title }: { meetingId: string; title: string }) {
  const box = useOutbox();
  const rejected = box?.rejected[meetingId] ?? [];
  if (rejected.length === 0) return null;
  const save = async (seq: number) => {
    const wav = await (await outbox()).store.rejectedAudio([meetingId, seq]);
    if (wav) downloadBytes(`${title}-chunk-${seq}.wav`, wav, 'audio/wav');
  };
  return (
    <ul class="rejected" aria-label="Refused chunks" data-testid="rejected">
      {rejected.map((r) => (
        <li key={r.seq} class="error">
          Chunk {r.seq} was refused by the server: {r.error}. Its audio is kept in this browser.{' '}
          {r.hasAudio && (
            <button type="button" class="link" onClick={() => void save(r.seq)}>
              Download chunk {r.seq} (WAV)
            </button>
          )}
        </li>
      ))}
    </ul>
  );
}

/** Audio IndexedDB would not take: it exists only in this tab's memory until downloaded. */
export function UnsavedAudio({ chunks, title }: { chunks: ArrayBuffer[]; title: string }) {
  if (chunks.length === 0) return null;
  return (
    <p role="alert" class="error" data-testid="unsaved">
      {chunks.length} {chunks.length === 1 ? 'chunk' : 'chunks'} of audio could not be stored in this browser
      and exist only in this tab.{' '}
      <button
        type="button"
        onClick={() => downloadBytes(`${title}-not-stored.wav`, joinWavs(chunks, SAMPLE_RATE), 'audio/wav')}
      >
        Download the audio not stored (WAV)
      </button>{' '}
      <button type="button" class="link" onClick={forgetUnsaved}>
        I have downloaded it; forget it here
      </button>
    </p>
  );
}
