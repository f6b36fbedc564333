import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { Checkpoints } from '../src/checkpoints.ts';
import { openDatabase } from '../src/db/connect.ts';
import { PgJobSweeps } from '../src/jobs/job-sweep-store.ts';
import { createLogger } from '../src/log.ts';
import {
  assertNoTokenLeaks,
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
} from './support/harness.ts';

const wav = speechWav(SPEECH);
const enqueueFails = JSON.stringify([
  { at: 'enqueue', action: 'throw', times: 1, message: 'queue connection refused' },
]);

async function splitJob(h: Awaited<ReturnType<typeof startHarness>>) {
  return h.app.database.db
    .selectFrom('jobs')
    .selectAll()
    .where('kind', '=', 'split-recording')
    .executeTakeFirstOrThrow();
}

async function deliveriesOf(
  h: Awaited<ReturnType<typeof startHarness>>,
  deliveryId: string,
): Promise<number> {
  const r = await sql<{
    n: number;
  }>`select count(*)::int as n from graphile_worker.jobs where key = ${deliveryId}`.execute(
    h.app.database.db,
  );
  return r.rows[0]!.n;
}

/** Waits until the job has been due for longer than the rescue's one second. */
async function dueForRescue(h: Awaited<ReturnType<typeof startHarness>>, jobId: string): Promise<void> {
  await waitFor('the job to be due for rescue', async () => {
    const r = await sql<{
      due: boolean;
    }>`select run_after <= now() - interval '1 second' as due from jobs where id = ${jobId}`.execute(
      h.app.database.db,
    );
    return r.rows[0]?.due;
  });
}

void it('A3/J9/J10: the API answers 202 when the enqueue fails, and the rescue sweep drives the work to completion', async () => {
  const h = await startHarness({ apiEnv: { VERBATIM_FAULTS: enqueueFails } });
  try {
    const id = await uploadMeeting(h, wav); // throws unless 202
    const job = await splitJob(h);
    assert.equal(job.status, 'pending');
    assert.equal(job.delivered_at, null, 'the delivery was never enqueued');
    assert.equal(await deliveriesOf(h, job.delivery_id), 0);
    assert.match(h.logs(), /rescue sweep will re-drive it/);

    h.spawnWorker();
    await waitForMeeting(h, id);
    const redrives = await h.app.database.db
      .selectFrom('audit_events')
      .select('actor')
      .where('subject_id', '=', job.id)
      .where('reason', 'like', 'delivery lost%')
      .execute();
    assert.equal(redrives.length, 1);
    assert.match(redrives[0]!.actor, /^sweep:/);
    const after = await splitJob(h);
    assert.notEqual(after.delivery_id, job.delivery_id, 're-delivered with a fresh delivery id');
    await assertNoTokenLeaks(h);
  } finally {
    await h.close();
  }
});

void it('A3/J9: two sweeps racing over the same lost delivery re-drive it once', async () => {
  const h = await startHarness({ apiEnv: { VERBATIM_FAULTS: enqueueFails } });
  const log = createLogger('silent');
  const handles = [openDatabase(h.db.url, log), openDatabase(h.db.url, log)];
  try {
    await uploadMeeting(h, wav);
    const job = await splitJob(h);
    await dueForRescue(h, job.id);
    const timings = { leaseMs: 2000, leaseGraceMs: 0, retryStepMs: 300, rescueAfterMs: 1000 };
    const stores = handles.map(
      (d) => new PgJobSweeps(d.db, timings, { checkpoints: Checkpoints.none(), log }),
    );
    const [a, b] = await Promise.all([
      stores[0]!.rescuePendingJobs('sweep:a'),
      stores[1]!.rescuePendingJobs('sweep:b'),
    ]);
    assert.equal(a.length + b.length, 1, `exactly one sweep re-drove it (a=${a.length}, b=${b.length})`);
    const after = await splitJob(h);
    assert.equal(await deliveriesOf(h, after.delivery_id), 1);
    const total = await sql<{ n: number }>`select count(*)::int as n from graphile_worker.jobs`.execute(
      h.app.database.db,
    );
    assert.equal(total.rows[0]!.n, 1, 'one delivery in the transport, not two');
    // A third sweep finds a live delivery and leaves it alone.
    assert.deepEqual(await stores[0]!.rescuePendingJobs('sweep:c'), []);
  } finally {
    await Promise.all(handles.map((d) => d.close()));
    await h.close();
  }
});

