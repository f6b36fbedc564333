import { useState } from 'preact/hooks';
import { apiKey, setApiKey } from './api.ts';
import { navigate, useRoute } from './hooks.ts';
import { OutboxProblem, SignInAgain } from './components/outbox-notices.tsx';
import { outbox } from './outbox/index.ts';
import { MeetingPage } from './pages/meeting.tsx';
import { MeetingsPage } from './pages/meetings.tsx';
import { OperatorPage } from './pages/operator.tsx';
import { SignIn } from './pages/sign-in.tsx';

export function App() {
  const route = useRoute();
  const [key, setKey] = useState(apiKey());
  if (!key) {
    return (
      <SignIn
        onSignedIn={(k) => {
          setApiKey(k);
          setKey(k);
          // Audio a closed tab or a refused key left in the outbox waits for a key; send it now.
          void outbox().then(({ sender }) => sender.retryNow({ signedIn: true }));
        }}
      />
    );
  }
  // Signing out only forgets the key: chunks and Ends stay in IndexedDB for the next sign-in.
  const signOut = () => {
    setApiKey(null);
    setKey(null);
  };
  // `?t=MS` opens the transcript at that moment (a search hit, a citation).
  const meeting = /^\/meetings\/([0-9a-f-]{36})(?:\?t=(\d+))?$/.exec(route);
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
          <a href="#/operator" aria-current={route === '/operator' ? 'page' : undefined}>
            Operator
          </a>
          <button
            type="button"
            class="link"
            onClick={() => {
              signOut();
              navigate('/');
            }}
          >
            Sign out
          </button>
        </nav>
      </header>
      <main>
        <SignInAgain onSignIn={signOut} />
        <OutboxProblem />
        {meeting?.[1] ? (
          <MeetingPage id={meeting[1]} at={meeting[2] === undefined ? null : Number(meeting[2])} />
        ) : route === '/operator' ? (
          <OperatorPage />
        ) : (
          <MeetingsPage />
        )}
      </main>
    </>
  );
}
