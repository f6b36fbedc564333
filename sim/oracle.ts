/**
 * The simulation's oracle (issue 14, V1–V8): given what was observed of a run — what the clients
 * were told was accepted, the final transcripts, the database's settled state, the blob store and
 * the processes' exits — it names every way the promise was broken. Pure: the driver gathers the
 * observations (sim/observe.ts), and tests feed it crafted histories (test/sim-oracle.test.ts).
 */

export type Invariant = 'V1' | 'V2' | 'V3' | 'V4' | 'V5' | 'V6' | 'V7' | 'V8';

export const INVARIANTS: Record<Invariant, string> = {
  V1: 'every accepted sample is in the final transcript exactly once, in order',
  V2: 'every meeting not deleted is terminal, with a reason where it is not complete',
  V3: 'after quiescence nothing is stuck (jobs, attempts, outbox, cleanups, bots, transport locks, webhooks)',
  V4: 'terminal meetings hold no audio, and no audio was deleted before its windows settled',
  V5: 'no effect done twice (attempt commits, segments, minutes, webhook deliveries, bots)',
  V6: 'provider rate limits never exceeded at the provider',
  V7: 'the quota ledger equals the bytes in the store',
  V8: 'no process exited that the simulation did not kill',
};

export interface Violation {
  invariant: Invariant;
  subject: string;
  detail: string;
}