void it('J9: a due job whose delivery graphile-worker backed off (its handler threw on a cut connection) is re-driven, not left to wait out e^attempts seconds (found by the simulation)', async () => {
  const h = await startHarness();
  const log = createLogger('silent');
  const handle = openDatabase(h.db.url, log);
  try {
    const id = await uploadMeeting(h, wav);
    const job = await splitJob(h);
    assert.equal(await deliveriesOf(h, job.delivery_id), 1);
    const timings = { leaseMs: 2000, leaseGraceMs: 0, retryStepMs: 300, rescueAfterMs: 1000 };
    const sweeps = new PgJobSweeps(handle.db, timings, { checkpoints: Checkpoints.none(), log });
    await dueForRescue(h, job.id);
    // A delivery due now and waiting for a worker is live: left alone.
    assert.deepEqual(await sweeps.rescuePendingJobs('sweep:a'), []);
    // What graphile-worker's failJobs writes when a handler throws on its third try: unlocked,
    // attempts counted, run_at pushed e^3 ≈ 20 s on (here an hour, so the wait is unmistakable).
    await sql`update graphile_worker._private_jobs
                 set attempts = 3, run_at = now() + interval '1 hour', last_error = 'Connection terminated'
               where key = ${job.delivery_id}`.execute(h.app.database.db);
    assert.deepEqual(await sweeps.rescuePendingJobs('sweep:b'), [job.id]);
    const after = await splitJob(h);
    assert.notEqual(after.delivery_id, job.delivery_id);
    assert.equal(await deliveriesOf(h, after.delivery_id), 1, 'a fresh delivery, due now');
    assert.equal(await deliveriesOf(h, job.delivery_id), 0, 'the backed-off one is taken out of the queue');
    h.spawnWorker();
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');
  } finally {
    await handle.close();
    await h.close();
  }
});

void it('A4/O1/O2: a dispatcher killed after delivering meeting.transcribed delivers it again and the effect happens once', async () => {
  const h = await startHarness();
  try {
    // Killed after the minutes consumer's delivery (the webhooks consumer has rows of its own, O3).
    const fault = JSON.stringify([
      { at: 'dispatcher.after-deliver', action: 'kill', times: 1, match: { consumer: 'minutes' } },
    ]);
    const first = h.spawnWorker({ VERBATIM_FAULTS: fault });
    const id = await uploadMeeting(h, wav);
    const code = await first.exited;
    assert.equal(code, null, 'the first worker died by SIGKILL');
    assert.match(first.output(), /dispatcher.after-deliver: SIGKILL/);
    h.spawnWorker({ VERBATIM_FAULTS: fault });
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.minutes.status, 'written');
    const db = h.app.database.db;
    // The redelivery waits for the dead dispatcher's lease; the meeting may finish first.
    const event = await waitFor('the event to be recorded as delivered', async () => {
      const row = await db
        .selectFrom('outbox')
        .selectAll()
        .where('consumer', '=', 'minutes')
        .executeTakeFirstOrThrow();
      return row.status === 'delivered' ? row : null;
    });
    assert.equal(event.attempt_count, 2, 'delivered twice: before the crash and after');
    const minutesJobs = await db
      .selectFrom('jobs')
      .select(['id', 'status'])
      .where('kind', '=', 'write-minutes')
      .execute();
    assert.equal(minutesJobs.length, 1, 'the consumer created one minutes job despite two deliveries');
    assert.equal(minutesJobs[0]!.status, 'completed');
    await assertNoTokenLeaks(h);
  } finally {
    await h.close();
  }
});
