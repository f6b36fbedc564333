/**
 * The simulation's oracle (V1–V11 and V13; V12 is sim/plants.ts): given what was observed of a run — what
 * each client was answered, the final transcripts and statuses as the API gives them, what the
 * provider fakes and the webhook receiver saw, what is physically in the store, the processes'
 * exits, and the few rows only the service's own tables can show (V3's queues, V5's attempts) —
 * it names every way the promise was broken. Pure: the driver gathers the observations
 * (sim/observe.ts), and tests feed it crafted histories (test/sim-oracle.test.ts).
 */
import { parseWord, TONE_BLOCK } from './marks.ts';
import { TAB_MARK } from './clients.ts';
import { accepted, type History, type Work } from './history.ts';
import type { ProviderCall } from './providers.ts';

export type Invariant =
  'V1' | 'V2' | 'V3' | 'V4' | 'V5' | 'V6' | 'V7' | 'V8' | 'V9' | 'V10' | 'V11' | 'V13' | 'W8';

export const INVARIANTS: Record<Invariant, string> = {
  V1: 'every accepted sample is in the final transcript exactly once, in order',
  V2: 'every meeting not deleted is terminal, a good one complete, a failed one with a reason',
  V3: 'after quiescence nothing is stuck (jobs, attempts, outbox, cleanups, bots, transport locks, webhooks)',
  V4: 'the store holds no audio of ended meetings, and no audio left it before its words were recognized',
  V5: 'no effect done twice (stale commits, recognitions, webhook events, minutes, bots)',
  V6: 'provider rate limits never exceeded, and a Retry-After never cut short',
  V7: 'the quota ledger equals the bytes in the store',
  V8: 'no process exited that the simulation did not kill',
  V9: 'a request the promise accepts ends up accepted',
  V10: 'the run did real work: completed meetings, accepted audio and bot recordings above their floors',
  V11: 'every meeting a client made and did not delete is still there, its transcript readable',
  V13: 'a due window of one workspace waits its turn, not another’s backlog (F5): no more of the noisy workspace’s windows are claimed between its falling due and its claim than of its own, plus twice the transcription slots and two; and the noisy backlog ran',
  W8: 'every attributed word’s speaker is its source’s truth, and no speaker is given to audio no source attributed',
};

/**
 * F5 (V13): how many of another workspace's windows may be claimed while one of ours waits, due.
 * With fair rounds the rounds alternate: each of our own windows ahead of it (claimed in between)
 * stands for a round that holds one of theirs too; beyond those, each slot takes at most one of
 * theirs before ours (their window of this round), a second when claims race on every slot at
 * once or a round just began; two for the clock's edges.
 */
export function fairWaitBound(slots: number, ownAhead = 0): number {
  return ownAhead + 2 * slots + 2;
}

/** F5 (V13): the waits no fault touched (from 2 s before the window fell due to its claim). */
export function judgedWaits(
  f: NonNullable<History['fairWaits']>,
): NonNullable<History['fairWaits']>['waits'] {
  return f.waits.filter(
    (w) => !f.faultSpans.some(([from, to]) => to >= w.dueAt - 2_000 && from <= w.claimedAt),
  );
}

export interface Violation {
  invariant: Invariant;
  subject: string;
  detail: string;
}

/**
 * How far a lossy recording's reading may be from what was sent, per tone stretch, in samples
 * (docs/simulation.md, "Content of every format"): 0.1 s. Measured over 48 encodes of 2–5
 * stretches with Debian's ffmpeg, the worst stretch was 538 samples off (AAC, at an end).
 */
export const LOSSY_TOLERANCE = 1_600;

/** Segments from different recognitions may touch; overlapping by more than this is twice the time. */
const OVERLAP_MS = 50;

/** A transcript read back: samples per mark of its meeting (or tone), in order, and what is foreign. */
export interface Reading {
  samples: Map<number, number>;
  order: number[];
  foreign: string[];
  noise: number;
  /** Words (each names its recognition) that appear more than once: one recognition committed twice. */
  repeated: string[];
  /** Each word's recognition and the mark and samples it holds. */
  words: Array<{ mark: number; samples: number; call: number }>;
}

