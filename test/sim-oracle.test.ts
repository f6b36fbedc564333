import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { drawScenarios, SCENARIOS } from '../sim/clients.ts';
import { markedSamples, readAudio, toneSamples, wordOf } from '../sim/marks.ts';
import {
  accepted,
  deletedBy,
  emptyHistory,
  type History,
  type MeetingObservation,
  type RequestRecord,
} from '../sim/history.ts';
import { checkHistory, workOf } from '../sim/oracle.ts';
import { parsePlant, plantCaught } from '../sim/plants.ts';
import type { ProviderCall } from '../sim/providers.ts';
import { Rng } from '../sim/rng.ts';
import type { StoredObject } from '../sim/store.ts';

const NUMBER = 7;
/** A word of meeting NUMBER's audio, as the recogniser writes it (recognition `call`). */
const w = (mark: number, samples: number, call = 1, number = NUMBER) =>
  wordOf({ kind: 'exact', meeting: number, mark, from: 0, samples }, call);

/** A live meeting of three chunks, all accepted and transcribed once, in order. */
function goodMeeting(
  id = 'm1',
): MeetingObservation & { segments: NonNullable<MeetingObservation['segments']> } {
  return {
    id,
    number: NUMBER,
    kind: 'live',
    deleted: false,
    expectFailure: false,
    accepted: new Map([
      [0, 80_000],
      [1, 64_000],
      [2, 70_000],
    ]),
    status: 'complete',
    failureCode: null,
    segments: [
      { startMs: 0, endMs: 5000, text: w(0, 80_000, 1) },
      { startMs: 5000, endMs: 7500, text: w(1, 40_000, 1) },
      { startMs: 7500, endMs: 9000, text: `${w(1, 24_000, 2)} ${w(2, 70_000, 2)}` },
    ],
  };
}

function withMeeting(m: MeetingObservation): History {
  return { ...emptyHistory(), meetings: [m] };
}

const invariantsOf = (h: History) => checkHistory(h).map((v) => v.invariant);

/** A chunk PUT of meeting m1 and the answers its tries got. */
function chunkRequest(promised: string, ...answers: RequestRecord['answers']): RequestRecord {
  return { kind: 'chunk', meetingId: 'm1', seq: 2, promised, sentAt: 0, answers };
}

const call = (n: number, over: Partial<ProviderCall> = {}): ProviderCall => ({
  call: n,
  identity: 'audio-a',
  arrivedAt: n * 1000,
  answeredAt: n * 1000 + 10,
  outcome: 'ok',
  ...over,
});

const object = (key: string, marks: Record<string, number>, goneAt: number | null): StoredObject => ({
  key,
  bytes: 100,
  seenAt: 0,
  goneAt,
  marks: new Map(Object.entries(marks)),
  content: 'exact',
});

