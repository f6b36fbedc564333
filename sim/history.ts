/**
 * What a simulation run observed, as the oracle (sim/oracle.ts) reads it: each meeting as its client
 * and the API saw it, what the clients were answered, what the fakes, the receiver and the store saw.
 * Gathered by sim/observe.ts; crafted by test/sim-oracle.test.ts. How a client's answers are read
 * (accepted, deleted) is here too: the clients and the oracle must read them alike.
 */
import type { ProviderCall } from './providers.ts';
import type { StoredObject } from './store.ts';

export interface MeetingObservation {
  id: string;
  /** The number its audio is marked with (sim/marks.ts); -1 for none (a bot that never recorded). */
  number: number;
  /** How the client drove it (the scenario), for the report. */
  label?: string;
  kind: 'live' | 'upload' | 'bot';
  /** Its client's DELETE was answered (sim/clients.ts, deletedBy): only V4's "no audio left" applies. */
  deleted: boolean;
  /** The client expects it to fail (a bad file): V1 does not apply, V2 wants a reason. */
  expectFailure: boolean;
  /** Samples the service accepted per mark (a live chunk's seq; an upload's stretch), counted once. */
  accepted: Map<number, number>;
  /**
   * Chunks sent that never got an answer (indeterminate): they may be in the transcript, at most
   * once, and may be missing.
   */
  unanswered?: Map<number, number>;
  /**
   * What the API says of it after quiescence: its status; `lost` when it answered 404 for a
   * meeting its client never deleted (V11).
   */
  status: string;
  failureCode: string | null;
  /** The final transcript as the API returns it; null when it could not be read. */
  segments: Array<{
    startMs: number;
    endMs?: number;
    text: string;
    /** W8: the speaker the API names, and the source it knew it from. */
    speaker?: { name: string; source: string } | null;
  }> | null;
  /** L25: a live meeting of two tracks (marks from TAB_MARK on are the tab's). */
  tracks?: boolean;
  /** W8, R11: a bot meeting whose provider knew who said each mark (its speaker timeline). */
  speakerOf?: Record<number, string>;
  /** Why the transcript could not be read (its answer), when it could not. */
  transcriptError?: string;
  /** A bot recording that never became a meeting (no audio, or a failure): no meeting event is due. */
  noMeeting?: boolean;
  /** A recording in a lossy format: read as tones, each stretch within LOSSY_TOLERANCE. */
  lossy?: boolean;
  /** The client canceled it (its batch): its words are not wanted, so ending failed is no loss. */
  canceled?: boolean;
  /** Regenerate requests that may have taken effect (every try sent): each may write minutes again. */
  regenerations?: number;
}

/** One request a tenant's webhook endpoint took (answered 2xx). */
export interface WebhookReceipt {
  endpoint: string;
  /** The `webhook-id` header: one event's id, the same on every retry. */
  id: string;
  type: string;
  meetingId: string | null;
  revision: number | null;
}

/** V10: the least work a run must do, per minute of faults. */
export interface Floors {
  completedMeetings: number;
  acceptedAudioSeconds: number;
  botRecordings: number;
}

export interface Work {
  minutes: number;
  completedMeetings: number;
  acceptedAudioSeconds: number;
  /** Bot recordings whose audio reached a complete meeting. */
  botRecordings: number;
}

