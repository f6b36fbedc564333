import assert from 'node:assert/strict';
import { it } from 'node:test';
import { admitChunk, AHEAD_RETRY_SECONDS, type ChunkAdmissionInput } from '../src/domain/chunk-admission.ts';
import { closeOutStep, MINUTES_BACKSTOP_MARGIN_MS, transcriptWait } from '../src/domain/close-out-plan.ts';
import { AppError } from '../src/domain/errors.ts';

// The decisions of the close-out and of a live chunk's fate, without a database: the I/O layers
// (src/meetings/close-out.ts, src/meetings/live.ts) read the state, ask these, and act.

const CAP = 10 * 60_000;

void it('L4: the close-out settles the transcript first, then waits for minutes, then finishes; a meeting no longer finalizing is left alone', () => {
  const base = {
    status: 'finalizing',
    transcriptPublished: false,
    minutesStatus: 'none',
    minutesWaitedMs: 0,
    minutesWaitCapMs: CAP,
  };
  assert.deepEqual(closeOutStep(base), { step: 'settle-transcript' });
  for (const status of ['complete', 'failed', 'recording', 'processing']) {
    assert.deepEqual(
      closeOutStep({ ...base, status, transcriptPublished: true }),
      { step: 'nothing' },
      status,
    );
  }
  const published = { ...base, transcriptPublished: true, minutesStatus: 'pending' };
  assert.deepEqual(closeOutStep(published), { step: 'wait-for-minutes' });
  assert.deepEqual(closeOutStep({ ...published, minutesWaitedMs: CAP + MINUTES_BACKSTOP_MARGIN_MS - 1 }), {
    step: 'wait-for-minutes',
  });
  assert.deepEqual(closeOutStep({ ...published, minutesWaitedMs: CAP + MINUTES_BACKSTOP_MARGIN_MS }), {
    step: 'close-without-minutes',
  });
  for (const minutesStatus of ['written', 'unavailable', 'failed', 'none']) {
    assert.deepEqual(closeOutStep({ ...published, minutesStatus }), { step: 'finish' }, minutesStatus);
  }
});

void it('L4/L5: only windows still in retry and a repair in progress hold the close-out, and only until the cap', () => {
  // Exhausted and missing windows are not an input: they never make the close-out wait (L5).
  assert.deepEqual(transcriptWait({ windowsInRetry: 0, repairing: false, waitedMs: 0, waitCapMs: CAP }), {
    wait: false,
    capReached: false,
  });
  assert.deepEqual(transcriptWait({ windowsInRetry: 3, repairing: false, waitedMs: 0, waitCapMs: CAP }), {
    wait: true,
    reason: 'waiting for 3 windows in retry',
  });
  assert.deepEqual(
    transcriptWait({ windowsInRetry: 0, repairing: true, waitedMs: CAP - 1, waitCapMs: CAP }),
    {
      wait: true,
      reason: 'waiting for a repair of late audio',
    },
  );
  assert.deepEqual(transcriptWait({ windowsInRetry: 2, repairing: true, waitedMs: CAP, waitCapMs: CAP }), {
    wait: false,
    capReached: true,
  });
  // Nothing to wait for is not a spent cap, however long ago a wait started.
  assert.deepEqual(
    transcriptWait({ windowsInRetry: 0, repairing: false, waitedMs: 10 * CAP, waitCapMs: CAP }),
    {
      wait: false,
      capReached: false,
    },
  );
});

function chunk(
  overrides: Partial<Omit<ChunkAdmissionInput, 'meeting'>> & {
    meeting?: Partial<ChunkAdmissionInput['meeting']>;
  },
) {
  const { meeting, ...rest } = overrides;
  return admitChunk({
    seq: 0,
    format: 'wav',
    highestSeq: -1,
    now: new Date('2026-12-01T12:00:00Z'),
    limits: { lateAudioMs: 7 * 86_400_000, maxSeqAhead: 100 },
    ...rest,
    meeting: {
      id: 'm1',
      chunkFormat: null,
      declaredChunks: null,
      nextSeq: 0,
      endedAt: null,
      ...meeting,
    },
  });
}

function refusal(admission: ReturnType<typeof admitChunk>): { code: string; retryAfter?: number } {
  assert.equal(admission.kind, 'refuse');
  const error = (admission as { error: AppError }).error;
  assert.ok(error instanceof AppError);
  return { code: error.code, ...(error.retryAfterSeconds ? { retryAfter: error.retryAfterSeconds } : {}) };
}

void it('L19: a chunk at or ahead of the frontier is placed; one behind it, whose stretch was reserved, is repaired — before or after End and after completion', () => {
  assert.deepEqual(chunk({ seq: 5, meeting: { nextSeq: 5 } }), { kind: 'place' });
  assert.deepEqual(chunk({ seq: 9, highestSeq: 8, meeting: { nextSeq: 5 } }), { kind: 'place' });
  assert.deepEqual(chunk({ seq: 2, highestSeq: 8, meeting: { nextSeq: 5 } }), { kind: 'repair' });
  assert.deepEqual(chunk({ seq: 2, highestSeq: 8, meeting: { nextSeq: 9, declaredChunks: 9 } }), {
    kind: 'repair',
  });
  const endedAnHourAgo = new Date('2026-12-01T11:00:00Z');
  assert.deepEqual(chunk({ seq: 3, highestSeq: 8, meeting: { nextSeq: 9, endedAt: endedAnHourAgo } }), {
    kind: 'repair',
  });
});

void it('L19/L20/L21: a chunk is refused only past End’s count, past the late-audio bound, too far ahead (retryable) or in another format', () => {
  assert.deepEqual(refusal(chunk({ seq: 9, meeting: { declaredChunks: 9 } })), { code: 'chunk.after_end' });
  assert.deepEqual(chunk({ seq: 8, highestSeq: 3, meeting: { declaredChunks: 9, nextSeq: 4 } }), {
    kind: 'place',
  });
  const endedLongAgo = new Date('2026-11-01T12:00:00Z');
  assert.deepEqual(refusal(chunk({ seq: 3, meeting: { endedAt: endedLongAgo } })), {
    code: 'chunk.too_late',
  });
  assert.deepEqual(refusal(chunk({ seq: 101, highestSeq: 0 })), {
    code: 'chunk.too_far_ahead',
    retryAfter: AHEAD_RETRY_SECONDS,
  });
  assert.deepEqual(chunk({ seq: 100, highestSeq: 0 }), { kind: 'place' });
  // A declared seq is awaited however far ahead of what is stored (L20).
  assert.deepEqual(chunk({ seq: 500, highestSeq: 0, meeting: { declaredChunks: 600 } }), { kind: 'place' });
  assert.deepEqual(refusal(chunk({ format: 'webm', meeting: { chunkFormat: 'wav' } })), {
    code: 'chunk.format_changed',
  });
});
