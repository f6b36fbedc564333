import { MicRecorder, SAMPLE_RATE } from './audio/recorder.ts';
import type { ChunkStore } from './outbox/chunk-store.ts';
import { outbox } from './outbox/index.ts';
import { lockMeeting, meetingLockHeld, withMeetingLock } from './outbox/recording-lock.ts';
import { parseTrackKey, trackKey } from './outbox/track-key.ts';

/** The one recording this tab may be making; it outlives page changes inside the app. */
export interface SessionState {
  meetingId: string;
  phase: 'starting' | 'recording' | 'stopping' | 'stopped';
  level: number;
  elapsedSeconds: number;
  chunksCaptured: number;
  /** Seconds of the chunk being filled already stored in IndexedDB as its draft (0 after a cut). */
  draftSeconds: number;
  error: string | null;
  /** Chunks IndexedDB would not take, kept in memory so they can be downloaded (never dropped). */
  unsaved: ArrayBuffer[];
  /** L25: a tab's or the screen's audio recorded as the meeting's second track, while it is. */
  tab?: { level: number; offsetMs: number } | null;
}

/** Waits between tries to store a chunk; after the last, recording stops with an error. */
const STORE_RETRY_MS = [100, 500, 2_000];

export const RECORDING_ELSEWHERE =
  'This meeting is being recorded in another tab of this browser. Use that tab: two tabs recording one meeting would interleave their audio.';

let recorder: MicRecorder | null = null;
/** L25: the second track's recorder and its outbox lock, while a tab's audio is recorded. */
let tabRecorder: MicRecorder | null = null;
let tabRelease: (() => void) | null = null;
let releaseLock: (() => void) | null = null;
/** Stops listening for the server's word that the meeting being recorded is no longer live. */
let stopWatching: (() => void) | null = null;
/** Set while a recording is being stopped; End waits for it so the last chunk is stored first. */
let stopping: Promise<void> | null = null;
let state: SessionState | null = null;
const listeners = new Set<(s: SessionState | null) => void>();

// Closing the tab while recording or stopping loses what the last draft of the chunk being filled
// did not hold yet (about a second), and audio IndexedDB refused lives only in memory: ask first.
window.addEventListener('beforeunload', (e) => {
  if (state && (state.phase !== 'stopped' || state.unsaved.length > 0)) e.preventDefault();
});

function set(next: SessionState | null): void {
  state = next;
  for (const fn of listeners) fn(state);
}

function patch(p: Partial<SessionState>): void {
  if (state) set({ ...state, ...p });
}

export function session(): SessionState | null {
  return state;
}

export function watchSession(fn: (s: SessionState | null) => void): () => void {
  listeners.add(fn);
  fn(state);
  return () => listeners.delete(fn);
}

/** After the person downloaded the audio IndexedDB would not take, this tab may let it go. */
export function forgetUnsaved(): void {
  patch({ unsaved: [] });
}

/** True when another tab of this browser is recording the meeting. */
export async function recordingElsewhere(meetingId: string): Promise<boolean> {
  if (recorder && state?.meetingId === meetingId) return false;
  return meetingLockHeld(meetingId);
}

