// The close-out gate (issue 34, scope 3): the decision is one pure function; the window hot path's
// commit statement reads its facts under the meeting's lock and the close-out starts after it when
// they let it, so of many last windows committing at once exactly one starts the close-out, and a
// start lost to a crash between the two is the sweep's.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import { decideCloseOutStart } from '../src/domain/close-out-gate.ts';
import { JobKind } from '../src/domain/status.ts';
import { createJob } from '../src/jobs/catalog.ts';
import { startCloseOutAfterCommit, startLostCloseOuts } from '../src/meetings/close-out-start.ts';
import { completeWindowAttemptStatement } from '../src/meetings/window-rows.ts';
import { startHarness } from './support/harness.ts';

void it('J19/J20: a processing meeting starts its close-out once no window is in flight and its split is not cutting; a held window does not hold it back', () => {
  const settled = { status: 'processing', source: 'upload', windowsCut: true } as const;
  assert.deepEqual(decideCloseOutStart({ ...settled, inFlight: false, pending: false }), {
    start: true,
    reason: 'every window settled',
  });
  assert.deepEqual(decideCloseOutStart({ ...settled, inFlight: false, pending: true }), {
    start: true,
    reason: 'every window settled or held',
  });
  assert.equal(decideCloseOutStart({ ...settled, inFlight: true, pending: true }).start, false);
  for (const status of ['created', 'recording', 'finalizing', 'complete', 'failed'] as const) {
    assert.equal(decideCloseOutStart({ status }).start, false, status);
  }
  // J19: an upload's or a bot's split still cutting windows holds it back, until it has cut the last.
  for (const source of ['upload', 'bot'] as const) {
    const cutting = { status: 'processing', source, windowsCut: false, splitActive: true } as const;
    assert.deepEqual(decideCloseOutStart(cutting), { start: false, because: 'windows still being cut' });
    assert.equal(decideCloseOutStart({ ...cutting, splitActive: false }).start, true);
    assert.equal(decideCloseOutStart({ ...cutting, windowsCut: true }).start, true);
  }
});

void it('J5/J19: of the last windows of a meeting committed at once through the hot path, exactly one starts the close-out, never none', async () => {
  const h = await startHarness();
  try {
    const deps = h.app.deps;
    for (let round = 0; round < 8; round++) {
      const meetingId = randomUUID();
      await deps.db
        .insertInto('meetings')
        .values({
          id: meetingId,
          workspace_id: h.workspaceId,
          source: 'upload',
          title: `round ${round}`,
          status: 'processing',
          window_ms: 1000,
          windows_cut_at: new Date(),
        })
        .execute();
      const handles = [];
      for (let index = 0; index < 6; index++) {
        const windowId = randomUUID();
        await deps.db
          .insertInto('windows')
          .values({
            id: windowId,
            workspace_id: h.workspaceId,
            meeting_id: meetingId,
            index,
            start_ms: index * 1000,
            end_ms: (index + 1) * 1000,
            status: 'pending',
          })
          .execute();
        const job = await deps.db
          .transaction()
          .execute((trx) =>
            createJob(
              deps,
              trx,
              JobKind.transcribeWindow,
              { meetingId, windowId, windowIndex: index },
              { workspaceId: h.workspaceId },
              'test',
            ),
          );
        const claimed = await deps.jobs.claimJob(job!.id, `owner-${index}`);
        assert.ok(claimed);
        handles.push(claimed.handle);
      }
      const outcomes = await Promise.all(
        handles.map((handle, i) =>
          deps.jobs
            .runFencedStatementAlone(handle, (ids) =>
              completeWindowAttemptStatement(ids, `worker:${i}`, [
                { seq: 0, start_ms: 0, end_ms: 500, text: 'w' },
              ]),
            )
            .then(([row]) => startCloseOutAfterCommit(deps, meetingId, `worker:${i}`, row?.facts ?? null)),
        ),
      );
      assert.deepEqual(
        outcomes.filter((o) => o === 'started'),
        ['started'],
        `round ${round}: ${outcomes.join(', ')}`,
      );
      const meeting = await deps.db
        .selectFrom('meetings')
        .select('status')
        .where('id', '=', meetingId)
        .executeTakeFirstOrThrow();
      assert.equal(meeting.status, 'finalizing');
      const closeOuts = await deps.db
        .selectFrom('jobs')
        .select('id')
        .where('meeting_id', '=', meetingId)
        .where('kind', '=', JobKind.closeOutMeeting)
        .execute();
      assert.equal(closeOuts.length, 1);
      const moves = await deps.db
        .selectFrom('audit_events')
        .select(['from_status', 'to_status', 'reason'])
        .where('subject_id', '=', meetingId)
        .execute();
      assert.deepEqual(moves, [
        { from_status: 'processing', to_status: 'finalizing', reason: 'every window settled' },
      ]);
    }
  } finally {
    await h.close();
  }
});

