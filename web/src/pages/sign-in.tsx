import { useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import { WaitingForSignIn } from '../components/outbox-notices.tsx';

/** Checks the key with one cheap authenticated call before keeping it for this browser session. */
export function SignIn({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch('/v1/meetings?limit=1', { headers: { authorization: `Bearer ${key.trim()}` } });
      if (res.status === 401) throw new ApiError(401, 'auth.invalid_key', 'That API key was not accepted.');
      if (!res.ok) throw new Error(`The server answered ${res.status}.`);
      onSignedIn(key.trim());
    } catch (err) {
      setError(
        err instanceof ApiError
          ? err.message
          : `Could not sign in: ${err instanceof Error ? err.message : String(err)}`,
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="narrow">
      <h1>Verbatim</h1>
      <WaitingForSignIn />
      <form onSubmit={(e) => void submit(e)} class="card">
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="current-password"
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <p class="hint">
          The key is kept only for this browser tab's session. An operator creates one with{' '}
          <code>verbatim keys create</code>.
        </p>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy || key.trim() === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}
