import { useEffect, useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import { WaitingForSignIn } from '../components/outbox-notices.tsx';
import { signedInWithKey, signedInWithSession, type SessionInfo } from '../people/auth.ts';

interface Methods {
  password: boolean;
  sso: { label: string; start: string } | null;
}

async function failure(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { error?: { message?: string } };
    return body.error?.message ?? `The server answered ${res.status}.`;
  } catch {
    return `The server answered ${res.status}.`;
  }
}

/**
 * U9: sign in with single sign-on (when the install has a provider) or an email and password; an
 * API key is the third way, for installs run by machines and for operators.
 */
export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [methods, setMethods] = useState<Methods | null>(null);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    void fetch('/v1/auth/methods')
      .then(async (r) => (r.ok ? setMethods((await r.json()) as Methods) : null))
      .catch(() => null);
  }, []);

  const withPassword = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch('/v1/auth/sign-in', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: email.trim(), password }),
      });
      if (!res.ok) throw new Error(await failure(res));
      signedInWithSession((await res.json()) as SessionInfo);
      onSignedIn();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  const withKey = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch('/v1/meetings?limit=1', { headers: { authorization: `Bearer ${key.trim()}` } });
      if (res.status === 401) throw new ApiError(401, 'auth.invalid_key', 'That API key was not accepted.');
      if (!res.ok) throw new Error(`The server answered ${res.status}.`);
      signedInWithKey(key.trim());
      onSignedIn();
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
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {methods?.sso && (
        <section class="card">
          <a class="button" href={`${methods.sso.start}?returnTo=${encodeURIComponent('/')}`}>
            Sign in with {methods.sso.label}
          </a>
        </section>
      )}
      <form onSubmit={(e) => void withPassword(e)} class="card">
        <label for="email">Email</label>
        <input
          id="email"
          name="email"
          type="email"
          autocomplete="username"
          required
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <label for="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        <button type="submit" disabled={busy || email.trim() === '' || password === ''}>
          Sign in
        </button>
      </form>
      <details class="card">
        <summary>Use an API key instead</summary>
        <form onSubmit={(e) => void withKey(e)}>
          <label for="api-key">API key</label>
          <input
            id="api-key"
            name="api-key"
            type="password"
            autocomplete="off"
            required
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
          />
          <p class="hint">
            The key is kept only for this browser tab's session. An operator creates one with{' '}
            <code>verbatim keys create</code>.
          </p>
          <button type="submit" disabled={busy || key.trim() === ''}>
            Sign in with the key
          </button>
        </form>
      </details>
    </main>
  );
}
