import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkHistory, emptyHistory, type History, type MeetingObservation } from '../sim/oracle.ts';

/** A live meeting of three chunks, all accepted and transcribed once, in order, audio gone. */
function goodMeeting(id = 'm1'): MeetingObservation {
  return {
    id,
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
      { startMs: 0, text: 'c0x80000' },
      { startMs: 5000, text: 'c1x40000' },
      { startMs: 7500, text: 'c1x24000 c2x70000' },
    ],
    audioObjectsLeft: 0,
    deletions: [{ blob: 'b0', at: 100, windowsSettledAt: [50, 90] }],
  };
}

function withMeeting(m: MeetingObservation): History {
  return { ...emptyHistory(), meetings: [m] };
}

const invariantsOf = (h: History) => checkHistory(h).map((v) => v.invariant);

void describe('the simulation oracle on crafted histories', () => {
  void it('V1–V8: a healthy history has no violation', () => {
    const h = withMeeting(goodMeeting());
    h.effects.botsPerRecording.set('r1', 1);
    h.providerCalls.push({ endpoint: 'create_bot', at: [0, 100, 200, 1100], limit: 3, windowMs: 1000 });
    h.ledgerBytes = h.storeBytes = 1234;
    assert.deepEqual(checkHistory(h), []);
  });

  void it('V1: a lost sample is reported', () => {
    const m = goodMeeting();
    m.segments[1] = { startMs: 5000, text: 'c1x39999' };
    const v = checkHistory(withMeeting(m));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V1'],
    );
    assert.match(v[0]!.detail, /mark 1: 1 of 64000 samples lost/);
  });

  void it('V1: a doubled segment is reported (samples twice)', () => {
    const m = goodMeeting();
    m.segments.push({ startMs: 7500, text: 'c2x70000' });
    assert.ok(checkHistory(withMeeting(m)).some((v) => v.invariant === 'V1' && /twice/.test(v.detail)));
  });

  void it('V1: a chunk placed out of order, and a chunk never sent, are reported', () => {
    const m = goodMeeting();
    m.segments = [
      { startMs: 0, text: 'c1x64000' },
      { startMs: 4000, text: 'c0x80000 c2x70000' },
    ];
    assert.ok(checkHistory(withMeeting(m)).some((v) => /out of order/.test(v.detail)));
    const n = goodMeeting();
    n.segments.push({ startMs: 9000, text: 'c7x10' });
    assert.ok(checkHistory(withMeeting(n)).some((v) => /never sent/.test(v.detail)));
  });

  void it('V1: a chunk sent without an answer may be in the transcript once, or not at all, but not twice (found by the soak)', () => {
    const once = goodMeeting();
    once.unanswered = new Map([[3, 10_000]]);
    once.segments.push({ startMs: 9000, text: 'c3x10000' });
    assert.deepEqual(checkHistory(withMeeting(once)), []);
    const missing = goodMeeting();
    missing.unanswered = new Map([[3, 10_000]]);
    assert.deepEqual(checkHistory(withMeeting(missing)), [], 'its client never heard it was stored');
    const twice = goodMeeting();
    twice.unanswered = new Map([[3, 10_000]]);
    twice.segments.push({ startMs: 9000, text: 'c3x10000' }, { startMs: 9500, text: 'c3x10000' });
    assert.ok(checkHistory(withMeeting(twice)).some((v) => /unanswered.*twice/.test(v.detail)));
  });

  void it('V2: a meeting left processing, and a failure without a reason, are reported', () => {
    const m = goodMeeting();
    m.status = 'processing';
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V2']);
    const f = goodMeeting();
    f.status = 'failed';
    assert.deepEqual(invariantsOf(withMeeting(f)), ['V2', 'V1'], 'and its accepted audio is lost');
    const bad = { ...goodMeeting(), expectFailure: true };
    assert.deepEqual(invariantsOf(withMeeting(bad)), ['V2'], 'a bad file that completed');
  });

  void it('V3: a job left running after quiescence is reported', () => {
    const h = { ...emptyHistory(), stuck: { 'running jobs': 1, 'locked transport jobs': 0 } };
    assert.deepEqual(invariantsOf(h), ['V3']);
  });

  void it('V4: audio left after completion is reported, for a deleted meeting too', () => {
    const m = goodMeeting();
    m.audioObjectsLeft = 2;
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V4']);
    const d = { ...goodMeeting(), deleted: true, status: 'processing', audioObjectsLeft: 1 };
    assert.deepEqual(invariantsOf(withMeeting(d)), ['V4']);
  });

  void it('V4: a deletion before its windows settled is reported, even when the transcript ends whole', () => {
    const m = goodMeeting();
    m.deletions = [{ blob: 'b1', at: 100, windowsSettledAt: [50, 120] }];
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V4']);
    m.deletions = [{ blob: 'b1', at: 100, windowsSettledAt: [null] }];
    assert.deepEqual(invariantsOf(withMeeting(m)), ['V4']);
  });

  void it('V5: a twin bot, a commit under a stale token, a doubled segment row and a webhook delivered twice are reported', () => {
    const h = emptyHistory();
    h.effects.botsPerRecording.set('r1', 2);
    h.effects.staleCommits.push('a2');
    h.effects.segmentsPerWindowSeq.set('w1/0', 2);
    // One meeting's completion arrived at an endpoint under two event ids: it was announced twice.
    const done = { endpoint: 'all', type: 'meeting.completed', meetingId: 'm1', revision: null };
    h.webhooks.receipts.push({ ...done, id: 'ev1' }, { ...done, id: 'ev1' }, { ...done, id: 'ev2' });
    const v = checkHistory(h);
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V5', 'V5', 'V5', 'V5'],
    );
    assert.ok(v.some((x) => /bots for recording r1/.test(x.subject)));
  });

  void it('V5: minutes written more often than asked are reported; a retried delivery and each regeneration are not', () => {
    const h = withMeeting({ ...goodMeeting(), regenerations: 1 });
    const ready = (id: string) => ({
      endpoint: 'all',
      id,
      type: 'minutes.ready',
      meetingId: 'm1',
      revision: null,
    });
    h.webhooks.endpoints.push({ name: 'all', events: ['minutes.ready'] });
    h.webhooks.receipts.push(ready('ev1'), ready('ev1'), ready('ev2'));
    assert.deepEqual(invariantsOf(h), []);
    h.webhooks.receipts.push(ready('ev3'));
    assert.deepEqual(invariantsOf(h), ['V5']);
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

  void it('V1: audio a bot recorded is lost when its recording ends failed, or complete with no transcript', () => {
    const heard = new Map([[300, 96_000]]);
    const failed = {
      ...goodMeeting(),
      kind: 'bot' as const,
      accepted: heard,
      status: 'failed',
      failureCode: 'bot.import_failed',
      segments: [],
    };
    assert.deepEqual(invariantsOf(withMeeting(failed)), ['V1']);
    const empty = { ...failed, status: 'complete', failureCode: null };
    assert.deepEqual(invariantsOf(withMeeting(empty)), ['V1']);
    // A bot that never joined heard nothing: its failure with a reason is no loss, and with no
    // meeting no meeting event is due at the tenant's endpoints.
    const never = { ...failed, accepted: new Map(), failureCode: 'bot.never_scheduled', noMeeting: true };
    const h = withMeeting(never);
    h.webhooks.endpoints.push({ name: 'all', events: [] });
    assert.deepEqual(invariantsOf(h), []);
  });

  void it('V1: a good live meeting that ends failed, even with a reason (reclaim_cap_exceeded), has lost its accepted audio; one its client canceled has not', () => {
    const failed = { ...goodMeeting(), status: 'failed', failureCode: 'reclaim_cap_exceeded', segments: [] };
    const v = checkHistory(withMeeting(failed));
    assert.deepEqual(
      v.map((x) => x.invariant),
      ['V1'],
    );
    assert.match(
      v[0]!.detail,
      /3 accepted chunks are in no transcript: it ended failed \(reclaim_cap_exceeded\)/,
    );
    assert.deepEqual(invariantsOf(withMeeting({ ...failed, canceled: true })), []);
  });

  void it('V2: a good recording in a lossy format must complete; its marks are not read (they do not survive coding)', () => {
    const mp3 = {
      ...goodMeeting(),
      kind: 'upload' as const,
      lossy: true,
      segments: [{ startMs: 0, text: 'c401x3 c77x9' }],
    };
    assert.deepEqual(invariantsOf(withMeeting(mp3)), []);
    assert.deepEqual(
      invariantsOf(withMeeting({ ...mp3, status: 'failed', failureCode: 'audio.undecodable' })),
      ['V2'],
    );
    // Canceled with its batch: failing is what was asked for.
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

  void it('V6: more calls than the limit within one window are reported', () => {
    const h = emptyHistory();
    h.providerCalls.push({ endpoint: 'create_bot', at: [0, 300, 600, 900], limit: 3, windowMs: 1000 });
    assert.deepEqual(invariantsOf(h), ['V6']);
  });

  void it('V7: a ledger that differs from the store is reported', () => {
    const h = { ...emptyHistory(), ledgerBytes: 10, storeBytes: 0 };
    assert.deepEqual(invariantsOf(h), ['V7']);
  });

  void it('V8: a process that exited on its own is reported', () => {
    const h = emptyHistory();
    h.unexpectedExits.push({ name: 'worker-2', code: 1, signal: null, tail: 'ECONNREFUSED' });
    assert.deepEqual(invariantsOf(h), ['V8']);
  });
});
