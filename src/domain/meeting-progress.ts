import { ClientCode } from './client-codes.ts';
/**
 * What a person sees on the meeting screen (L17): which step of the close-out a finalizing meeting
 * is in, and every failure or missing-minutes code said in plain words. Pure: derived from the
 * meeting's own columns and window counts, so the screen can never disagree with the rows.
 */

export const ProgressStage = {
  recording: 'recording',
  transcribing: 'transcribing',
  grace: 'grace',
  waitingForWindows: 'waiting_for_windows',
  lastStretch: 'last_stretch',
  writingMinutes: 'writing_minutes',
  finishing: 'finishing',
} as const;
export type ProgressStage = (typeof ProgressStage)[keyof typeof ProgressStage];

export interface ProgressInput {
  status: string;
  source: string;
  finalizingAt: Date | null;
  transcriptCompletedAt: Date | null;
  minutesStatus: string;
  windows: { total: number; done: number; inFlight: number };
}

export interface Progress {
  stage: ProgressStage;
  /** One sentence for the screen. */
  message: string;
}

/** Null once the meeting is complete or failed (nothing is in progress), or before it has audio. */
export function meetingProgress(m: ProgressInput, now: Date, graceMs: number): Progress | null {
  const { total, done, inFlight } = m.windows;
  switch (m.status) {
    case 'recording':
      return {
        stage: ProgressStage.recording,
        message: `Recording: ${done} of ${total} ${total === 1 ? 'window' : 'windows'} transcribed so far.`,
      };
    case 'processing':
      return {
        stage: ProgressStage.transcribing,
        message:
          total === 0
            ? 'Reading the recording and cutting it into windows.'
            : `Transcribing: ${done} of ${total} ${total === 1 ? 'window' : 'windows'} done.`,
      };
    case 'finalizing':
      break;
    default:
      return null;
  }
  if (!m.transcriptCompletedAt) {
    // L3: the close-out starts after the grace period, so late chunks can still arrive.
    if (m.source === 'live' && m.finalizingAt && now.getTime() - m.finalizingAt.getTime() < graceMs) {
      return { stage: ProgressStage.grace, message: 'Waiting a moment for the last audio to arrive.' };
    }
    if (inFlight > 0) {
      return {
        stage: ProgressStage.waitingForWindows,
        message: `Waiting on ${inFlight} ${inFlight === 1 ? 'window' : 'windows'} still being transcribed.`,
      };
    }
    return {
      stage: ProgressStage.lastStretch,
      message: m.source === 'live' ? 'Transcribing the last stretch.' : 'Settling the last windows.',
    };
  }
  if (m.minutesStatus === 'pending') {
    return { stage: ProgressStage.writingMinutes, message: 'Writing the minutes.' };
  }
  return { stage: ProgressStage.finishing, message: 'Deleting the audio and finishing.' };
}

/**
 * A failure or missing-minutes code in plain words, with what the person can do about it. E5: said
 * from the code alone; the stored message (a provider's or the decoder's own words) is for
 * operators (logs, `verbatim inspect`, the API's `failure.message`), never said to a person here.
 */
