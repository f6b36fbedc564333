import { useEffect, useState } from 'preact/hooks';
import { apiKey, setApiKey, setCsrfToken } from '../api.ts';

/**
 * U2/U3/U9: who this tab is signed in as. A person signs in with a password, single sign-on or a
 * link, and holds a session cookie (the browser keeps it; the page keeps only its CSRF token); a
 * machine-style install may still use an API key for the tab. Read from the server at load.
 */

export type Role = 'owner' | 'admin' | 'member' | 'viewer';

export interface SessionInfo {
  user: { id: string; email: string; name: string };
  workspaceId: string;
  role: Role;
  workspaces: Array<{ id: string; name: string; role: Role }>;
  csrfToken: string;
  expiresAt: string;
}

export type Auth =
  { kind: 'loading' } | { kind: 'signed-out' } | { kind: 'key' } | { kind: 'session'; session: SessionInfo };

let current: Auth = apiKey() ? { kind: 'key' } : { kind: 'loading' };
const listeners = new Set<(a: Auth) => void>();

function publish(next: Auth): void {
  current = next;
  setCsrfToken(next.kind === 'session' ? next.session.csrfToken : null);
  for (const l of listeners) l(next);
}

/** Asks the server whether the browser's cookie is a session. */
export async function loadSession(): Promise<void> {
  if (apiKey()) return publish({ kind: 'key' });
  try {
    const res = await fetch('/v1/auth/session');
    if (res.ok) return publish({ kind: 'session', session: (await res.json()) as SessionInfo });
  } catch {
    /* no answer: treated as signed out; the sign-in page says what fails */
  }
  publish({ kind: 'signed-out' });
}

export function signedInWithSession(session: SessionInfo): void {
  publish({ kind: 'session', session });
}

export function signedInWithKey(key: string): void {
  setApiKey(key);
  publish({ kind: 'key' });
}

/** Ends the session (or forgets the key). Audio waiting in this browser stays for the next sign-in. */
export async function signOut(): Promise<void> {
  const was = current;
  setApiKey(null);
  if (was.kind === 'session') {
    await fetch('/v1/auth/sign-out', {
      method: 'POST',
      headers: { 'x-csrf-token': was.session.csrfToken },
    }).catch(() => undefined);
  }
  publish({ kind: 'signed-out' });
}

export function useAuth(): Auth {
  const [auth, setAuth] = useState(current);
  useEffect(() => {
    listeners.add(setAuth);
    if (current.kind === 'loading') void loadSession();
    return () => void listeners.delete(setAuth);
  }, []);
  return auth;
}

/** Whether the signed-in person's role may do this (a key: decided by the server alone). */
export function may(auth: Auth, what: 'manageMembers' | 'readOperations' | 'manageAll' | 'create'): boolean {
  if (auth.kind !== 'session') return auth.kind === 'key';
  const role = auth.session.role;
  switch (what) {
    case 'manageMembers':
    case 'readOperations':
    case 'manageAll':
      return role === 'owner' || role === 'admin';
    case 'create':
      return role !== 'viewer';
  }
}
