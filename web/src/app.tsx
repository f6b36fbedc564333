import { navigate, useRoute } from './hooks.ts';
import { OutboxProblem, SignInAgain } from './components/outbox-notices.tsx';
import { outbox } from './outbox/index.ts';
import { MeetingPage } from './pages/meeting.tsx';
import { MeetingsPage } from './pages/meetings.tsx';
import { OperatorPage } from './pages/operator.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { JoinPage } from './pages/join.tsx';
import { MembersPage } from './pages/members.tsx';
import { SharedPage } from './pages/shared.tsx';
import { loadSession, may, signOut, useAuth, type Auth } from './people/auth.ts';
import { RecordingBar } from './components/recording-bar.tsx';

/** U1/U9: the workspaces of a signed-in person; choosing one moves the session there. */
function WorkspaceSwitcher({ auth }: { auth: Auth }) {
  if (auth.kind !== 'session' || auth.session.workspaces.length < 2) return null;
  const { session } = auth;
  return (
    <label class="inline">
      <span class="visually-hidden">Workspace</span>
      <select
        aria-label="Workspace"
        value={session.workspaceId}
        onChange={(e) => {
          const workspaceId = e.currentTarget.value;
          void fetch('/v1/auth/workspace', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrfToken },
            body: JSON.stringify({ workspaceId }),
          }).then(async () => {
            await loadSession();
            navigate('/');
          });
        }}
      >
        {session.workspaces.map((w) => (
          <option value={w.id}>{w.name}</option>
        ))}
      </select>
    </label>
  );
}

export function App() {
  const route = useRoute();
  const auth = useAuth();
  // Pages that need no sign-in: a share link's meeting, and joining by a setup or invite link.
  const shared = /^\/s\/([A-Za-z0-9_-]+)$/.exec(route);
  if (shared?.[1]) return <SharedPage token={shared[1]} />;
  const join = /^\/join\/([A-Za-z0-9_-]+)$/.exec(route);
  if (join?.[1]) return <JoinPage token={join[1]} />;

  if (auth.kind === 'loading') return <main class="narrow">Loading…</main>;
  if (auth.kind === 'signed-out') {
    return (
      <SignIn
        onSignedIn={() => {
          // Audio a closed tab or a refused sign-in left in the outbox waits for one; send it now.
          void outbox().then(({ sender }) => sender.retryNow({ signedIn: true }));
        }}
      />
    );
  }
  // Signing out ends the session (or forgets the key): chunks and Ends stay in IndexedDB for the next sign-in.
  const leave = () => void signOut().then(() => navigate('/'));
  // `?t=MS` opens the transcript at that moment (a search hit, a citation).
  const meeting = /^\/meetings\/([0-9a-f-]{36})(?:\?t=(\d+))?$/.exec(route);
  const admin = may(auth, 'manageMembers');
  return (
    <>
      <header class="bar">
        <a class="brand" href="#/">
          Verbatim
        </a>
        <nav aria-label="Main">
          <a href="#/" aria-current={route === '/' ? 'page' : undefined}>
            Meetings
          </a>
          {auth.kind === 'session' && admin && (
            <a href="#/members" aria-current={route === '/members' ? 'page' : undefined}>
              Members
            </a>
          )}
          {may(auth, 'readOperations') && (
            <a href="#/operator" aria-current={route === '/operator' ? 'page' : undefined}>
              Operator
            </a>
          )}
          <WorkspaceSwitcher auth={auth} />
          {auth.kind === 'session' && (
            <span class="muted" data-testid="signed-in-as" title={auth.session.user.email}>
              {auth.session.user.name} · {auth.session.role}
            </span>
          )}
          <button type="button" class="link" onClick={leave}>
            Sign out
          </button>
        </nav>
      </header>
      <RecordingBar route={route} />
      <main>
        <SignInAgain onSignIn={leave} />
        <OutboxProblem />
        {meeting?.[1] ? (
          <MeetingPage
            key={meeting[1]}
            id={meeting[1]}
            at={meeting[2] === undefined ? null : Number(meeting[2])}
          />
        ) : route === '/operator' ? (
          <OperatorPage />
        ) : route === '/members' && auth.kind === 'session' ? (
          <MembersPage myId={auth.session.user.id} />
        ) : (
          <MeetingsPage />
        )}
      </main>
    </>
  );
}
