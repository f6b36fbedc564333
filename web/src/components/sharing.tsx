import { useEffect, useState } from 'preact/hooks';
import { call, type Meeting } from '../api.ts';
import { may, useAuth } from '../people/auth.ts';

interface Member {
  userId: string;
  name: string;
  email: string;
}
interface Access {
  ownerUserId: string | null;
  visibility: 'private' | 'workspace' | 'shared';
  sharedWith: string[];
}
interface ShareLink {
  id: string;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
  opens: number;
}

const LABEL = { private: 'Private', workspace: 'Workspace', shared: 'Shared' } as const;

/** U4/U9: who may read the meeting, as a badge beside its title. */
export function VisibilityBadge({ meeting }: { meeting: Meeting }) {
  return (
    <span class="badge" data-testid="visibility" title="Who may read this meeting">
      {LABEL[meeting.visibility]}
    </span>
  );
}

/** Runs an action and reloads; a failure is shown, never thrown. */
function useAction(reload: () => Promise<void>) {
  const [error, setError] = useState<string | null>(null);
  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      await reload();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return { error, act };
}

function Failure({ error }: { error: string | null }) {
  return error ? (
    <p role="alert" class="error">
      {error}
    </p>
  ) : null;
}

/** U4: private, the workspace, or named members. */
function VisibilityChoice({ meetingId }: { meetingId: string }) {
  const [access, setAccess] = useState<Access | null>(null);
  const [members, setMembers] = useState<Member[]>([]);
  const load = async () => {
    const [a, m] = await Promise.all([
      call<Access>('GET', `/v1/meetings/${meetingId}/access`),
      call<{ members: Member[] }>('GET', '/v1/members'),
    ]);
    setAccess(a);
    setMembers(m.members);
  };
  const { error, act } = useAction(load);
  useEffect(() => void act(() => Promise.resolve()), [meetingId]);
  if (!access) return <Failure error={error} />;
  const choose = (visibility: Access['visibility'], sharedWith: string[] = []) =>
    act(() =>
      call('PUT', `/v1/meetings/${meetingId}/access`, {
        visibility,
        ...(visibility === 'shared' ? { sharedWith } : {}),
      }),
    );
  const words = {
    private: 'Only me (and admins)',
    workspace: 'Everyone in the workspace',
    shared: 'Only the people chosen below',
  } as const;
  return (
    <fieldset>
      <legend>Who in the workspace may read it</legend>
      <Failure error={error} />
      {(['private', 'workspace', 'shared'] as const).map((v) => (
        <label key={v}>
          <input
            type="radio"
            name="visibility"
            checked={access.visibility === v}
            onChange={() => void choose(v, access.sharedWith)}
          />{' '}
          {words[v]}
        </label>
      ))}
      {access.visibility === 'shared' && (
        <ul aria-label="Shared with">
          {members
            .filter((m) => m.userId !== access.ownerUserId)
            .map((m) => (
              <li key={m.userId}>
                <label>
                  <input
                    type="checkbox"
                    checked={access.sharedWith.includes(m.userId)}
                    onChange={(e) => {
                      const next = e.currentTarget.checked
                        ? [...access.sharedWith, m.userId]
                        : access.sharedWith.filter((u) => u !== m.userId);
                      void choose('shared', next);
                    }}
                  />{' '}
                  {m.name} <span class="muted">{m.email}</span>
                </label>
              </li>
            ))}
        </ul>
      )}
    </fieldset>
  );
}

/** U5: read-only links for people outside the workspace: made (shown once), listed, revoked. */
function ShareLinks({ meetingId }: { meetingId: string }) {
  const [links, setLinks] = useState<ShareLink[]>([]);
  const [made, setMade] = useState<string | null>(null);
  const load = async () => {
    setLinks((await call<{ links: ShareLink[] }>('GET', `/v1/meetings/${meetingId}/share-links`)).links);
  };
  const { error, act } = useAction(load);
  useEffect(() => void act(() => Promise.resolve()), [meetingId]);
  return (
    <>
      <h3>Links for people outside the workspace</h3>
      <p class="hint">
        A link shows this meeting read-only, to anyone who has it, for 7 days or until revoked.
      </p>
      <Failure error={error} />
      <button
        type="button"
        onClick={() =>
          void act(async () => {
            const link = await call<{ path: string }>('POST', `/v1/meetings/${meetingId}/share-links`, {});
            setMade(`${location.origin}${link.path}`);
          })
        }
      >
        Create a read-only link
      </button>
      {made && (
        <p>
          <input readOnly aria-label="Share link" value={made} onFocus={(e) => e.currentTarget.select()} />{' '}
          <button type="button" onClick={() => void navigator.clipboard?.writeText(made)}>
            Copy
          </button>
        </p>
      )}
      <ul aria-label="Share links">
        {links.map((l) => (
          <li key={l.id}>
            made {new Date(l.createdAt).toLocaleString()} · opened {l.opens}×{' '}
            {l.revokedAt ? (
              <span class="muted">revoked</span>
            ) : new Date(l.expiresAt) < new Date() ? (
              <span class="muted">expired</span>
            ) : (
              <>
                until {new Date(l.expiresAt).toLocaleDateString()}{' '}
                <button
                  type="button"
                  class="link"
                  onClick={() =>
                    void act(() => call('DELETE', `/v1/meetings/${meetingId}/share-links/${l.id}`))
                  }
                >
                  Revoke
                </button>
              </>
            )}
          </li>
        ))}
      </ul>
    </>
  );
}

/** U4: whether the reader may change a meeting (rename, correct, share, delete): its owner and admins. */
export function useMayChange(meeting: Meeting): boolean {
  const auth = useAuth();
  const myId = auth.kind === 'session' ? auth.session.user.id : null;
  return may(auth, 'manageAll') || (myId !== null && meeting.ownerUserId === myId);
}

/**
 * U4/U5/U9: the share dialog — visibility (private, the workspace, or named members) and
 * read-only links for people outside the workspace. Shown to those who
 * may change the meeting: its owner and admins.
 */
export function SharingPanel({ meeting }: { meeting: Meeting }) {
  const [open, setOpen] = useState(false);
  const { error } = useAction(() => Promise.resolve());
  if (!useMayChange(meeting)) return null;
  return (
    <section class="card" aria-label="Sharing">
      <div class="row">
        <button type="button" onClick={() => setOpen(!open)} aria-expanded={open}>
          Share…
        </button>
      </div>
      <Failure error={error} />
      {open && (
        <div role="dialog" aria-label="Share this meeting">
          <VisibilityChoice meetingId={meeting.id} />
          <ShareLinks meetingId={meeting.id} />
        </div>
      )}
    </section>
  );
}
