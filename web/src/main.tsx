import { render } from 'preact';
import { App } from './app.tsx';
import { outbox } from './outbox/index.ts';
import './styles.css';

// Opening the outbox flushes chunks that a closed tab or a reload left behind.
void outbox();
const root = document.getElementById('app');
if (root) render(<App />, root);