void it("L19: the window commit says whether its window was marked at its transcript's publication, read after the commit, so the job publishes it without reading the window again", async () => {
  const h = await startHarness();
  try {
    const deps = h.app.deps;
    const meetingId = randomUUID();
    await deps.db
      .insertInto('meetings')
      .values({
        id: meetingId,
        workspace_id: h.workspaceId,
        source: 'upload',
        title: 'published',
        status: 'complete',
        window_ms: 1000,
        windows_cut_at: new Date(),
      })
      .execute();
    const late: Record<string, boolean | undefined> = {};
    for (const [index, marked] of [true, false].entries()) {
      const windowId = randomUUID();
      await deps.db
        .insertInto('windows')
        .values({
          id: windowId,
          workspace_id: h.workspaceId,
          meeting_id: meetingId,
          index,
          start_ms: index * 1000,
          end_ms: (index + 1) * 1000,
          status: 'pending',
          pending_at_publication: marked,
        })
        .execute();
      const job = await deps.db
        .transaction()
        .execute((trx) =>
          createJob(
            deps,
            trx,
            JobKind.transcribeWindow,
            { meetingId, windowId, windowIndex: index },
            { workspaceId: h.workspaceId },
            'test',
          ),
        );
      const claimed = await deps.jobs.claimJob(job!.id, `owner-${index}`);
      assert.ok(claimed);
      const [row] = await deps.jobs.runFencedStatementAlone(claimed.handle, (ids) =>
        completeWindowAttemptStatement(ids, 'worker:test', [{ seq: 0, start_ms: 0, end_ms: 500, text: 'w' }]),
      );
      assert.equal(row?.facts?.status, 'complete');
      late[marked ? 'marked' : 'unmarked'] = row?.facts?.lateWindow;
    }
    assert.deepEqual(late, { marked: true, unmarked: false });
  } finally {
    await h.close();
  }
});

void it('J5: the sweep starts a lost close-out: a processing meeting with every window settled and its windows cut, not one with a window pending or a split still cutting', async () => {
  const h = await startHarness();
  try {
    const deps = h.app.deps;
    const meeting = async (title: string, cut: boolean, windowStatus: 'transcribed' | 'pending' | null) => {
      const id = randomUUID();
      await deps.db
        .insertInto('meetings')
        .values({
          id,
          workspace_id: h.workspaceId,
          source: 'upload',
          title,
          status: 'processing',
          window_ms: 1000,
          windows_cut_at: cut ? new Date() : null,
        })
        .execute();
      if (windowStatus) {
        await deps.db
          .insertInto('windows')
          .values({
            id: randomUUID(),
            workspace_id: h.workspaceId,
            meeting_id: id,
            index: 0,
            start_ms: 0,
            end_ms: 1000,
            status: windowStatus,
          })
          .execute();
      }
      if (!cut) {
        await deps.db
          .transaction()
          .execute((trx) =>
            createJob(
              deps,
              trx,
              JobKind.splitRecording,
              { meetingId: id },
              { workspaceId: h.workspaceId },
              'test',
            ),
          );
      }
      return id;
    };
    const lost = await meeting('lost', true, 'transcribed');
    const pending = await meeting('pending', true, 'pending');
    const cutting = await meeting('cutting', false, 'transcribed');
    assert.equal(await startLostCloseOuts(deps, 'sweep:test'), 1);
    const statuses = await deps.db
      .selectFrom('meetings')
      .select(['title', 'status'])
      .where('id', 'in', [lost, pending, cutting])
      .orderBy('title')
      .execute();
    assert.deepEqual(statuses, [
      { title: 'cutting', status: 'processing' },
      { title: 'lost', status: 'finalizing' },
      { title: 'pending', status: 'processing' },
    ]);
    // Asked again, nothing more starts: the close-out is started once.
    assert.equal(await startLostCloseOuts(deps, 'sweep:test'), 0);
    const closeOuts = await deps.db
      .selectFrom('jobs')
      .select('id')
      .where('meeting_id', '=', lost)
      .where('kind', '=', JobKind.closeOutMeeting)
      .execute();
    assert.equal(closeOuts.length, 1);
  } finally {
    await h.close();
  }
});