/** Reads a meeting's final transcript: its own exact marks, or (lossy) its tones. */
export function readTranscript(
  segments: Array<{ startMs: number; text: string }>,
  number: number,
  lossy = false,
): Reading {
  const r: Reading = { samples: new Map(), order: [], foreign: [], noise: 0, repeated: [], words: [] };
  const seen = new Set<string>();
  for (const s of [...segments].sort((a, b) => a.startMs - b.startMs)) {
    for (const text of s.text.split(/\s+/).filter(Boolean)) {
      if (seen.has(text)) r.repeated.push(text);
      seen.add(text);
      const w = parseWord(text);
      if (w?.kind === 'noise' && lossy) {
        r.noise += w.samples;
        continue;
      }
      const own = w && (lossy ? w.kind === 'tone' : w.kind === 'exact' && w.meeting === number);
      if (!w || !own || w.kind === 'noise') {
        r.foreign.push(text);
        continue;
      }
      r.samples.set(w.mark, (r.samples.get(w.mark) ?? 0) + w.samples);
      r.words.push({ mark: w.mark, samples: w.samples, call: w.call });
      // A tone read for a block or two is a codec's smear at an edge (a misread), not a stretch:
      // order is judged on the stretches.
      if (lossy && w.samples < 2 * TONE_BLOCK) continue;
      if (r.order.at(-1) !== w.mark) r.order.push(w.mark);
    }
  }
  return r;
}

const TERMINAL = new Set(['complete', 'failed']);
/** A refusal the client is told to try again (a 5xx, 408, 429, or any refusal with a Retry-After). */
const isRetryable = (a: { status: number | null; retryAfterS?: number }) =>
  a.status === null || a.status >= 500 || a.status === 408 || a.status === 429 || a.retryAfterS !== undefined;

