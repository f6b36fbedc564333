import { useEffect, useState } from 'preact/hooks';
import { call } from '../api.ts';

/**
 * E4: how long this workspace keeps a meeting's audio for playback once it is transcribed, and
 * the privacy promise that goes with it. 0 (the default): the audio is deleted at once.
 */
export function PlaybackSetting() {
  const [days, setDays] = useState<number | null>(null);
  const [typed, setTyped] = useState('');
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    void call<{ days: number }>('GET', '/v1/playback-settings')
      .then((r) => (setDays(r.days), setTyped(String(r.days))))
      .catch((err: unknown) => setError(err instanceof Error ? err.message : String(err)));
  }, []);
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNote(null);
    try {
      const r = await call<{ days: number }>('PUT', '/v1/playback-settings', { days: Number(typed) });
      setDays(r.days);
      setNote(
        'Saved. Fewer days also shorten what is kept already; more days apply to meetings completed from now on.',
      );
    } catch (err) {
      setError(`Not saved: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return (
    <section class="card" aria-labelledby="playback-heading">
      <h2 id="playback-heading">Audio after transcription</h2>
      <p data-testid="privacy-promise">
        {days === null
          ? '…'
          : days === 0
            ? 'A meeting’s audio is deleted as soon as its transcript is complete: only the words are kept.'
            : `A meeting’s audio is kept for ${days} ${days === 1 ? 'day' : 'days'} after its transcript is complete, so people can play it back from any line; then it is deleted, and the deletion is in the audit log.`}
      </p>
      <form class="row" onSubmit={(e) => void save(e)}>
        <label for="playback-days">
          Keep audio for playback (days, 0 to delete at once)
          <input
            id="playback-days"
            type="number"
            min={0}
            max={365}
            value={typed}
            onInput={(e) => setTyped(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Save</button>
      </form>
      {note && <p role="status">{note}</p>}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}
