// F5: a backlogged workspace's recognition yields the processor. A batch job claimed while its
// workspace has more of its lane waiting is backlogged, and the children a flow starts under
// withNiceness (the local recogniser) run at that niceness from their first instruction.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import { runProcess, withNiceness } from '../src/adapters/subprocess.ts';
import { AppError, ErrorKind } from '../src/domain/errors.ts';
import { JobKind } from '../src/domain/status.ts';
import { createJob } from '../src/jobs/catalog.ts';
import { startHarness, type Harness } from './support/harness.ts';

const niceOf = (nice: number) =>
  withNiceness(nice, () =>
    runProcess({
      command: 'sh',
      args: ['-c', 'nice; sh -c nice'],
      timeoutMs: 10_000,
      timeoutError: () => new AppError(ErrorKind.transient, 'test.timeout', 'nice timed out'),
      spawnError: () => new AppError(ErrorKind.permanent, 'test.spawn', 'no sh'),
    }),
  );

void it('F5: a child started under withNiceness runs at that niceness, and so do the processes it starts; outside it, at the normal one', async () => {
  const base = Number((await niceOf(0)).stdout.toString().split('\n')[0]);
  const lowered = (await niceOf(10)).stdout.toString().trim().split('\n').map(Number);
  assert.deepEqual(lowered, [base + 10, base + 10]);
  assert.deepEqual((await niceOf(0)).stdout.toString().trim().split('\n').map(Number), [base, base]);
});

async function windowJob(h: Harness, meetingId: string, index: number): Promise<string> {
  const deps = h.app.deps;
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
  return job!.id;
}

void it('F5: a batch window claimed while two or more of its workspace’s lane wait is backlogged; the last ones, and a live meeting’s windows, are not', async () => {
  const h = await startHarness();
  try {
    const meeting = async (source: 'upload' | 'live') => {
      const id = randomUUID();
      await h.app.deps.db
        .insertInto('meetings')
        .values({
          id,
          workspace_id: h.workspaceId,
          source,
          title: source,
          status: source === 'live' ? 'recording' : 'processing',
          window_ms: 1000,
        })
        .execute();
      return id;
    };
    const upload = await meeting('upload');
    const batch = [];
    for (let i = 0; i < 4; i++) batch.push(await windowJob(h, upload, i));
    const seen = [];
    for (const id of batch) seen.push((await h.app.deps.jobs.claimJob(id, 'w'))?.backlogged);
    // Claimed in order: 3, 2, 1 and 0 of the lane still wait beside each.
    assert.deepEqual(seen, [true, true, false, false]);
    const live = await meeting('live');
    const liveJobs = [];
    for (let i = 0; i < 4; i++) liveJobs.push(await windowJob(h, live, i));
    const claimed = await h.app.deps.jobs.claimJob(liveJobs[0]!, 'w');
    assert.equal(claimed?.backlogged, false, 'a live window is never backlogged');
  } finally {
    await h.close();
  }
});