void describe('the simulation oracle on crafted histories', () => {
  void it('V1–V11: a healthy history has no violation', () => {
    const h = withMeeting(goodMeeting());
    h.effects.botsPerRecording.set('r1', 1);
    h.providerCalls.push({ endpoint: 'create_bot', at: [0, 100, 200, 1100], limit: 3, windowMs: 1000 });
    h.ledgerBytes = h.storeBytes = 1234;
    h.requests = [chunkRequest('a chunk sent out of order', { at: 0, status: 201 })];
    h.store = [object('w/m1/chunk-a', { [`${NUMBER}/0`]: 80_000 }, 100_000)];
    h.providerLogs = [{ provider: 'speech', calls: [call(1), call(2)] }];
    h.work = {
      done: { minutes: 1, completedMeetings: 1, acceptedAudioSeconds: 13, botRecordings: 1 },
      floors: { completedMeetings: 1, acceptedAudioSeconds: 10, botRecordings: 1 },
    };
    assert.deepEqual(checkHistory(h), []);
  });

  void it('V1: a lost sample is reported', () => {
    const m = goodMeeting();
    m.segments[1] = { startMs: 5000, endMs: 7500, text: w(1, 39_999) };
    const v = checkHistory(withMeeting(m));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V1'],
    );
    assert.match(v[0]!.detail, /mark 1: 1 of 64000 samples lost/);
  });

  void it('W8: a two-track meeting’s words under their track’s speaker pass, side by side in time; a word under the wrong track, or a speaker no source gave, is reported', () => {
    const you = { name: 'You', source: 'track' };
    const others = { name: 'Others', source: 'track' };
    const two = (): MeetingObservation & { segments: NonNullable<MeetingObservation['segments']> } => ({
      ...goodMeeting(),
      tracks: true,
      accepted: new Map([
        [0, 80_000],
        [1, 64_000],
        [8, 48_000],
        [9, 32_000],
      ]),
      segments: [
        { startMs: 0, endMs: 5000, text: w(0, 80_000, 1), speaker: you },
        { startMs: 200, endMs: 3200, text: w(8, 48_000, 2), speaker: others },
        { startMs: 3200, endMs: 5200, text: w(9, 32_000, 2), speaker: others },
        { startMs: 5000, endMs: 9000, text: w(1, 64_000, 3), speaker: you },
      ],
    });
    assert.deepEqual(checkHistory(withMeeting(two())), []);
    const swapped = two();
    swapped.segments[1]!.speaker = you;
    assert.ok(
      checkHistory(withMeeting(swapped)).some((v) => v.invariant === 'W8' && /Others/.test(v.detail)),
    );
    const none = two();
    none.segments[3]!.speaker = null;
    assert.ok(checkHistory(withMeeting(none)).some((v) => v.invariant === 'W8'));
    const invented = goodMeeting();
    invented.segments[0]!.speaker = { name: 'Channel 1', source: 'channel' };
    assert.ok(
      checkHistory(withMeeting(invented)).some((v) => v.invariant === 'W8' && /no source/.test(v.detail)),
    );
    // A bot meeting: each mark's words under the participant who said it, or none (not imported).
    const bot = (): MeetingObservation & { segments: NonNullable<MeetingObservation['segments']> } => ({
      ...goodMeeting(),
      kind: 'bot',
      speakerOf: { 0: 'Ann', 1: 'Bob', 2: 'Bob' },
    });
    const ann = { name: 'Ann', source: 'participant' };
    const bob = { name: 'Bob', source: 'participant' };
    const named = bot();
    named.segments[0]!.speaker = ann;
    named.segments[1]!.speaker = bob;
    assert.deepEqual(checkHistory(withMeeting(named)), []);
    const wrong = bot();
    wrong.segments[1]!.speaker = ann;
    assert.ok(checkHistory(withMeeting(wrong)).some((v) => v.invariant === 'W8' && /Bob/.test(v.detail)));
    // Each track's own marks are still checked for order.
    const disordered = two();
    disordered.segments[2]!.startMs = 100;
    disordered.segments[1]!.startMs = 3300;
    assert.ok(checkHistory(withMeeting(disordered)).some((v) => /out of order/.test(v.detail)));
  });

  void it('V1: samples transcribed twice (by two recognitions) are reported', () => {
    const m = goodMeeting();
    m.segments.push({ startMs: 9000, endMs: 9500, text: w(2, 70_000, 3) });
    assert.ok(checkHistory(withMeeting(m)).some((v) => v.invariant === 'V1' && /twice/.test(v.detail)));
  });

  void it('V1: a chunk placed out of order, and a chunk never sent, are reported', () => {
    const m = goodMeeting();
    m.segments = [
      { startMs: 0, text: w(1, 64_000) },
      { startMs: 4000, text: `${w(0, 80_000, 2)} ${w(2, 70_000, 2)}` },
    ];
    assert.ok(checkHistory(withMeeting(m)).some((v) => /out of order/.test(v.detail)));
    const n = goodMeeting();
    n.segments.push({ startMs: 9000, text: w(7, 10, 5) });
    assert.ok(checkHistory(withMeeting(n)).some((v) => /never sent/.test(v.detail)));
  });

  void it('V1: words that are not the meeting’s own audio are reported (another meeting’s, a tone, noise, any other word)', () => {
    for (const foreign of [w(0, 10, 9, NUMBER + 1), 't0x320k9', 'n320k9', 'hello']) {
      const m = goodMeeting();
      m.segments.push({ startMs: 9500, text: foreign });
      const v = checkHistory(withMeeting(m));
      assert.deepEqual(
        v.map((x) => x.invariant),
        ['V1'],
        foreign,
      );
      assert.match(v[0]!.detail, /words not from its audio/, foreign);
    }
  });

  void it('V1: a chunk sent without an answer may be in the transcript once, or not at all, but not twice (found by the soak)', () => {
    const once = goodMeeting();
    once.unanswered = new Map([[3, 10_000]]);
    once.segments.push({ startMs: 9000, text: w(3, 10_000, 4) });
    assert.deepEqual(checkHistory(withMeeting(once)), []);
    const missing = goodMeeting();
    missing.unanswered = new Map([[3, 10_000]]);
    assert.deepEqual(checkHistory(withMeeting(missing)), [], 'its client never heard it was stored');
    const twice = goodMeeting();
    twice.unanswered = new Map([[3, 10_000]]);
    twice.segments.push({ startMs: 9000, text: w(3, 10_000, 4) }, { startMs: 9500, text: w(3, 10_000, 5) });
    assert.ok(checkHistory(withMeeting(twice)).some((v) => /unanswered.*twice/.test(v.detail)));
  });

  void it('V1: a lossy recording is read as tones, each stretch within the tolerance; a lost window is not', () => {
    const mp3: MeetingObservation = {
      ...goodMeeting(),
      kind: 'upload',
      lossy: true,
      accepted: new Map([
        [0, 64_000],
        [1, 128_000],
      ]),
      segments: [
        { startMs: 0, text: 't0x63500k1' },
        { startMs: 3970, text: 't1x128400k1 n300k1' },
      ],
    };
    assert.deepEqual(invariantsOf(withMeeting(mp3)), []);
    // An 8 s window of tone 1 lost.
    const lost = { ...mp3, segments: [mp3.segments![0]!, { startMs: 3970, text: 't1x0k1' }] };
    assert.deepEqual(invariantsOf(withMeeting(lost)), ['V1']);
    // A stray block of tone 1 at the start (a codec's smear) is no stretch out of order; a real one is.
    const smear = { ...mp3, segments: [{ startMs: 0, text: 't1x320k1' }, ...mp3.segments!] };
    assert.deepEqual(invariantsOf(withMeeting(smear)), []);
    const swapped = { ...mp3, segments: [...mp3.segments!].reverse().map((s, i) => ({ ...s, startMs: i })) };
    assert.ok(checkHistory(withMeeting(swapped)).some((v) => /out of order/.test(v.detail)));
  });

  void it('V1: the recogniser reads exact marks per sample, and tones within a block', () => {
    const runs = readAudio(
      markedSamples(NUMBER, [
        { mark: 0, samples: 1001 },
        { mark: 1, samples: 3 },
      ]).subarray(1),
    );
    assert.deepEqual(
      runs.map((r) => (r.kind === 'exact' ? [r.meeting, r.mark, r.samples] : r.kind)),
      [
        [NUMBER, 0, 1000],
        [NUMBER, 1, 3],
      ],
    );
    const tones = readAudio(
      toneSamples([
        { mark: 2, samples: 16_000 },
        { mark: 5, samples: 8_000 },
      ]),
    );
    const got = new Map(tones.map((r) => [r.kind === 'tone' ? r.mark : -1, r.samples]));
    assert.ok(Math.abs((got.get(2) ?? 0) - 16_000) <= 320 && Math.abs((got.get(5) ?? 0) - 8_000) <= 320);
  });

  void it('V2: a meeting left processing, and a failure without a reason, are reported', () => {
    const m = goodMeeting();
    m.status = 'processing';
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V2']);
    const f = goodMeeting();
    f.status = 'failed';
    assert.deepEqual(
      invariantsOf(withMeeting(f)),
      ['V2', 'V2', 'V1'],
      'no reason; a good meeting failed; its audio lost',
    );
    const bad = { ...goodMeeting(), expectFailure: true };
    assert.deepEqual(invariantsOf(withMeeting(bad)), ['V2'], 'a bad file that completed');
  });

  void it('V2: a good meeting that ends failed, even with a reason (reclaim_cap_exceeded), is a failed good meeting and has lost its accepted audio (V1); one its client canceled is neither', () => {
    const failed = { ...goodMeeting(), status: 'failed', failureCode: 'reclaim_cap_exceeded', segments: [] };
    const v = checkHistory(withMeeting(failed));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V2', 'V1'],
    );
    assert.match(
      v[1]!.detail,
      /3 accepted marks are in no transcript: it ended failed \(reclaim_cap_exceeded\)/,
    );
    assert.deepEqual(invariantsOf(withMeeting({ ...failed, canceled: true })), []);
  });

  void it('V2: a good lossy recording must complete', () => {
    const mp3 = { ...goodMeeting(), kind: 'upload' as const, lossy: true, segments: [] };
    assert.deepEqual(
      invariantsOf(withMeeting({ ...mp3, status: 'failed', failureCode: 'audio.undecodable' })),
      ['V2', 'V1'],
    );
    assert.deepEqual(
      invariantsOf(
        withMeeting({ ...mp3, status: 'failed', failureCode: 'meeting.canceled', canceled: true }),
      ),
      [],
    );
  });

  void it('V2: a meeting no client was answered with (a create made twice) is reported', () => {
    const h = { ...emptyHistory(), unknownMeetings: ['m9'] };
    assert.deepEqual(invariantsOf(h), ['V2']);
  });

  void it('V3: a job left running after quiescence is reported', () => {
    const h = { ...emptyHistory(), stuck: { 'running jobs': 1, 'locked transport jobs': 0 } };
    assert.deepEqual(invariantsOf(h), ['V3']);
  });

  void it('V3: an end event that never reached a subscribed endpoint is reported', () => {
    const h = withMeeting(goodMeeting());
    h.webhooks.endpoints.push({ name: 'all', events: [] }, { name: 'failures', events: ['meeting.failed'] });
    assert.deepEqual(invariantsOf(h), ['V3']);
    h.webhooks.receipts.push({
      endpoint: 'all',
      id: 'e',
      type: 'meeting.completed',
      meetingId: 'm1',
      revision: null,
    });
    assert.deepEqual(invariantsOf(h), []);
  });

  void it('V4: audio left in the store after quiescence is reported, for a deleted meeting too, and named by its content', () => {
    const h = withMeeting(goodMeeting());
    h.store = [object('w/m1/chunk-a', { [`${NUMBER}/0`]: 80_000 }, null)];
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V4'],
    );
    assert.match(v[0]!.detail, /audio of meeting m1/);
    const d = withMeeting({ ...goodMeeting(), deleted: true, status: 'deleted' });
    d.store = [{ ...object('w/m1/recording-b', {}, null), content: 'unknown' }];
    assert.deepEqual(invariantsOf(d), ['V4']);
  });

  void it('V4: audio that left the store before the recognition of its words answered is reported, even when the transcript ends whole', () => {
    const h = withMeeting(goodMeeting());
    h.providerLogs = [
      { provider: 'speech', calls: [call(1, { answeredAt: 500 }), call(2, { answeredAt: 900 })] },
    ];
    // Mark 1 is in recognitions 1 and 2; the last object holding it left at 700.
    h.store = [
      object('w/m1/chunk-1', { [`${NUMBER}/1`]: 64_000 }, 600),
      object('w/m1/chunk-1-again', { [`${NUMBER}/1`]: 64_000 }, 700),
    ];
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V4'],
    );
    assert.match(v[0]!.detail, /mark 1: its audio left the store before recognition 2 answered/);
    h.store[1]!.goneAt = 1000;
    assert.deepEqual(checkHistory(h), [], 'its last copy stayed until both had answered');
  });

  void it('V4: audio that left the store with words never recognized is reported', () => {
    const m = goodMeeting();
    m.segments = m.segments.slice(0, 1);
    const h = withMeeting(m);
    h.store = [object('w/m1/chunk-2', { [`${NUMBER}/2`]: 70_000 }, 700)];
    assert.ok(
      checkHistory(h).some(
        (v) => v.invariant === 'V4' && /70000 of 70000 samples never recognized/.test(v.detail),
      ),
    );
  });

  void it('V5: a twin bot, a commit under a stale token and a webhook event delivered under two ids are reported', () => {
    const h = emptyHistory();
    h.effects.botsPerRecording.set('r1', 2);
    h.effects.staleCommits.push('a2');
    // One meeting's completion arrived at an endpoint under two event ids: it was announced twice.
    const done = { endpoint: 'all', type: 'meeting.completed', meetingId: 'm1', revision: null };
    h.webhooks.receipts.push({ ...done, id: 'ev1' }, { ...done, id: 'ev1' }, { ...done, id: 'ev2' });
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V5', 'V5', 'V5'],
    );
    assert.ok(v.some((x) => /bots for recording r1/.test(x.subject)));
    assert.ok(v.some((x) => /webhook all meeting.completed m1/.test(x.subject)));
  });

  void it('V5: minutes written twice for one transcript revision are reported; a retried delivery and each regeneration are not', () => {
    const h = withMeeting({ ...goodMeeting(), regenerations: 1 });
    const ready = (id: string, revision = 1) => ({
      endpoint: 'all',
      id,
      type: 'minutes.ready',
      meetingId: 'm1',
      revision,
    });
    h.webhooks.endpoints.push({ name: 'all', events: ['minutes.ready'] });
    h.webhooks.receipts.push(ready('ev1'), ready('ev1'), ready('ev2'), ready('ev9', 2));
    assert.deepEqual(invariantsOf(h), []);
    h.webhooks.receipts.push(ready('ev3'));
    assert.deepEqual(invariantsOf(h), ['V5']);
  });

  void it('V5: one recognition’s words committed twice (in two windows) are reported', () => {
    const m = goodMeeting();
    // Recognition 2's words again, in a second window over the same time.
    m.segments.push({ startMs: 7500, endMs: 9000, text: w(2, 70_000, 2) });
    const v = checkHistory(withMeeting(m));
    assert.ok(v.some((x) => x.invariant === 'V5' && /one recognition's words appear twice/.test(x.detail)));
  });

  void it('V5: two windows overlapping in time (a stretch transcribed twice) are reported', () => {
    const m = goodMeeting();
    // Two recognitions of stretches whose times overlap by a second.
    m.segments = [
      { startMs: 0, endMs: 5000, text: w(0, 80_000, 1) },
      { startMs: 4000, endMs: 9000, text: `${w(1, 64_000, 2)} ${w(2, 70_000, 2)}` },
    ];
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V5']);
  });

  void it('V6: more calls than the limit within one window are reported', () => {
    const h = emptyHistory();
    h.providerCalls.push({ endpoint: 'create_bot', at: [0, 300, 600, 900], limit: 3, windowMs: 1000 });
    assert.deepEqual(invariantsOf(h), ['V6']);
  });

  void it('V6: a request sent again before the Retry-After of its 429 ran out is reported; after it, or another request, is not', () => {
    const h = emptyHistory();
    const limited = call(1, { outcome: 'limited', retryAfterMs: 2000, answeredAt: 1000 });
    h.providerLogs = [
      {
        provider: 'speech',
        calls: [limited, call(2, { arrivedAt: 3100 }), call(3, { arrivedAt: 1500, identity: 'audio-b' })],
      },
    ];
    assert.deepEqual(invariantsOf(h), []);
    h.providerLogs[0]!.calls.push(call(4, { arrivedAt: 2500 }));
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V6'],
    );
    assert.match(v[0]!.detail, /call 4 500 ms early/);
    // A worker killed (or stopped) since the refusal may be the one that heard the Retry-After.
    h.disruptions = [2000];
    assert.deepEqual(invariantsOf(h), []);
  });

  void it('V7: a ledger that differs from the store, or cannot be read, is reported', () => {
    assert.deepEqual(invariantsOf({ ...emptyHistory(), ledgerBytes: 10, storeBytes: 0 }), ['V7']);
    assert.deepEqual(invariantsOf({ ...emptyHistory(), ledgerBytes: null, storeBytes: 0 }), ['V7']);
  });

  void it('V8: a process that exited on its own is reported', () => {
    const h = emptyHistory();
    h.unexpectedExits.push({ name: 'worker-2', code: 1, signal: null, tail: 'ECONNREFUSED' });
    assert.deepEqual(invariantsOf(h), ['V8']);
  });

  void it('V9: a late chunk refused with 409 is a loss', () => {
    const h = emptyHistory();
    h.requests = [
      chunkRequest('a chunk sent after End without a count', {
        at: 0,
        status: 409,
        code: 'chunk.after_end',
      }),
    ];
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V9'],
    );
    assert.match(v[0]!.detail, /refused with 409 chunk.after_end/);
  });

  void it('V9: a retryable refusal (429, 503, no answer, L21’s too-far-ahead 409 with Retry-After) counts only if its retry is then accepted', () => {
    const ahead = { at: 0, status: 409, code: 'chunk.too_far_ahead', retryAfterS: 5 };
    const h = emptyHistory();
    h.requests = [
      chunkRequest('a chunk', { at: 0, status: 429, retryAfterS: 1 }, { at: 1, status: null }, ahead, {
        at: 9,
        status: 201,
      }),
    ];
    assert.deepEqual(invariantsOf(h), []);
    h.requests = [chunkRequest('a chunk', { at: 0, status: 503 }, ahead)];
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V9'],
    );
    assert.match(v[0]!.detail, /never accepted \(2 tries/);
  });

  void it('V9: an upload of an accepted format refused is a loss; a bad file refused, or a request the promise does not cover, is not', () => {
    const upload = (promised: string | null, ...answers: RequestRecord['answers']): RequestRecord => ({
      kind: 'upload',
      meetingId: 'm1',
      promised,
      sentAt: 0,
      answers,
    });
    const h = emptyHistory();
    h.requests = [
      upload(null, { at: 0, status: 415, code: 'recording.unsupported_type' }),
      { kind: 'end', meetingId: 'm1', promised: null, sentAt: 0, answers: [{ at: 0, status: 409 }] },
    ];
    assert.deepEqual(invariantsOf(h), []);
    h.requests.push(
      upload('an upload of audio/ogg', { at: 0, status: 415, code: 'recording.unsupported_type' }),
    );
    assert.deepEqual(invariantsOf(h), ['V9']);
  });

  void it('V9: an upload answered 409 recording.already_stored after a try with no answer was accepted by that try; without one, it was refused', () => {
    const stored = { at: 5, status: 409, code: 'recording.already_stored' };
    const r = (...answers: RequestRecord['answers']): RequestRecord => ({
      kind: 'upload',
      meetingId: 'm1',
      promised: 'an upload of audio/wav',
      sentAt: 0,
      answers,
    });
    assert.equal(accepted(r({ at: 0, status: null }, stored)), true);
    assert.equal(accepted(r({ at: 0, status: 502 }, stored)), true);
    assert.equal(accepted(r(stored)), false);
    assert.equal(accepted(r({ at: 0, status: 202 })), true);
  });

  void it('V13: a window that waited, due, behind more of another workspace’s windows than the bound is reported; a wait a fault touched is not judged', () => {
    const wait = (job: string, dueAt: number, claimedAt: number, noisyAhead: number, ownAhead = 0) => ({
      job,
      live: false,
      dueAt,
      claimedAt,
      noisyAhead,
      ownAhead,
    });
    const fair = (faultSpans: Array<[number, number]>) => ({
      ...emptyHistory(),
      fairWaits: {
        slots: 6,
        noisyWindows: 80,
        faultSpans,
        waits: [wait('fair', 1_000, 9_000, 14), wait('behind', 10_000, 60_000, 40)],
      },
    });
    const found = checkHistory(fair([]));
    assert.deepEqual(
      found.map((v) => [v.invariant, v.subject]),
      [['V13', 'window job behind']],
      'the wait behind 40 windows, past the bound of 14 for six slots; 14 is within it',
    );
    assert.match(
      found[0]!.detail,
      /40 of the noisy workspace’s windows .* 50 s, due, beside 0 of its own \(at most 14\)/,
    );
    // A kill in the middle of the long wait, or one just before it fell due, takes it out of judgement.
    assert.deepEqual(invariantsOf(fair([[30_000, 30_000]])), []);
    assert.deepEqual(invariantsOf(fair([[8_500, 8_500]])), []);
    // A fault long before (or after) it does not.
    assert.deepEqual(invariantsOf(fair([[2_000, 2_000]])), ['V13']);
    assert.deepEqual(invariantsOf(fair([[61_000, 70_000]])), ['V13']);
    // Behind 30 of its own workspace's windows, 40 of theirs is the rounds alternating: fair.
    const ownQueue = fair([]);
    ownQueue.fairWaits.waits = [wait('own queue', 10_000, 60_000, 40, 30)];
    assert.deepEqual(invariantsOf(ownQueue), []);
    // A noisy tenant whose backlog never ran leaves the check judging nothing: that is reported.
    const idle = fair([]);
    idle.fairWaits.noisyWindows = 0;
    assert.deepEqual(
      checkHistory(idle).map((v) => v.subject),
      ['noisy tenant', 'window job behind'],
    );
  });

  void it('V10: a run below any of its floors is reported, per minute of faults', () => {
    const h = emptyHistory();
    const floors = { completedMeetings: 10, acceptedAudioSeconds: 300, botRecordings: 1 };
    h.work = {
      done: { minutes: 2, completedMeetings: 20, acceptedAudioSeconds: 600, botRecordings: 2 },
      floors,
    };
    assert.deepEqual(invariantsOf(h), []);
    for (const short of [{ completedMeetings: 19 }, { acceptedAudioSeconds: 599 }, { botRecordings: 1 }]) {
      h.work = { done: { ...h.work.done, ...short }, floors };
      const v = checkHistory(h);
      assert.deepEqual(
        v.map((x) => x.invariant),
        ['V10'],
        JSON.stringify(short),
      );
      h.work.done = { minutes: 2, completedMeetings: 20, acceptedAudioSeconds: 600, botRecordings: 2 };
    }
  });

  void it('V10: the work of a run counts completed meetings, accepted audio of meetings kept, and bot recordings that reached a transcript', () => {
    const bot = { ...goodMeeting('b1'), kind: 'bot' as const, accepted: new Map([[0, 32_000]]) };
    const deleted = { ...goodMeeting('d1'), deleted: true, status: 'deleted' };
    const failedBot = { ...bot, id: 'b2', status: 'failed' };
    assert.deepEqual(workOf({ meetings: [goodMeeting(), bot, deleted, failedBot] }, 2), {
      minutes: 2,
      completedMeetings: 2,
      acceptedAudioSeconds: (214_000 + 32_000 + 32_000) / 16_000,
      botRecordings: 1,
    });
  });

  void it('V10: a run draws every scenario before any at random, so a short run still has bots and uploads', () => {
    for (const seed of [1, 2, 3]) {
      const s = drawScenarios(24, new Rng(seed));
      assert.equal(s.length, 24);
      for (const sc of SCENARIOS) assert.ok(s.includes(sc), `seed ${seed}: ${sc}`);
      assert.ok(s.filter((x) => x === 'bot').length >= 2, `seed ${seed}: two bots`);
    }
  });

  void it('V11: a meeting whose client never deleted it but the API no longer knows is a loss, never a deletion', () => {
    const lost = { ...goodMeeting(), status: 'lost', segments: null };
    const v = checkHistory(withMeeting(lost));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V11', 'V1'],
    );
    assert.match(v[0]!.detail, /never deleted it, but the API answers 404/);
  });

  void it('V11: a transcript that cannot be read is reported', () => {
    const m = { ...goodMeeting(), segments: null, transcriptError: '500: boom' };
    const v = checkHistory(withMeeting(m));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V11'],
    );
    assert.match(v[0]!.detail, /500: boom/);
  });

  void it('V11: a meeting counts as deleted only when its client’s DELETE was answered 2xx, or 404 after a try that may have done it', () => {
    assert.equal(deletedBy([{ at: 0, status: 204 }]), true);
    assert.equal(
      deletedBy([
        { at: 0, status: null },
        { at: 1, status: 404 },
      ]),
      true,
    );
    assert.equal(
      deletedBy([
        { at: 0, status: 503 },
        { at: 1, status: 404 },
      ]),
      true,
    );
    assert.equal(
      deletedBy([{ at: 0, status: 404 }]),
      false,
      'nothing before could have deleted it: it was lost',
    );
    assert.equal(deletedBy([{ at: 0, status: null }]), false);
  });

  void it('V12: a plant names the invariant that must catch it, and only a violation of that invariant counts as caught', () => {
    const patch =
      'Invariant: V9\nWhat: refuse late chunks\nMinutes: 0.25\n\ndiff --git a/src/x.ts b/src/x.ts\n';
    const p = parsePlant('refuse-late-chunks', patch);
    assert.deepEqual(p, {
      name: 'refuse-late-chunks',
      invariant: 'V9',
      expect: null,
      what: 'refuse late chunks',
      seed: 1401,
      minutes: 0.25,
    });
    assert.equal(
      parsePlant('x', 'Invariant: V6\nExpect: speech provider\ndiff --git a/a b/a\n').expect,
      'speech provider',
    );
    assert.throws(
      () => parsePlant('x', 'What: no invariant\ndiff --git a/a b/a\n'),
      /must name the invariant/,
    );
    assert.throws(() => parsePlant('x', 'Invariant: V14\ndiff --git a/a b/a\n'), /must name the invariant/);
    assert.throws(() => parsePlant('x', 'Invariant: V12\ndiff --git a/a b/a\n'), /must name the invariant/);
    assert.equal(parsePlant('x', 'Invariant: V13\ndiff --git a/a b/a\n').invariant, 'V13');
    assert.throws(() => parsePlant('x', 'Invariant: V1\n'), /no patch/);
    assert.equal(plantCaught('V9', [{ invariant: 'V1' }, { invariant: 'V9' }]), true);
    assert.equal(
      plantCaught('V9', [{ invariant: 'V1' }, { invariant: 'V2' }]),
      false,
      'caught, but not by its invariant',
    );
    assert.equal(plantCaught('V9', []), false);
    // A plant whose invariant can also fire for another reason names what its own violation says.
    const chat = [{ invariant: 'V6' as const, subject: 'chat provider', detail: '2 requests sent again…' }];
    assert.equal(plantCaught('V6', chat, 'speech provider'), false, 'the chat provider’s, not the plant’s');
    assert.equal(
      plantCaught('V6', [...chat, { ...chat[0]!, subject: 'speech provider' }], 'speech provider'),
      true,
    );
  });
});
