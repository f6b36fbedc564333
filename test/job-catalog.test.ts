import assert from 'node:assert/strict';
import { it } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { AppError } from '../src/domain/errors.ts';
import { JobKind, QUEUE_OF } from '../src/domain/status.ts';
import { JOB_CATALOG, jobSpec, payloadOf, type JobPayloads } from '../src/jobs/catalog.ts';

const config = loadConfig({
  VERBATIM_TRANSCRIBE_MAX_ERRORS: '7',
  VERBATIM_MAX_RECLAIMS: '4',
  VERBATIM_CLOSEOUT_MAX_ERRORS: '9',
});

const samples: { [K in JobKind]: JobPayloads[K] } = {
  [JobKind.splitRecording]: { meetingId: 'm1' },
  [JobKind.transcribeWindow]: { meetingId: 'm1', windowId: 'w1', windowIndex: 3 },
  [JobKind.closeOutMeeting]: { meetingId: 'm1' },
  [JobKind.writeMinutes]: { meetingId: 'm1' },
  [JobKind.importBotRecording]: { recordingId: 'r1' },
  [JobKind.scheduleBot]: { recordingId: 'r1', workspaceId: 'ws' },
  [JobKind.deleteBot]: { recordingId: 'r1', botId: null },
  [JobKind.leaveBot]: { recordingId: 'r1', botId: 'b1' },
  [JobKind.repairTimeline]: { meetingId: 'm1' },
  [JobKind.importBotSpeakers]: { recordingId: 'r1', meetingId: 'm1' },
};

void it('J1/J6: every job kind has one catalog entry whose payload survives the round trip through a row', () => {
  for (const kind of Object.values(JobKind)) {
    const rules = JOB_CATALOG[kind];
    assert.equal(rules.queue, QUEUE_OF[kind], `${kind} runs on its queue`);
    const spec = jobSpec(config, kind, samples[kind], { workspaceId: 'ws' });
    assert.equal(spec.kind, kind);
    assert.deepEqual(
      payloadOf({ kind, payload: JSON.parse(JSON.stringify(spec.payload)) as Record<string, unknown> }, kind),
      samples[kind],
    );
  }
});

void it('J6/J10: budgets, subjects and dedupe keys come from the catalog, not from the call site', () => {
  const window = jobSpec(config, JobKind.transcribeWindow, samples[JobKind.transcribeWindow], {
    workspaceId: 'ws',
  });
  assert.deepEqual(
    [window.subjectType, window.subjectId, window.meetingId, window.maxErrors, window.maxReclaims],
    ['window', 'w1', 'm1', 7, 4],
  );
  assert.equal(window.dedupeKey, undefined, 'each window job is its own');
  const closeOut = jobSpec(
    config,
    JobKind.closeOutMeeting,
    { meetingId: 'm1' },
    { workspaceId: 'ws', delayMs: 5 },
  );
  assert.deepEqual([closeOut.maxErrors, closeOut.dedupeKey, closeOut.delayMs], [9, 'close-out:m1', 5]);
  const minutes = (variant: string) =>
    jobSpec(config, JobKind.writeMinutes, { meetingId: 'm1' }, { workspaceId: 'ws', dedupeVariant: variant })
      .dedupeKey;
  assert.equal(minutes('a'), minutes('a'), 'a redelivered reason is one job');
  assert.notEqual(minutes('a'), minutes('b'), 'a new reason is a new job');
  const del = jobSpec(config, JobKind.deleteBot, { recordingId: 'r1', botId: null }, { workspaceId: 'ws' });
  assert.deepEqual([del.subjectType, del.subjectId, del.meetingId], ['bot_recording', 'r1', null]);
  assert.equal(del.dedupeKey, 'delete-bot:recording:r1');
  const schedule = jobSpec(config, JobKind.scheduleBot, samples[JobKind.scheduleBot], { workspaceId: 'ws' });
  assert.ok(schedule.maxErrors > config.transcribeMaxErrors, 'provider calls get more tries than windows');
});

void it('J6: a payload that does not fit its kind is refused as permanent, naming the field', () => {
  const refused = (fn: () => unknown, field: string) =>
    assert.throws(fn, (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.kind, 'permanent');
      assert.match(err.message, new RegExp(field));
      return true;
    });
  refused(
    () =>
      payloadOf(
        { kind: JobKind.transcribeWindow, payload: { meetingId: 'm', windowId: 'w' } },
        JobKind.transcribeWindow,
      ),
    'windowIndex',
  );
  refused(
    () => payloadOf({ kind: JobKind.splitRecording, payload: { meetingId: 42 } }, JobKind.splitRecording),
    'meetingId',
  );
  refused(
    () => payloadOf({ kind: JobKind.leaveBot, payload: { recordingId: 'r' } }, JobKind.leaveBot),
    'botId',
  );
  assert.throws(
    () => payloadOf({ kind: JobKind.splitRecording, payload: { meetingId: 'm' } }, JobKind.closeOutMeeting),
    /split-recording job was given to the close-out-meeting handler/,
  );
});
