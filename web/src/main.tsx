import { render } from 'preact';
import { App } from './app.tsx';
import { outbox } from './outbox/index.ts';
import './styles.css';

// Opening the outbox reads what a closed tab or a reload left behind; it is sent once a key is
// signed in (never with an empty one).
void outbox();
const root = document.getElementById('app');
if (root) render(<App />, root);