export interface MeetingObservation {
  id: string;
  /** How the client drove it (the scenario), for the report. */
  label?: string;
  kind: 'live' | 'upload' | 'bot';
  /** The client deleted it (answered 2xx): only V4's "no audio left" applies. */
  deleted: boolean;
  /** The client expects it to fail (a bad file): V1 does not apply, V2 wants a reason. */
  expectFailure: boolean;
  /** Samples the service accepted per mark (a live chunk's seq; an upload's one mark), counted once. */
  accepted: Map<number, number>;
  /**
   * Chunks sent that never got an answer (indeterminate): they may be in the transcript, at most
   * once, and may be missing.
   */
  unanswered?: Map<number, number>;
  status: string;
  failureCode: string | null;
  /** The final transcript as the API returns it. */
  segments: Array<{ startMs: number; text: string }>;
  /** Audio objects of the meeting still in the store (not deleted). */
  audioObjectsLeft: number;
  /**
   * Each audio deletion (a blob handed to cleanup): when, and when each window it covered settled
   * (null: that window never settled).
   */
  deletions: Array<{ blob: string; at: number; windowsSettledAt: Array<number | null> }>;
  /** A bot recording that never became a meeting (no audio, or a failure): no meeting event is due. */
  noMeeting?: boolean;
  /** A recording in a lossy format: its marks do not survive coding, so only its completion is checked. */
  lossy?: boolean;
  /** The client canceled it (its batch): its words are not wanted, so settling before deletion is not. */
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

export interface History {
  meetings: MeetingObservation[];
  /** Meetings in the database that no client was answered with (a create made twice). */
  unknownMeetings: string[];
  /** The tenant's webhook endpoints (events: empty is all) and what each received. */
  webhooks: { endpoints: Array<{ name: string; events: string[] }>; receipts: WebhookReceipt[] };
  /** Counts of rows left in a state that needs more work, by kind (jobs, attempts, outbox…). */
  stuck: Record<string, number>;
  /** Effects counted by their identity: a count above 1 for any key is a double. */
  effects: {
    /** Attempts that committed after a later attempt of their job had started: a stale token won. */
    staleCommits: string[];
    segmentsPerWindowSeq: Map<string, number>;
    botsPerRecording: Map<string, number>;
  };
  /** Calls the fake providers received, per limited endpoint, with the limit per window. */
  providerCalls: Array<{ endpoint: string; at: number[]; limit: number; windowMs: number }>;
  ledgerBytes: number;
  storeBytes: number;
  /** Processes that exited on their own (not killed by the simulation, not stopped by it). */
  unexpectedExits: Array<{ name: string; code: number | null; signal: string | null; tail: string }>;
  /** Unsettled bot recordings with their audit rows, webhooks and provider statuses (for reading). */
  botTrails?: string[];
}

/** Reads a transcript of marked audio: samples per mark, and the marks in timeline order. */
export function readMarks(segments: Array<{ startMs: number; text: string }>): {
  samples: Map<number, number>;
  order: number[];
  foreign: string[];
} {
  const samples = new Map<number, number>();
  const order: number[] = [];
  const foreign: string[] = [];
  for (const s of [...segments].sort((a, b) => a.startMs - b.startMs)) {
    for (const word of s.text.split(/\s+/).filter(Boolean)) {
      const m = /^c(\d+)x(\d+)$/.exec(word);
      if (!m) {
        foreign.push(word);
        continue;
      }
      const seq = Number(m[1]);
      samples.set(seq, (samples.get(seq) ?? 0) + Number(m[2]));
      if (order.at(-1) !== seq) order.push(seq);
    }
  }
  return { samples, order, foreign };
}

const TERMINAL = new Set(['complete', 'failed']);

export function checkHistory(h: History): Violation[] {
  const out: Violation[] = [];
  const add = (invariant: Invariant, subject: string, detail: string) =>
    out.push({ invariant, subject, detail });

  for (const m of h.meetings) {
    const subject = `meeting ${m.id}${m.label ? ` (${m.label})` : ''}`;
    // V4, for every meeting, deleted or not.
    if (TERMINAL.has(m.status) || m.deleted) {
      if (m.audioObjectsLeft > 0)
        add('V4', subject, `${m.audioObjectsLeft} audio objects left after it ended`);
    }
    for (const d of m.deletions) {
      const unsettled = d.windowsSettledAt.filter((t) => t === null || t > d.at).length;
      if (unsettled > 0 && !m.deleted && !m.canceled)
        add('V4', subject, `blob ${d.blob} deleted before ${unsettled} of its windows settled`);
    }
    if (m.deleted) continue;

    // V2
    if (!TERMINAL.has(m.status)) add('V2', subject, `status ${m.status} after quiescence`);
    else if (m.status !== 'complete' && !m.failureCode) add('V2', subject, `${m.status} with no reason`);
    if (m.expectFailure) {
      if (m.status !== 'failed') add('V2', subject, `a bad file ended ${m.status}, not failed`);
      continue;
    }
    if (m.lossy) {
      if (m.status !== 'complete' && !m.canceled)
        add('V2', subject, `a good recording ended ${m.status} (${m.failureCode})`);
      continue;
    }
    if (m.status !== 'complete') {
      // Good audio that was accepted (or that a bot recorded) must reach a transcript: a meeting
      // that ends failed for any reason but its own cancel has lost those words, even with a reason.
      if (TERMINAL.has(m.status) && !m.canceled && [...m.accepted.values()].some((n) => n > 0))
        add(
          'V1',
          subject,
          m.kind === 'bot'
            ? `its bot recorded audio, but it ended ${m.status} (${m.failureCode ?? 'no reason'})`
            : `${m.accepted.size} accepted chunks are in no transcript: it ended ${m.status} (${m.failureCode ?? 'no reason'})`,
        );
      continue;
    }

    // V1
    const { samples, order, foreign } = readMarks(m.segments);
    if (foreign.length > 0) add('V1', subject, `words not from its audio: ${foreign.slice(0, 3).join(' ')}`);
    for (const [seq, n] of m.accepted) {
      const got = samples.get(seq) ?? 0;
      if (got < n) add('V1', subject, `mark ${seq}: ${n - got} of ${n} samples lost`);
      else if (got > n) add('V1', subject, `mark ${seq}: ${got - n} samples transcribed twice`);
    }
    for (const [seq, got] of samples) {
      if (m.accepted.has(seq)) continue;
      const sent = m.unanswered?.get(seq);
      if (sent === undefined) add('V1', subject, `mark ${seq} in the transcript was never sent`);
      else if (got > sent)
        add('V1', subject, `mark ${seq} (unanswered): ${got - sent} samples transcribed twice`);
    }
    const sorted = [...order].sort((a, b) => a - b);
    if (order.join() !== sorted.join() || new Set(order).size !== order.length)
      add('V1', subject, `marks out of order along the timeline: ${order.slice(0, 12).join(',')}`);
  }

  for (const id of h.unknownMeetings)
    add(
      'V2',
      `meeting ${id}`,
      'in the database, but no client was ever answered with it (a create made twice)',
    );

  // V3
  for (const [what, n] of Object.entries(h.stuck)) if (n > 0) add('V3', what, `${n} left after quiescence`);
  const takes = (e: { events: string[] }, type: string) => e.events.length === 0 || e.events.includes(type);
  const received = new Set(h.webhooks.receipts.map((r) => `${r.endpoint} ${r.type} ${r.meetingId}`));
  for (const m of h.meetings) {
    if (m.deleted || m.noMeeting || !TERMINAL.has(m.status)) continue;
    const type = m.status === 'complete' ? 'meeting.completed' : 'meeting.failed';
    for (const e of h.webhooks.endpoints)
      if (takes(e, type) && !received.has(`${e.name} ${type} ${m.id}`))
        add('V3', `webhook ${e.name}`, `${type} of meeting ${m.id} never arrived`);
  }

  // V5
  const doubles = (map: Map<string, number>, what: string) => {
    for (const [key, n] of map) if (n > 1) add('V5', `${what} ${key}`, `${n} times`);
  };
  for (const attempt of h.effects.staleCommits)
    add('V5', `attempt ${attempt}`, 'committed after a later attempt of its job had started');
  doubles(h.effects.segmentsPerWindowSeq, 'segment');
  // One event arrives under one id however often it is retried; minutes are written once per
  // transcript revision, and once more per regeneration asked for.
  const ids = new Map<string, Set<string>>();
  for (const r of h.webhooks.receipts) {
    const key = `${r.endpoint} ${r.type} ${r.meetingId} r${r.revision}`;
    ids.set(key, (ids.get(key) ?? new Set()).add(r.id));
  }
  const regenerations = new Map(h.meetings.map((m) => [m.id, m.regenerations ?? 0]));
  for (const [key, set] of ids) {
    const [, type, meetingId] = key.split(' ');
    const allowed = type === 'minutes.ready' ? 1 + (regenerations.get(meetingId!) ?? 0) : 1;
    if (set.size > allowed) add('V5', `webhook ${key}`, `${set.size} distinct events (at most ${allowed})`);
  }
  doubles(h.effects.botsPerRecording, 'bots for recording');

  // V6: a sliding window over each endpoint's calls.
  for (const p of h.providerCalls) {
    const at = [...p.at].sort((a, b) => a - b);
    let lo = 0;
    for (let hi = 0; hi < at.length; hi++) {
      while (at[hi]! - at[lo]! >= p.windowMs) lo++;
      if (hi - lo + 1 > p.limit) {
        add('V6', p.endpoint, `${hi - lo + 1} calls within ${p.windowMs} ms (limit ${p.limit})`);
        break;
      }
    }
  }

  // V7
  if (h.ledgerBytes !== h.storeBytes)
    add('V7', 'storage', `ledger says ${h.ledgerBytes} bytes, the store holds ${h.storeBytes}`);

  // V8
  for (const e of h.unexpectedExits)
    add(
      'V8',
      e.name,
      `exited (code ${e.code}, signal ${e.signal}) without being killed: …${e.tail.slice(-1500)}`,
    );
  return out;
}

/** An empty, healthy history: the base the oracle's tests change one thing of. */
export function emptyHistory(): History {
  return {
    meetings: [],
    unknownMeetings: [],
    webhooks: { endpoints: [], receipts: [] },
    stuck: {},
    effects: {
      staleCommits: [],
      segmentsPerWindowSeq: new Map(),
      botsPerRecording: new Map(),
    },
    providerCalls: [],
    ledgerBytes: 0,
    storeBytes: 0,
    unexpectedExits: [],
  };
}
