import { useState } from 'preact/hooks';
import { apiKey, setApiKey } from './api.ts';
import { navigate, useRoute } from './hooks.ts';
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
          // Audio a closed tab left in the outbox waits for a key; send it now.
          void outbox().then(({ sender }) => sender.kick());
        }}
      />
    );
  }
  const meeting = /^\/meetings\/([0-9a-f-]{36})$/.exec(route);
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
              setApiKey(null);
              setKey(null);
              navigate('/');
            }}
          >
            Sign out
          </button>
        </nav>
      </header>
      <main>
        {meeting?.[1] ? (
          <MeetingPage id={meeting[1]} />
        ) : route === '/operator' ? (
          <OperatorPage />
        ) : (
          <MeetingsPage />
        )}
      </main>
    </>
  );
}
