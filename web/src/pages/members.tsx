import { useState } from 'preact/hooks';
import { call } from '../api.ts';
import { usePoll } from '../hooks.ts';
import { PlaybackSetting } from '../components/playback-setting.tsx';
import type { Role } from '../people/auth.ts';

interface Member {
  userId: string;
  email: string;
  name: string;
  role: Role;
  joinedAt: string;
}

const ROLES: Role[] = ['owner', 'admin', 'member', 'viewer'];

/** U1/U9: the workspace's members, their roles, and invite links to copy (admins and owners). */
export function MembersPage({ myId }: { myId: string | null }) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  usePoll(
    async () => {
      try {
        setMembers((await call<{ members: Member[] }>('GET', '/v1/members')).members);
      } catch (err) {
        setError(err instanceof Error ? err.message : String(err));
      }
      return false;
    },
    0,
    [version],
  );
  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      setVersion((v) => v + 1);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <>
      <h1>Members</h1>
      <PlaybackSetting />
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <InviteCard act={act} />
      <section class="card" aria-labelledby="members-heading">
        <h2 id="members-heading">People</h2>
        {members === null ? (
          <p>Loading…</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Name</th>
                <th>Email</th>
                <th>Role</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {members.map((m) => (
                <tr key={m.userId}>
                  <td>{m.name}</td>
                  <td>{m.email}</td>
                  <td>
                    <select
                      aria-label={`Role of ${m.name}`}
                      value={m.role}
                      onChange={(e) => {
                        const role = e.currentTarget.value;
                        void act(() => call('PATCH', `/v1/members/${m.userId}`, { role }));
                      }}
                    >
                      {ROLES.map((r) => (
                        <option value={r}>{r}</option>
                      ))}
                    </select>
                  </td>
                  <td>
                    {m.userId !== myId && (
                      <button
                        type="button"
                        class="link"
                        onClick={() => {
                          if (
                            confirm(`Remove ${m.name} from this workspace? Their sessions here end at once.`)
                          )
                            void act(() => call('DELETE', `/v1/members/${m.userId}`));
                        }}
                      >
                        Remove
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}

/** U1/U9: an invite link with a role, to copy; emailed too when the server has an SMTP server. */
function InviteCard({ act }: { act: (fn: () => Promise<unknown>) => Promise<void> }) {
  const [inviteRole, setInviteRole] = useState<Role>('member');
  const [invite, setInvite] = useState<string | null>(null);
  const [inviteEmail, setInviteEmail] = useState('');
  const [mailed, setMailed] = useState<string | null>(null);
  // Invites are emailed only when the server has an SMTP server (VERBATIM_SMTP_URL).
  const [emailInvites, setEmailInvites] = useState(false);
  usePoll(
    async () => {
      try {
        setEmailInvites((await call<{ emailInvites: boolean }>('GET', '/v1/auth/methods')).emailInvites);
      } catch {
        setEmailInvites(false);
      }
      return false;
    },
    0,
    [],
  );
  return (
    <section class="card" aria-labelledby="invite-heading">
      <h2 id="invite-heading">Invite someone</h2>
      <form
        class="row"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            const email = emailInvites ? inviteEmail.trim() : '';
            const made = await call<{ token: string; emailedTo: string | null; emailError: string | null }>(
              'POST',
              '/v1/invites',
              email ? { role: inviteRole, email } : { role: inviteRole },
            );
            setInvite(`${location.origin}/#/join/${made.token}`);
            setMailed(
              made.emailedTo
                ? `Emailed to ${made.emailedTo}.`
                : made.emailError
                  ? `Not emailed: ${made.emailError}. Send the link yourself.`
                  : null,
            );
          });
        }}
      >
        <label for="invite-role">
          Role
          <select
            id="invite-role"
            value={inviteRole}
            onChange={(e) => setInviteRole(e.currentTarget.value as Role)}
          >
            {ROLES.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        </label>
        {emailInvites && (
          <label for="invite-email">
            Email (optional)
            <input
              id="invite-email"
              type="email"
              value={inviteEmail}
              onInput={(e) => setInviteEmail(e.currentTarget.value)}
            />
          </label>
        )}
        <button type="submit">
          {emailInvites && inviteEmail.trim() ? 'Send invite' : 'Create invite link'}
        </button>
      </form>
      {mailed && <p role="status">{mailed}</p>}
      {invite && (
        <p>
          Send this link to the person (it works once):{' '}
          <input readOnly aria-label="Invite link" value={invite} onFocus={(e) => e.currentTarget.select()} />{' '}
          <button type="button" onClick={() => void navigator.clipboard?.writeText(invite)}>
            Copy
          </button>
        </p>
      )}
    </section>
  );
}