export function checkHistory(h: History): Violation[] {
  const out: Violation[] = [];
  const add = (invariant: Invariant, subject: string, detail: string) =>
    out.push({ invariant, subject, detail });
  const speech = h.providerLogs?.find((p) => p.provider === 'speech')?.calls ?? [];
  const answeredAt = new Map(speech.map((c) => [c.call, c.answeredAt]));

  for (const m of h.meetings) checkMeeting(m, add, answeredAt, h.store);

  // V4: the store holds no audio once every meeting has ended (every one has, after quiescence;
  // V2 reports one that has not).
  for (const o of h.store ?? []) {
    if (o.goneAt !== null) continue;
    const of = [...o.marks.keys()].map((k) => k.split('/')[0]);
    const owner = h.meetings.find((m) => of.includes(String(m.number)));
    add(
      'V4',
      `object ${o.key}`,
      `${o.bytes} bytes (${o.content === 'unknown' ? 'content unknown' : o.content}) left in the store after quiescence` +
        (owner ? `: audio of meeting ${owner.id} (${owner.label ?? owner.kind}, ${owner.status})` : ''),
    );
  }

  for (const id of h.unknownMeetings)
    add(
      'V2',
      `meeting ${id}`,
      'listed by the API, but no client was ever answered with it (a create made twice)',
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
  for (const what of h.effects.staleCommits)
    add('V5', what, 'committed under a stale token (its attempt no longer held the job)');
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
  for (const [key, n] of h.effects.botsPerRecording)
    if (n > 1) add('V5', `bots for recording ${key}`, `${n} times`);

  // V6: the bot provider's limits, a sliding window over each endpoint's calls (the service budgets
  // them, R2); the speech and chat providers' Retry-After, never cut short for the same request.
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
  for (const p of h.providerLogs ?? []) {
    const early = retriesTooSoon(p.calls, h.disruptions ?? []);
    if (early.length > 0)
      add(
        'V6',
        `${p.provider} provider`,
        `${early.length} requests sent again before the Retry-After they were given ran out (first: call ${early[0]!.call} ${early[0]!.soonerMs} ms early)`,
      );
  }

  // V7
  if (h.ledgerBytes === null) add('V7', 'storage', 'the stored-bytes gauge could not be read');
  else if (h.ledgerBytes !== h.storeBytes)
    add('V7', 'storage', `the ledger says ${h.ledgerBytes} bytes, the store holds ${h.storeBytes}`);

  // V8
  for (const e of h.unexpectedExits)
    add(
      'V8',
      e.name,
      `exited (code ${e.code}, signal ${e.signal}) without being killed: …${e.tail.slice(-1500)}`,
    );

  // V9
  for (const r of h.requests ?? []) {
    if (r.promised === null) continue;
    const last = r.answers.at(-1);
    const subject = `${r.kind}${r.seq !== undefined ? ` ${r.seq}` : ''} of meeting ${r.meetingId ?? '?'}`;
    if (!last) add('V9', subject, `${r.promised}: never sent`);
    else if (accepted(r)) continue;
    else if (isRetryable(last))
      add(
        'V9',
        subject,
        `${r.promised}: never accepted (${r.answers.length} tries, the last ${describe(last)})`,
      );
    else add('V9', subject, `${r.promised}: refused with ${describe(last)}`);
  }

  // V13
  if (h.fairWaits) {
    // A check over nothing proves nothing: the noisy tenant's backlog must have run.
    if (h.fairWaits.noisyWindows === 0)
      add('V13', 'noisy tenant', 'none of its windows ran: its uploads were never accepted');
    for (const w of judgedWaits(h.fairWaits)) {
      const bound = fairWaitBound(h.fairWaits.slots, w.ownAhead);
      if (w.noisyAhead > bound)
        add(
          'V13',
          `window job ${w.job}`,
          `${w.noisyAhead} of the noisy workspace’s windows were claimed while it waited ${round((w.claimedAt - w.dueAt) / 1000)} s, due, beside ${w.ownAhead} of its own (at most ${bound})`,
        );
    }
  }

  // V10
  if (h.work) {
    const { done, floors } = h.work;
    const below = (what: string, got: number, floor: number) => {
      if (got < floor * done.minutes)
        add(
          'V10',
          what,
          `${round(got)} in ${done.minutes} min of faults, below the floor of ${floor} per minute`,
        );
    };
    below('completed meetings', done.completedMeetings, floors.completedMeetings);
    below('seconds of accepted audio', done.acceptedAudioSeconds, floors.acceptedAudioSeconds);
    below('bot recordings', done.botRecordings, floors.botRecordings);
  }
  return out;
}

/**
 * Requests a provider had refused with 429 and a Retry-After, sent again (the same audio or
 * messages) before that Retry-After ran out. 100 ms of slack for the trip between clocks. A
 * repeat after a process of the service was killed or stopped since the refusal is forgiven: the
 * worker that heard the Retry-After may be the one that died, and the job's next worker never
 * heard it.
 */
export function retriesTooSoon(
  calls: ProviderCall[],
  disruptions: number[] = [],
): Array<{ call: number; soonerMs: number }> {
  const out: Array<{ call: number; soonerMs: number }> = [];
  const waitUntil = new Map<string, { until: number; since: number }>();
  for (const c of [...calls].sort((a, b) => a.arrivedAt - b.arrivedAt)) {
    const wait = waitUntil.get(c.identity);
    if (
      wait !== undefined &&
      c.arrivedAt < wait.until - 100 &&
      !disruptions.some((t) => t >= wait.since && t <= c.arrivedAt)
    )
      out.push({ call: c.call, soonerMs: wait.until - c.arrivedAt });
    if (c.retryAfterMs !== undefined && c.answeredAt !== null)
      waitUntil.set(c.identity, {
        until: Math.max(wait?.until ?? 0, c.answeredAt + c.retryAfterMs),
        since: c.answeredAt,
      });
  }
  return out;
}

function describe(a: { status: number | null; code?: string; retryAfterS?: number }): string {
  if (a.status === null) return 'no answer';
  return `${a.status}${a.code ? ` ${a.code}` : ''}${a.retryAfterS !== undefined ? ` (Retry-After ${a.retryAfterS})` : ''}`;
}

const round = (n: number) => Math.round(n * 10) / 10;

/** What a run achieved (V10), from the observations. */
export function workOf(h: Pick<History, 'meetings'>, minutes: number): Work {
  const complete = h.meetings.filter((m) => !m.deleted && m.status === 'complete');
  return {
    minutes,
    completedMeetings: complete.length,
    acceptedAudioSeconds:
      h.meetings
        .filter((m) => !m.deleted && !m.canceled)
        .reduce((n, m) => n + [...m.accepted.values()].reduce((a, b) => a + b, 0), 0) / 16_000,
    botRecordings: complete.filter((m) => m.kind === 'bot' && [...m.accepted.values()].some((n) => n > 0))
      .length,
  };
}

type Add = (invariant: Invariant, subject: string, detail: string) => void;

/** V1, V2, V10, V11 for one meeting: its status, its reason, its words and its marks. */
function checkMeeting(
  m: History['meetings'][number],
  add: Add,
  answeredAt: Map<number, number | null>,
  store: History['store'],
): void {
  const subject = `meeting ${m.id}${m.label ? ` (${m.label})` : ''}`;
  if (m.deleted) return;

  // V11: what a client made is there until it deletes it; its transcript can be read.
  if (m.status === 'lost') {
    add('V11', subject, 'its client never deleted it, but the API answers 404: the meeting is lost');
    if ([...m.accepted.values()].some((n) => n > 0) && !m.canceled)
      add('V1', subject, `${m.accepted.size} accepted marks are lost with the meeting`);
    return;
  }
  if (m.segments === null && TERMINAL.has(m.status) && !m.noMeeting)
    add('V11', subject, `its transcript could not be read (${m.transcriptError ?? 'no answer'})`);

  // V2
  const good = !m.expectFailure && !m.canceled;
  if (!TERMINAL.has(m.status)) add('V2', subject, `status ${m.status} after quiescence`);
  else if (m.status !== 'complete' && !m.failureCode) add('V2', subject, `${m.status} with no reason`);
  if (m.expectFailure) {
    if (m.status !== 'failed') add('V2', subject, `a bad file ended ${m.status}, not failed`);
    return;
  }
  const heard = [...m.accepted.values()].some((n) => n > 0);
  if (m.status === 'failed' && good && (heard || m.kind !== 'bot'))
    add('V2', subject, `a good meeting ended failed (${m.failureCode ?? 'no reason'})`);
  if (m.status !== 'complete') {
    // Good audio that was accepted (or that a bot recorded) must reach a transcript: a meeting
    // that ends failed for any reason but its own cancel has lost those words, even with a reason.
    if (TERMINAL.has(m.status) && !m.canceled && heard)
      add(
        'V1',
        subject,
        m.kind === 'bot'
          ? `its bot recorded audio, but it ended ${m.status} (${m.failureCode ?? 'no reason'})`
          : `${m.accepted.size} accepted marks are in no transcript: it ended ${m.status} (${m.failureCode ?? 'no reason'})`,
      );
    return;
  }
  if (m.segments === null) return;

  // V1
  const r = readTranscript(m.segments, m.number, m.lossy);
  if (r.foreign.length > 0)
    add('V1', subject, `words not from its audio: ${r.foreign.slice(0, 3).join(' ')}`);
  if (m.lossy) {
    // Tones are read to within a tolerance (codecs smear each change of tone by a block or so).
    for (const [mark, n] of m.accepted) {
      const got = r.samples.get(mark) ?? 0;
      if (got < n - LOSSY_TOLERANCE) add('V1', subject, `tone ${mark}: ${n - got} of ${n} samples lost`);
      else if (got > n + LOSSY_TOLERANCE)
        add('V1', subject, `tone ${mark}: ${got - n} samples transcribed twice`);
    }
    // A tone never sent, read for a block or two, is a misread at a codec's edge: noise.
    let noise = r.noise;
    for (const [mark, got] of r.samples)
      if (!m.accepted.has(mark)) {
        if (got > LOSSY_TOLERANCE) add('V1', subject, `tone ${mark} in the transcript was never sent`);
        else noise += got;
      }
    if (noise > LOSSY_TOLERANCE * Math.max(1, m.accepted.size))
      add('V1', subject, `${noise} samples of noise, more than the codec makes`);
  } else {
    for (const [mark, n] of m.accepted) {
      const got = r.samples.get(mark) ?? 0;
      if (got < n) add('V1', subject, `mark ${mark}: ${n - got} of ${n} samples lost`);
      else if (got > n) add('V1', subject, `mark ${mark}: ${got - n} samples transcribed twice`);
    }
    for (const [mark, got] of r.samples) {
      if (m.accepted.has(mark)) continue;
      const sent = m.unanswered?.get(mark);
      if (sent === undefined) add('V1', subject, `mark ${mark} in the transcript was never sent`);
      else if (got > sent)
        add('V1', subject, `mark ${mark} (unanswered): ${got - sent} samples transcribed twice`);
    }
  }
  // L25: each track's marks are in order along its own timeline; the tracks run side by side.
  const onTab = (s: { text: string }) => {
    const w = parseWord(s.text.split(/\s+/).find(Boolean) ?? '');
    return w?.kind === 'exact' && w.mark >= TAB_MARK;
  };
  const tracks = m.tracks
    ? [
        readTranscript(
          m.segments.filter((s) => !onTab(s)),
          m.number,
        ).order,
        readTranscript(m.segments.filter(onTab), m.number).order,
      ]
    : [r.order];
  for (const order of tracks) {
    const sorted = [...order].sort((a, b) => a - b);
    if (order.join() !== sorted.join() || new Set(order).size !== order.length)
      add('V1', subject, `marks out of order along the timeline: ${order.slice(0, 12).join(',')}`);
  }
  checkSpeakers(m, subject, add);

  // V5, from the marks: one recognition committed twice, or two stretches of the timeline over
  // the same time (two windows overlapping: their audio transcribed twice).
  for (const w of new Set(r.repeated)) add('V5', subject, `one recognition's words appear twice: ${w}`);
  // Two tracks run side by side: their segments overlap in time, each track's own do not.
  const byTrack = new Map<string, typeof m.segments>();
  for (const s of m.segments) {
    const key = m.tracks ? (s.speaker?.name ?? '') : '';
    byTrack.set(key, [...(byTrack.get(key) ?? []), s]);
  }
  for (const own of byTrack.values()) {
    const spans = own
      .filter((s) => s.endMs !== undefined)
      .sort((a, b) => a.startMs - b.startMs || a.endMs! - b.endMs!);
    for (let i = 1; i < spans.length; i++) {
      const prevEnd = Math.max(...spans.slice(0, i).map((s) => s.endMs!));
      if (prevEnd - spans[i]!.startMs > OVERLAP_MS) {
        add(
          'V5',
          subject,
          `segments overlap in time at ${spans[i]!.startMs} ms: a stretch transcribed twice`,
        );
        break;
      }
    }
  }

  // V4, from the store and the recogniser's log: the audio of each accepted mark stayed in the
  // store until the recognitions whose words the transcript holds had been answered.
  if (store && !m.lossy && m.number >= 0) {
    for (const [mark, n] of m.accepted) {
      const holders = store.filter((o) => o.marks.has(`${m.number}/${mark}`));
      if (holders.length === 0 || holders.some((o) => o.goneAt === null)) continue;
      const lastGone = Math.max(...holders.map((o) => o.goneAt!));
      const words = r.words.filter((w) => w.mark === mark);
      const late = words.filter((w) => (answeredAt.get(w.call) ?? Infinity) > lastGone);
      const got = words.reduce((s, w) => s + w.samples, 0);
      if (late.length > 0)
        add(
          'V4',
          subject,
          `mark ${mark}: its audio left the store before recognition ${late[0]!.call} answered`,
        );
      else if (got < n)
        add(
          'V4',
          subject,
          `mark ${mark}: its audio left the store with ${n - got} of ${n} samples never recognized`,
        );
    }
  }
}

/**
 * W8: who said it, against the sources' truth. A two-track meeting's words are its tracks'
 * speakers' (its marks say which track each sample came from: "You" for the microphone's, "Others"
 * for the tab's, from the source `track`); a bot meeting whose provider had a speaker timeline has
 * each mark's words under the participant who said it, or (the timeline not imported) none; every
 * other meeting of the run has no source of speakers, so none of its words may have one.
 */
function checkSpeakers(m: History['meetings'][number], subject: string, add: Add): void {
  for (const s of m.segments ?? []) {
    const marks = new Set<number>();
    for (const text of s.text.split(/\s+/).filter(Boolean)) {
      const w = parseWord(text);
      if (w?.kind === 'exact' || w?.kind === 'tone') marks.add(w.mark);
    }
    if (marks.size === 0) continue;
    if (m.speakerOf) {
      // A bot's speakers come from the provider's timeline; until (or unless) it is imported,
      // a word has no speaker, which is not a wrong one.
      const truths = new Set([...marks].map((k) => m.speakerOf![k]));
      if (!s.speaker) continue;
      const truth = truths.size === 1 ? [...truths][0] : undefined;
      if (s.speaker.name !== truth || s.speaker.source !== 'participant')
        add('W8', subject, `words of ${[...truths].join('+')} at ${s.startMs} ms given ${s.speaker.name}`);
      continue;
    }
    if (!m.tracks) {
      if (s.speaker)
        add(
          'W8',
          subject,
          `words at ${s.startMs} ms given the speaker ${s.speaker.name}, though no source knew one`,
        );
      continue;
    }
    const truths = new Set([...marks].map((k) => (k < TAB_MARK ? 'You' : 'Others')));
    if (truths.size > 1) add('W8', subject, `one segment at ${s.startMs} ms holds both tracks' words`);
    const truth = [...truths][0]!;
    if (s.speaker?.name !== truth || s.speaker.source !== 'track')
      add(
        'W8',
        subject,
        `words of ${truth} at ${s.startMs} ms given ${s.speaker ? s.speaker.name : 'no speaker'}`,
      );
  }
}
