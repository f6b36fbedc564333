import { useState } from 'preact/hooks';
import { signedInWithSession, type SessionInfo } from '../people/auth.ts';
import { navigate } from '../hooks.ts';

/**
 * U1/U2/U9: a setup or invite link opened in the browser (`#/join/<token>`): make an account (or
 * join with the one this email has, by its password) and sign in.
 */
export function JoinPage({ token }: { token: string }) {
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await fetch('/v1/auth/links/redeem', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token, email: email.trim(), name: name.trim() || undefined, password }),
      });
      const body = (await res.json()) as SessionInfo & { error?: { message: string } };
      if (!res.ok) throw new Error(body.error?.message ?? `The server answered ${res.status}.`);
      signedInWithSession(body);
      navigate('/');
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="narrow">
      <h1>Join Verbatim</h1>
      <form class="card" onSubmit={(e) => void submit(e)}>
        <p class="hint">
          This link is used once. With an email that already has an account here, give that account’s
          password.
        </p>
        <label for="join-email">Email</label>
        <input
          id="join-email"
          type="email"
          autocomplete="username"
          required
          value={email}
          onInput={(e) => setEmail(e.currentTarget.value)}
        />
        <label for="join-name">Your name</label>
        <input
          id="join-name"
          autocomplete="name"
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
        <label for="join-password">Password (12 characters or more)</label>
        <input
          id="join-password"
          type="password"
          autocomplete="new-password"
          minLength={12}
          required
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Create account and join
        </button>
      </form>
    </main>
  );
}
