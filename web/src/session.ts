import { MicRecorder, SAMPLE_RATE } from './audio/recorder.ts';
import { outbox } from './outbox/index.ts';

/** The one recording this tab may be making; it outlives page changes inside the app. */
export interface SessionState {
  meetingId: string;
  phase: 'starting' | 'recording' | 'stopping' | 'stopped';
  level: number;
  elapsedSeconds: number;
  chunksCaptured: number;
  error: string | null;
}

let recorder: MicRecorder | null = null;

// Closing the tab while recording loses the chunk being filled (up to 5 s): ask first.
window.addEventListener('beforeunload', (e) => {
  if (state?.phase === 'recording' || state?.phase === 'starting') e.preventDefault();
});
let state: SessionState | null = null;
const listeners = new Set<(s: SessionState | null) => void>();

function set(next: SessionState | null): void {
  state = next;
  for (const fn of listeners) fn(state);
}

export function session(): SessionState | null {
  return state;
}

export function watchSession(fn: (s: SessionState | null) => void): () => void {
  listeners.add(fn);
  fn(state);
  return () => listeners.delete(fn);
}

/** Starts capturing into the outbox; chunks continue from the meeting's stored next sequence. */
export async function startRecording(meetingId: string): Promise<void> {
  if (state && state.phase !== 'stopped') throw new Error('this tab is already recording a meeting');
  const { store, sender } = await outbox();
  const firstSeq = (await store.meeting(meetingId))?.nextSeq ?? 0;
  let captured = 0;
  set({ meetingId, phase: 'starting', level: 0, elapsedSeconds: 0, chunksCaptured: 0, error: null });
  const rec = new MicRecorder(firstSeq, {
    onChunk: async (seq, wav) => {
      await store.put(meetingId, seq, wav);
      captured++;
      if (state) set({ ...state, chunksCaptured: captured });
      sender.kick();
    },
    onLevel: (peak, samples) => {
      if (state) set({ ...state, level: peak, elapsedSeconds: samples / SAMPLE_RATE });
    },
    onError: (err) => {
      if (state) set({ ...state, error: `Audio could not be kept in this browser: ${String(err)}` });
    },
  });
  recorder = rec;
  try {
    await rec.start();
    set({
      ...(state ?? { meetingId, level: 0, elapsedSeconds: 0, chunksCaptured: 0, error: null }),
      phase: 'recording',
    });
  } catch (err) {
    recorder = null;
    set({
      meetingId,
      phase: 'stopped',
      level: 0,
      elapsedSeconds: 0,
      chunksCaptured: 0,
      error: `The microphone could not be started: ${err instanceof Error ? err.message : String(err)}`,
    });
    throw err;
  }
}

/**
 * End meeting: stop the microphone, keep the last partial chunk, and record that End is wanted.
 * The outbox sends End only after every chunk is acknowledged, even across a reload.
 */
export async function endMeeting(meetingId: string): Promise<void> {
  const { store, sender } = await outbox();
  if (recorder && state?.meetingId === meetingId) {
    set({ ...state, phase: 'stopping' });
    await recorder.stop();
    recorder = null;
    set({ ...state, phase: 'stopped', level: 0 });
  }
  await store.requestEnd(meetingId);
  sender.kick();
}