export function plainReason(code: string, _message: string | null): string {
  switch (code) {
    case 'llm.quota_exhausted':
      return 'No minutes: the minutes service has used up its usage or billing limit. The transcript is complete. Press Regenerate once the limit is raised.';
    case 'llm.outage':
      return 'No minutes: the minutes service could not be reached for too long, so the meeting was closed without them. The transcript is complete. Press Regenerate to try again.';
    case 'llm.bad_response':
      return 'No minutes: the minutes service answered with something that could not be used. Press Regenerate to try again.';
    case 'minutes.not_started':
      return 'No minutes: they were never written. Press Regenerate to write them now.';
    case ClientCode.minutesNoTranscript:
      return 'No minutes: nothing was said that could be transcribed, so there is nothing to summarise.';
    case 'audio.undecodable':
      // E5: the decoder's own words (`file:input: Invalid data…`) are for operators (logs, inspect).
      return 'This meeting failed: the recording could not be read as audio. The file may be damaged, or not one of the formats Verbatim reads: upload a WAV, MP3, M4A, WebM, Ogg or FLAC file.';
    case 'reclaim_cap_exceeded':
      // No promise of a resubmit: a failed meeting's audio is deleted (L16), and resubmission needs it.
      return 'Verbatim gave up: the worker doing this work stopped again and again (it may have crashed), so it was not started again rather than loop. What was transcribed is kept.';
    case 'poison':
      // J20: declared only after it ran alone, in a process of its own, and that process died
      // run after run: the work itself is what kills it.
      return 'Verbatim gave up: this step stopped the process running it each time it ran, even alone, so it is not started again rather than loop. What was transcribed is kept.';
    case 'audio.released':
      return 'An operator released the audio kept for this stretch; it will not be transcribed.';
    case 'audio.retention_expired':
      return 'The audio kept for this stretch passed its retention period before it could be transcribed.';
    case 'meeting.canceled':
      return 'This meeting was canceled before it finished (its upload batch was canceled).';
    case ClientCode.storageQuotaExceeded:
      // F1: the split admits each window against the quota; the one that did not fit stopped it.
      return "This meeting failed: its audio, cut into windows for transcription, did not fit the workspace's storage quota. Delete meetings you no longer need, or ask an operator to raise the quota, then upload the recording again.";
    default:
      break;
  }
  // E5: a provider's or a store's own words go to operators (logs, `verbatim inspect`), never to a
  // person: the reason is said from its code, with what to do.
  const inspect = 'An operator can see the details with `verbatim inspect`.';
  if (code.startsWith('asr.')) {
    return `This meeting failed: speech recognition did not succeed (${ASR_WHY[code] ?? 'the recogniser answered with an error'}). What was transcribed is kept. ${inspect}`;
  }
  if (code.startsWith('storage.')) {
    return `This meeting failed: the audio store was not available. What was transcribed is kept. ${inspect}`;
  }
  if (code.startsWith('bot.')) {
    return `This meeting failed: the meeting bot did not bring back a recording. ${inspect}`;
  }
  if (code.startsWith('llm.')) {
    return 'No minutes: the minutes service failed. Press Regenerate to try again.';
  }
  return `This stopped with the code ${code}. ${inspect}`;
}

/** E5: why speech recognition failed, by its code, in a person's words. */
const ASR_WHY: Readonly<Record<string, string>> = {
  'asr.timeout': 'the recogniser took too long',
  'asr.unreachable': 'the recogniser could not be reached',
  'asr.unavailable': 'the recogniser was unavailable',
  'asr.overloaded': 'the recogniser was overloaded',
  'asr.rate_limited': 'the recogniser refused more requests for a while',
  'asr.quota_exhausted': 'the recogniser’s usage limit was used up',
  'asr.crashed': 'the recogniser stopped while it worked',
  'asr.bad_input': 'the recogniser could not use this audio',
  'asr.bad_response': 'the recogniser answered with something that could not be used',
  'asr.unsupported_language': 'the recogniser does not know the meeting’s language',
  'asr.server_error': 'the recogniser answered with an error',
};

/**
 * J20: the gap a completed meeting may show: stretches with no transcript whose audio is held.
 * `awaiting`: still being tried, alone, on a slow backoff (their words are added when they come);
 * `failed`: given up (poison, or an error that will not pass), their audio kept for a resubmission
 * until `keptUntil`. Null when there is no such stretch.
 */
export function heldStretchesMessage(
  awaiting: number,
  failed: number,
  keptUntil: Date | null,
): string | null {
  if (awaiting + failed === 0) return null;
  const n = (k: number) => `${k} ${k === 1 ? 'stretch' : 'stretches'}`;
  const until = keptUntil ? ` until ${keptUntil.toISOString().slice(0, 10)}` : '';
  const parts: string[] = [];
  if (awaiting > 0) {
    parts.push(
      `${n(awaiting)} awaiting transcription: ${awaiting === 1 ? 'it is' : 'they are'} being tried again on ${awaiting === 1 ? 'its' : 'their'} own, and the words are added to the transcript when they come.`,
    );
  }
  if (failed > 0) {
    parts.push(
      `${n(failed)} could not be transcribed; the audio is kept${until} so that an operator can try again (verbatim resubmit).`,
    );
  }
  return parts.join(' ');
}
