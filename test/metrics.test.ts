import assert from 'node:assert/strict';
import { it } from 'node:test';
import { CONSUMERS_OF, EventType, JobKind } from '../src/domain/status.ts';
import { emitEvent } from '../src/events/outbox-store.ts';
import { createJob, jobSpec } from '../src/jobs/catalog.ts';
import { endMeetingAs } from '../src/meetings/meeting-end.ts';
import {
  METRICS_AUTH,
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  type Harness,
} from './support/harness.ts';

/** The figures of one /metrics scrape, by series (`name{labels}`). */
async function scrape(h: Harness): Promise<Map<string, number>> {
  const res = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
  assert.equal(res.statusCode, 200);
  const figures = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) ([-0-9.e+]+)$/.exec(line);
    if (m) figures.set(m[1]!, Number(m[2]));
  }
  return figures;
}

void it('X2: each figure of /metrics follows the state it counts: reclaimed leases, quarantined jobs, minutes outages, outbox and audio awaiting deletion', async () => {
  // No worker: the states are made by the product's own store calls and stay as they are made.
  const h = await startHarness({
    apiEnv: { VERBATIM_LEASE_SECONDS: '0.2', VERBATIM_HEARTBEAT_SECONDS: '0.1' },
  });
  const db = h.app.database.db;
  const { jobs, config } = h.app.deps;
  try {
    const before = await scrape(h);
    for (const name of [
      'verbatim_leases_reclaimed_total',
      'verbatim_jobs_quarantined_total',
      'verbatim_minutes_outages_in_progress',
      'verbatim_jobs_waiting_out_outage',
      'verbatim_outbox_pending',
      'verbatim_cleanup_backlog_blobs',
    ])
      assert.equal(before.get(name), 0, `${name} starts at 0`);

    // A recording whose meeting failed before its audio was deleted: one blob awaiting deletion.
    const meetingId = await uploadMeeting(h, speechWav(SPEECH));
    await db.transaction().execute(async (trx) => {
      const meeting = await h.app.deps.meetings.lock(trx, meetingId);
      await endMeetingAs(h.app.deps, trx, meeting, 'failMeeting', 'test', 'made to fail');
    });

    // (The failure is an event too, for its consumers: counted from here.)
    const outboxBefore = (await scrape(h)).get('verbatim_outbox_pending')!;
    assert.ok(outboxBefore > 0, "the meeting's failure waits in the outbox");
    // An event not yet delivered: one outbox row per consumer.
    await db.transaction().execute((trx) =>
      emitEvent(trx, {
        workspaceId: h.workspaceId,
        type: EventType.meetingTranscribed,
        subjectId: meetingId,
        payload: {},
      }),
    );

    // A job whose worker went silent: its lease expires and the sweep reclaims it (J8); a second one
    // with no reclaims left is quarantined (J7).
    const silent = async (maxReclaims: number | null) => {
      const job = await db.transaction().execute((trx) =>
        maxReclaims === null
          ? createJob(
              h.app.deps,
              trx,
              JobKind.repairTimeline,
              { meetingId },
              { workspaceId: h.workspaceId },
              'test',
            )
          : jobs.createJob(
              trx,
              {
                ...jobSpec(config, JobKind.repairTimeline, { meetingId }, { workspaceId: h.workspaceId }),
                maxReclaims,
              },
              'test',
            ),
      );
      assert.ok(job);
      assert.ok(await jobs.claimJob(job.id, 'silent-worker'));
      await waitFor('the lease to expire and be reclaimed', async () =>
        (await h.app.sweeps.reclaimExpiredLeases('sweep:test')).some((r) => r.jobId === job.id),
      );
    };
    await silent(null);
    await silent(0);

    // A minutes job waiting out an LLM outage.
    const minutes = await db
      .transaction()
      .execute((trx) =>
        createJob(
          h.app.deps,
          trx,
          JobKind.writeMinutes,
          { meetingId },
          { workspaceId: h.workspaceId, dedupeVariant: 'x2' },
          'test',
        ),
      );
    assert.ok(minutes);
    const claimed = await jobs.claimJob(minutes.id, 'minutes-worker');
    assert.ok(claimed);
    await jobs.requeueForOutage(claimed.handle, 'worker:test', 'the LLM provider is down');

    const after = await scrape(h);
    assert.equal(after.get('verbatim_leases_reclaimed_total'), 2, 'both expired leases');
    assert.equal(after.get('verbatim_jobs_quarantined_total'), 1, 'the one with no reclaims left');
    assert.equal(after.get('verbatim_minutes_outages_in_progress'), 1);
    assert.equal(after.get('verbatim_jobs_waiting_out_outage'), 1, 'the same job, counted among every kind');
    assert.equal(
      after.get('verbatim_outbox_pending'),
      outboxBefore + CONSUMERS_OF[EventType.meetingTranscribed].length,
      'one row per consumer',
    );
    assert.equal(after.get('verbatim_cleanup_backlog_blobs'), 1, "the failed meeting's recording");
    assert.equal(after.get('verbatim_queue_pending_jobs{queue="minutes"}'), 1);
  } finally {
    await h.close();
  }
});