async function storeChunk(store: ChunkStore, meetingId: string, wav: ArrayBuffer): Promise<number> {
  for (let i = 0; ; i++) {
    try {
      return await store.add(meetingId, wav);
    } catch (err) {
      const wait = STORE_RETRY_MS[i];
      if (wait === undefined) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

/** Starts capturing into the outbox; the outbox numbers the chunks after the meeting's last one. */
export async function startRecording(meetingId: string): Promise<void> {
  if (state && state.phase !== 'stopped') throw new Error('this tab is already recording a meeting');
  if (state && state.unsaved.length > 0)
    throw new Error('download the audio this browser could not store before recording again');
  const { store, sender } = await outbox();
  const closed = sender.status.closed[meetingId];
  if (closed) throw new Error(`${closed}.`);
  const release = await lockMeeting(meetingId);
  if (!release) throw new Error(RECORDING_ELSEWHERE);
  try {
    // Checked under the lock, which End takes while it stores End: no chunk may follow an End.
    if ((await store.meeting(meetingId))?.endRequested) {
      throw new Error(
        'End meeting was already pressed for this meeting (its End waits in this browser to be sent), so it cannot be recorded again.',
      );
    }
    // A draft a closed or crashed tab left becomes a chunk before this recording's first one.
    if ((await store.promoteDraft(meetingId)).kind !== 'none') sender.kick();
  } catch (err) {
    release();
    throw err;
  }
  releaseLock = release;
  let captured = 0;
  /**
   * Set once a chunk could not be stored: every later chunk stays in memory with it, so no later
   * chunk takes its sequence number (the server would see no gap and the audio would vanish).
   */
  let storeFailed = false;
  set({
    meetingId,
    phase: 'starting',
    level: 0,
    elapsedSeconds: 0,
    chunksCaptured: 0,
    draftSeconds: 0,
    error: null,
    unsaved: [],
  });
  const rec = new MicRecorder({
    onChunk: async (wav) => {
      if (storeFailed) {
        patch({ unsaved: [...(state?.unsaved ?? []), wav] });
        return;
      }
      // The chunk stays in this closure until IndexedDB has it; if it never does, onError keeps it.
      await storeChunk(store, meetingId, wav);
      captured++;
      patch({ chunksCaptured: captured, draftSeconds: 0 });
      sender.kick();
    },
    onDraft: async (wav, samples) => {
      // After a failed chunk no draft may be written: it would take that chunk's sequence number.
      if (storeFailed) return;
      await store.saveDraft(meetingId, wav, samples);
      patch({ draftSeconds: samples / SAMPLE_RATE });
    },
    onLevel: (peak, samples) => patch({ level: peak, elapsedSeconds: samples / SAMPLE_RATE }),
    onError: async (err, wav) => {
      storeFailed = true;
      patch({
        unsaved: [...(state?.unsaved ?? []), wav],
        error: `Audio could not be stored in this browser (${err instanceof Error ? err.message : String(err)}), so recording was stopped. Download the audio that was not stored before closing this tab.`,
      });
      void stopRecording(null);
      // The draft is the start of the chunk now kept in memory: drop it (before the stop releases
      // the lock), or it would be sent under that chunk's seq as audio said not to be stored.
      // Should IndexedDB refuse this too, that start is later sent under the seq, which stays right:
      // no later chunk of this recording was stored.
      await store.deleteDraft(meetingId).catch(() => undefined);
    },
    onBroken: (reason) =>
      void stopRecording(`Recording stopped: ${reason}. The audio captured until then is kept.`),
  });
  recorder = rec;
  // The server no longer takes this meeting's audio (ended in another browser or through the API,
  // or deleted): stop the microphone and say why, rather than record into refusals.
  stopWatching = sender.subscribe((s) => {
    const why = s.closed[meetingId];
    if (why && recorder === rec) void serverClosed(meetingId, why);
  });
  try {
    await rec.start();
    patch({ phase: 'recording' });
  } catch (err) {
    recorder = null;
    releaseLock = null;
    release();
    stopWatching?.();
    stopWatching = null;
    set({
      meetingId,
      phase: 'stopped',
      level: 0,
      elapsedSeconds: 0,
      chunksCaptured: 0,
      draftSeconds: 0,
      error: `The microphone could not be started: ${err instanceof Error ? err.message : String(err)}`,
      unsaved: [],
    });
    throw err;
  }
}

/** Stops the microphone and stores everything captured; `reason` is shown when it was not asked for. */
function stopRecording(reason: string | null): Promise<void> {
  if (stopping) return stopping;
  const rec = recorder;
  if (!rec || !state) return Promise.resolve();
  patch({ phase: 'stopping', ...(reason ? { error: reason } : {}) });
  stopping = (async () => {
    await stopTabAudio(null);
    const flushed = await rec.stop();
    recorder = null;
    releaseLock?.();
    releaseLock = null;
    stopWatching?.();
    stopWatching = null;
    const lost = flushed
      ? null
      : 'The last fraction of a second may be missing: the audio processor did not hand it over in time.';
    patch({
      phase: 'stopped',
      level: 0,
      draftSeconds: 0,
      error: lost ? [state?.error, lost].filter(Boolean).join(' ') : (state?.error ?? null),
    });
  })().finally(() => {
    stopping = null;
  });
  return stopping;
}

/**
 * The server says the meeting this tab records is no longer live (ended in another browser or
 * through the API, or deleted): stop the microphone with that reason. What was captured is kept.
 */
export function serverClosed(meetingId: string, why: string): Promise<void> {
  if (state?.meetingId !== meetingId || !recorder) return Promise.resolve();
  return stopRecording(`Recording stopped: ${why}. The audio captured until then is kept in this browser.`);
}

/**
 * End meeting: stop the microphone, keep the last partial chunk, and record that End is wanted.
 * The outbox sends End only after every chunk is acknowledged, even across a reload. Refused while
 * another tab of this browser records the meeting (End is stored holding the meeting's recording
 * lock, so no tab can start recording it meanwhile), and while audio IndexedDB would not take is
 * still only in this tab: ending would close the meeting without it, unannounced.
 */
export async function endMeeting(meetingId: string): Promise<void> {
  const { store, sender } = await outbox();
  if (state?.meetingId === meetingId && (recorder || stopping)) await stopRecording(null);
  if (state?.meetingId === meetingId && state.unsaved.length > 0) {
    throw new Error(
      `${state.unsaved.length} ${state.unsaved.length === 1 ? 'chunk' : 'chunks'} of audio could not be stored in this browser and would not reach the server. Download the audio not stored first; once you have, choose "I have downloaded it; forget it here" and End meeting again.`,
    );
  }
  // L25: the meeting's other tracks end with it: their last drafts become chunks, and their
  // counts go with the meeting's End.
  for (const m of await store.meetings()) {
    if (parseTrackKey(m.meetingId)?.meetingId !== meetingId) continue;
    await withMeetingLock(m.meetingId, async () => {
      await store.promoteDraft(m.meetingId);
      await store.requestEnd(m.meetingId);
    });
  }
  const stored = await withMeetingLock(meetingId, async () => {
    // A draft a closed or crashed tab left is audio before the End: it becomes a chunk first.
    await store.promoteDraft(meetingId);
    await store.requestEnd(meetingId);
  });
  if (stored === null) {
    throw new Error(
      'This meeting is being recorded in another tab of this browser. End it in that tab: ending it here would cut that recording off.',
    );
  }
  sender.kick();
}

/**
 * L25: records a tab's or the screen's audio (the call in a browser tab) as the meeting's second
 * track, "Others", beside the microphone, until it is stopped, the sharing ends or the recording
 * stops. The browser asks which tab or screen to share; one without audio is refused with how to
 * share it. Its chunks go through the outbox under their own key (outbox/track-key.ts), so a
 * network outage or a reload loses none of them either.
 */
export async function addTabAudio(): Promise<void> {
  if (!state || state.phase !== 'recording' || !recorder) throw new Error('start recording first');
  if (tabRecorder) return;
  const meetingId = state.meetingId;
  const { store, sender } = await outbox();
  const shared = await navigator.mediaDevices.getDisplayMedia({ video: true, audio: true });
  for (const t of shared.getVideoTracks()) t.stop();
  const audio = shared.getAudioTracks();
  if (audio.length === 0) {
    throw new Error(
      'the shared tab or screen has no audio: share again, choose the tab the call is in, and tick "Also share tab audio"',
    );
  }
  // Where the microphone's timeline stands now: every chunk of it stored in this browser (in
  // this recording and before a reload or a pause), and the chunk being filled. A tab shared
  // again is a track of its own (tab-2, …), starting where the timeline then stands, so a pause
  // in the sharing never moves the tab's later audio earlier.
  const micAt = ((await store.meeting(meetingId))?.samples ?? 0) + recorder.unchunkedSamples;
  const offsetMs = Math.round((micAt * 1000) / SAMPLE_RATE);
  const before = (await store.meetings()).filter((m) => parseTrackKey(m.meetingId)?.meetingId === meetingId);
  const key = trackKey(meetingId, before.length === 0 ? 'tab' : `tab-${before.length + 1}`, offsetMs);
  const release = await lockMeeting(key);
  if (!release) {
    for (const t of audio) t.stop();
    throw new Error(RECORDING_ELSEWHERE);
  }
  let failed = false;
  const rec = new MicRecorder(
    {
      onChunk: async (wav) => {
        if (failed) {
          patch({ unsaved: [...(state?.unsaved ?? []), wav] });
          return;
        }
        await storeChunk(store, key, wav);
        sender.kick();
      },
      onDraft: async (wav, samples) => {
        if (!failed) await store.saveDraft(key, wav, samples);
      },
      onLevel: (peak) => {
        if (state?.tab) patch({ tab: { ...state.tab, level: peak } });
      },
      onError: async (err, wav) => {
        failed = true;
        patch({
          unsaved: [...(state?.unsaved ?? []), wav],
          error: `The tab's audio could not be stored in this browser (${err instanceof Error ? err.message : String(err)}), so its recording was stopped. Download the audio that was not stored before closing this tab.`,
        });
        void stopTabAudio(null);
        await store.deleteDraft(key).catch(() => undefined);
      },
      onBroken: () => void stopTabAudio(null),
    },
    () => Promise.resolve(new MediaStream(audio)),
  );
  tabRecorder = rec;
  tabRelease = release;
  try {
    await rec.start();
    patch({ tab: { level: 0, offsetMs } });
  } catch (err) {
    tabRecorder = null;
    tabRelease = null;
    release();
    throw err;
  }
}

/** L25: stops recording the tab's audio; what was captured is kept and sent. */
export async function stopTabAudio(reason: string | null): Promise<void> {
  const rec = tabRecorder;
  if (!rec) return;
  tabRecorder = null;
  await rec.stop();
  tabRelease?.();
  tabRelease = null;
  patch({ tab: null, ...(reason ? { error: reason } : {}) });
}