export interface History {
  meetings: MeetingObservation[];
  /** Meetings the API lists that no client was answered with (a create made twice). */
  unknownMeetings: string[];
  /** The tenant's webhook endpoints (events: empty is all) and what each received. */
  webhooks: { endpoints: Array<{ name: string; events: string[] }>; receipts: WebhookReceipt[] };
  /** Counts of rows left in a state that needs more work, by kind (jobs, attempts, outbox…). */
  stuck: Record<string, number>;
  effects: {
    /**
     * Commits under a stale token, from the service's own attempt and audit rows (nothing outside
     * sees a stale commit that doubled nothing): attempts that completed after a later attempt of
     * their job had started, and windows whose words a worker committed while holding no running
     * attempt of their meeting's jobs.
     */
    staleCommits: string[];
    /** Bots the bot provider holds per recording. */
    botsPerRecording: Map<string, number>;
  };
  /** Calls the bot provider received, per limited endpoint, with the limit per window. */
  providerCalls: Array<{ endpoint: string; at: number[]; limit: number; windowMs: number }>;
  /** Every request the speech and chat providers received, and how each was answered. */
  providerLogs?: Array<{ provider: string; calls: ProviderCall[] }>;
  /** Every object the store held during the run (V4). */
  store?: StoredObject[];
  /** The service's quota ledger (the stored-bytes gauge operators read); null when unreadable. */
  ledgerBytes: number | null;
  storeBytes: number;
  /** Processes that exited on their own (not killed by the simulation, not stopped by it). */
  unexpectedExits: Array<{ name: string; code: number | null; signal: string | null; tail: string }>;
  /** Every request the clients sent and the answer to each try (V9). */
  requests?: RequestRecord[];
  /**
   * When a process of the service was killed, stopped or died: a job whose worker died holding a
   * 429's Retry-After is retried by another that never heard it (V6 forgives that retry).
   */
  disruptions?: number[];
  /**
   * F5 (V13): the sim workspace's windows claimed once, each with how
   * many of the noisy workspace's windows were claimed between its falling due and its claim, and
   * the spans of every fault (a wait a fault touched is not judged).
   */
  fairWaits?: {
    slots: number;
    /** The noisy workspace's windows that ran (its backlog, for reading). */
    noisyWindows: number;
    waits: FairWait[];
    faultSpans: Array<[number, number]>;
  };
  /** What the run achieved, and the floors it must reach (V10). */
  work?: { done: Work; floors: Floors };
  /** Unsettled bot recordings with their audit rows, webhooks and provider statuses (for reading). */
  botTrails?: string[];
  /** Windows that ended failed, with their reasons (for reading). */
  windowTrails?: string[];
  /** Jobs still waiting or running after quiescence, with their last failures (for reading). */
  jobTrails?: string[];
}

/** One window of the tenant under test: when it fell due, when it was claimed, and who went first. */
export interface FairWait {
  job: string;
  live: boolean;
  dueAt: number;
  claimedAt: number;
  /** The noisy workspace's windows claimed in between. */
  noisyAhead: number;
  /** Its own workspace's windows ahead of it in its lane claimed in between (each such round holds one of theirs too). */
  ownAhead: number;
}

/** One try of a request and what it was answered: a status, or null for no answer at all. */
export interface Answer {
  at: number;
  status: number | null;
  code?: string;
  retryAfterS?: number;
}

export type RequestKind =
  | 'create'
  | 'chunk'
  | 'end'
  | 'upload'
  | 'delete'
  | 'resubmit'
  | 'minutes'
  | 'batch'
  | 'cancel'
  | 'calendar'
  | 'webhook'
  | 'poll';

/** One request of a client's history, with the answer to each of its tries. */
export interface RequestRecord {
  kind: RequestKind;
  /** The meeting it is about (for a create, the one it made). */
  meetingId?: string;
  seq?: number;
  /**
   * Why the promise says it must end up accepted (V9): a chunk ("late", "out of order", "retried",
   * "after End without a count", or in order), an upload of an accepted format. Null: a request
   * the service may refuse.
   */
  promised: string | null;
  sentAt: number;
  answers: Answer[];
}

/**
 * Whether a request ended up accepted: its last answer is a 2xx, or (an upload) a 409
 * `recording.already_stored` after a try that got no answer or a 5xx — that try stored it, and its
 * answer was lost (PUT /recording refuses a second recording rather than answering the first again).
 */
export function accepted(r: RequestRecord): boolean {
  const last = r.answers.at(-1);
  if (!last || last.status === null) return false;
  if (last.status >= 200 && last.status < 300) return true;
  return (
    r.kind === 'upload' &&
    last.status === 409 &&
    last.code === 'recording.already_stored' &&
    r.answers.slice(0, -1).some((a) => a.status === null || a.status >= 500)
  );
}

/** Whether a DELETE's tries show the meeting deleted by it (see SimClient.remove). */
export function deletedBy(tries: Answer[]): boolean {
  return tries.some(
    (a, i) =>
      (a.status !== null && a.status >= 200 && a.status < 300) ||
      (a.status === 404 && tries.slice(0, i).some((b) => b.status === null || b.status >= 500)),
  );
}

/** An empty, healthy history: the base the oracle's tests change one thing of. */
export function emptyHistory(): History {
  return {
    meetings: [],
    unknownMeetings: [],
    webhooks: { endpoints: [], receipts: [] },
    stuck: {},
    effects: { staleCommits: [], botsPerRecording: new Map() },
    providerCalls: [],
    ledgerBytes: 0,
    storeBytes: 0,
    unexpectedExits: [],
  };
}
