import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import { createLogger } from '../src/log.ts';
import { isDatabaseConnectionLoss } from '../src/db/connect.ts';
import { declareWorkersWithFreeLocks } from '../src/worker/death-watch-store.ts';
import { WorkerRegistry } from '../src/worker/worker-store.ts';
import { LIFE_LOCK_NAMESPACE } from '../src/worker/life-lock.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';
import {
  processState,
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
  type Harness,
} from './support/harness.ts';

const wav = speechWav(SPEECH);

/** The attempts of window `index`'s transcription job, oldest first. */
async function attemptsOf(h: Harness, meetingId: string, index: number) {
  return h.app.database.db
    .selectFrom('job_attempts as a')
    .innerJoin('jobs as j', 'j.id', 'a.job_id')
    .innerJoin('windows as w', 'w.id', 'j.subject_id')
    .select(['a.status', 'a.owner', 'a.started_at', 'a.heartbeat_at', 'a.lease_expires_at', 'a.ended_at'])
    .where('j.kind', '=', 'transcribe-window')
    .where('w.meeting_id', '=', meetingId)
    .where('w.index', '=', index)
    .orderBy('a.attempt_no')
    .execute();
}

async function workerAudit(h: Harness) {
  return h.app.database.db
    .selectFrom('audit_events')
    .select(['subject_id', 'reason'])
    .where('subject_type', '=', 'worker')
    .where('to_status', '=', 'dead')
    .execute();
}

void it('J18: a SIGKILLed worker is known dead by its free session lock, and its window runs again long before its 15 s lease could have run out (default lease and heartbeat)', async () => {
  const h = await startHarness({
    env: { VERBATIM_LEASE_SECONDS: '15', VERBATIM_HEARTBEAT_SECONDS: '5', VERBATIM_SWEEP_SECONDS: '5' },
  });
  try {
    // Both workers carry the fault; it fires once across them: whichever claims window 1 dies.
    const faults = JSON.stringify([
      { at: 'transcribe-window.after-claim', action: 'kill', times: 1, match: { windowIndex: 1 } },
    ]);
    const workers = [h.spawnWorker({ VERBATIM_FAULTS: faults }), h.spawnWorker({ VERBATIM_FAULTS: faults })];
    const id = await uploadMeeting(h, wav);
    await waitForMeeting(h, id);
    const attempts = await attemptsOf(h, id, 1);
    assert.deepEqual(
      attempts.map((a) => a.status),
      ['lease_expired', 'completed'],
    );
    const [first, second] = attempts as [(typeof attempts)[0], (typeof attempts)[0]];
    assert.notEqual(first.owner, second.owner);
    // Attempt 1's lease ran to at least its last heartbeat plus 15 s; attempt 2 started well before.
    const early = second.started_at.getTime() - first.heartbeat_at.getTime();
    assert.ok(early < 15_000, `attempt 2 started ${early} ms after attempt 1's last heartbeat`);
    const deaths = await workerAudit(h);
    assert.equal(deaths.length, 1);
    assert.equal(deaths[0]!.subject_id, first.owner);
    assert.match(deaths[0]!.reason ?? '', /session lock was released/);
    await Promise.all(workers.map((w) => w.stop()));
  } finally {
    await h.close();
  }
});

void it('J18: a SIGKILLed worker’s transport locks are released by the death watch within seconds, far inside its 30 s lease: its locked delivery is taken by the live worker and the job completes there', async (t) => {
  // A lease of 30 s: neither the lease sweep, the silence reaper (no heartbeat for a lease) nor the
  // stale-transport-row sweep (a lease, or five) may act within the bound; only the death watch.
  const LEASE_MS = 30_000;
  const BOUND_MS = 10_000;
  const h = await startHarness({ env: { VERBATIM_LEASE_SECONDS: String(LEASE_MS / 1000) } });
  try {
    const db = h.app.database.db;
    // Whichever worker claims window 1 stops itself there, holding the window's transport row; the
    // test then SIGKILLs it, so the moment of death is known and the row is seen locked before it.
    const faults = JSON.stringify([
      { at: 'transcribe-window.after-claim', action: 'stop', times: 1, match: { windowIndex: 1 } },
    ]);
    const workers = [h.spawnWorker({ VERBATIM_FAULTS: faults }), h.spawnWorker({ VERBATIM_FAULTS: faults })];
    const id = await uploadMeeting(h, wav);
    const victim = await waitFor('a worker to stop at window 1', async () =>
      workers.find((w) => processState(w.pid) === 'T'),
    );
    const survivor = workers.find((w) => w !== victim)!;
    const row = await db
      .selectFrom('workers')
      .select(['id', 'pool_ids'])
      .where('pid', '=', victim.pid)
      .executeTakeFirstOrThrow();
    const pools = row.pool_ids;
    // The transport row of window 1's delivery, locked by one of the victim's pools.
    const job = await db
      .selectFrom('jobs as j')
      .innerJoin('windows as w', 'w.id', 'j.subject_id')
      .innerJoin('job_attempts as a', 'a.id', 'j.current_attempt_id')
      .select(['j.id', 'j.delivery_id', 'a.owner'])
      .where('j.kind', '=', 'transcribe-window')
      .where('w.meeting_id', '=', id)
      .where('w.index', '=', 1)
      .executeTakeFirstOrThrow();
    assert.equal(job.owner, row.id, 'window 1 is running on the stopped worker');
    const transport = await sql<{ id: string; locked_by: string | null }>`
      select id::text, locked_by from graphile_worker._private_jobs where key = ${job.delivery_id}::text`.execute(
      db,
    );
    assert.equal(transport.rows.length, 1, `one transport row for window 1's delivery ${job.delivery_id}`);
    const held = transport.rows[0]!;
    assert.ok(
      held.locked_by !== null && pools.includes(held.locked_by),
      `window 1's transport row is locked by the victim's pool (${held.locked_by} in ${pools.join(', ')})`,
    );
    const lockedByVictim = async () =>
      (
        await sql<{ n: number }>`select count(*)::int as n from graphile_worker._private_jobs
          where locked_by = any(${pools}::text[])`.execute(db)
      ).rows[0]!.n;

    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    await victim.exited;
    // Measured, not waited out: the first moment no transport row is locked by the dead worker.
    let releasedAfter: number | null = null;
    while (Date.now() - killedAt < BOUND_MS) {
      if ((await lockedByVictim()) === 0) {
        releasedAfter = Date.now() - killedAt;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(
      releasedAfter !== null,
      `the dead worker's pools still locked ${await lockedByVictim()} transport row(s) ` +
        `${BOUND_MS} ms after it was SIGKILLed (its lease is ${LEASE_MS} ms)`,
    );

    // The death watch did it: the survivor declared the victim dead by its free session lock.
    const deaths = await db
      .selectFrom('audit_events')
      .select(['subject_id', 'actor', 'reason'])
      .where('subject_type', '=', 'worker')
      .where('to_status', '=', 'dead')
      .execute();
    const survivorId = (
      await db.selectFrom('workers').select('id').where('pid', '=', survivor.pid).executeTakeFirstOrThrow()
    ).id;
    assert.deepEqual(
      deaths.map((d) => [d.subject_id, d.actor]),
      [[row.id, `sweep:${survivorId}`]],
      'one death, declared by the live worker’s death watch',
    );
    assert.match(deaths[0]!.reason ?? '', /session lock was released.*transport locks/);

    // The released delivery is taken by the live worker (no other runner is left to settle it),
    // and the window's job completes there, long before the dead worker's lease could have run out.
    await waitFor(`window 1's old transport row to be taken and settled`, async () => {
      const left =
        await sql`select 1 from graphile_worker._private_jobs where id = ${held.id}::bigint`.execute(db);
      return left.rows.length === 0;
    });
    await waitForMeeting(h, id);
    const attempts = await attemptsOf(h, id, 1);
    assert.deepEqual(
      attempts.map((a) => [a.status, a.owner]),
      [
        ['lease_expired', row.id],
        ['completed', survivorId],
      ],
    );
    // Its attempt was reclaimed within the bound too; the live worker ran it again (when one of its
    // transcription slots was free) long before the dead worker's lease would have run out.
    const reclaimedAfter = attempts[0]!.ended_at!.getTime() - killedAt;
    assert.ok(
      reclaimedAfter < BOUND_MS,
      `window 1's attempt was reclaimed ${reclaimedAfter} ms after the kill`,
    );
    const rerunAfter = attempts[1]!.started_at.getTime() - killedAt;
    assert.ok(rerunAfter < LEASE_MS, `window 1 ran again ${rerunAfter} ms after the kill`);
    assert.equal(await lockedByVictim(), 0);
    t.diagnostic(
      `after the kill: transport locks released in ${releasedAfter} ms, window 1's attempt reclaimed in ` +
        `${reclaimedAfter} ms and run again in ${rerunAfter} ms`,
    );
    await survivor.stop();
  } finally {
    await h.close();
  }
});

void it('J18: a SIGSTOPped worker keeps its session lock: it is not reclaimed before its lease runs out', async () => {
  const h = await startHarness();
  try {
    const faults = JSON.stringify([
      { at: 'transcribe-window.after-claim', action: 'stop', times: 1, match: { windowIndex: 1 } },
    ]);
    const workers = [h.spawnWorker({ VERBATIM_FAULTS: faults }), h.spawnWorker({ VERBATIM_FAULTS: faults })];
    const id = await uploadMeeting(h, wav);
    const stopped = await waitFor('a worker to stop at window 1', async () =>
      workers.find((w) => processState(w.pid) === 'T'),
    );
    await waitForMeeting(h, id);
    const attempts = await attemptsOf(h, id, 1);
    // Usually [lease_expired, completed]. When the stop caught the process inside a transaction
    // (a sweep or heartbeat of its own), its row locks hold up the other worker's renewals until
    // Postgres ends that idle transaction, and the next attempt may lose its lease too: each
    // attempt but the last ends lease_expired, none is declared dead by its session lock.
    const statuses = attempts.map((a) => a.status);
    assert.equal(statuses.at(-1), 'completed', statuses.join(', '));
    assert.ok(statuses.length >= 2, statuses.join(', '));
    assert.ok(
      statuses.slice(0, -1).every((s) => s === 'lease_expired'),
      statuses.join(', '),
    );
    const [first, second] = attempts as [(typeof attempts)[0], (typeof attempts)[0]];
    // The lease was never cut short: attempt 2 began only after attempt 1's lease had run out.
    assert.ok(second.started_at.getTime() >= first.lease_expires_at.getTime());
    assert.ok(!(await workerAudit(h)).some((d) => /session lock/.test(d.reason ?? '')));
    process.kill(stopped.pid, 'SIGCONT');
    await Promise.all(workers.map((w) => w.stop()));
  } finally {
    await h.close();
  }
});

void describe('J18: the death watch on crafted workers', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  const log = createLogger('silent');
  const clients: pg.Client[] = [];

  before(async () => {
    tdb = await createTestDatabase();
    handle = openDatabase(tdb.url, log, 2);
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    await handle?.close();
    await tdb?.drop();
  });

  /** A worker row whose life lock a client of this test holds; `release` ends that session. */
  async function crafted(opts: { takenBeforeStart?: boolean } = {}) {
    const id = `crafted-${randomUUID()}`;
    const key = Math.floor(Math.random() * 2 ** 31);
    const client = new pg.Client({ connectionString: tdb.url });
    clients.push(client);
    await client.connect();
    await client.query('select pg_advisory_lock($1, $2)', [LIFE_LOCK_NAMESPACE, key]);
    await handle.db
      .insertInto('workers')
      .values({
        id,
        hostname: 'test',
        pid: 1,
        lock_key: key,
        lock_taken_at: opts.takenBeforeStart
          ? sql<Date>`pg_postmaster_start_time() - interval '1 second'`
          : sql<Date>`now()`,
      })
      .execute();
    return { id, key, client, release: () => client.end() };
  }

  const watch = (confirmMs = 200) =>
    declareWorkersWithFreeLocks(handle.db, 'the-watcher', confirmMs, 0, 'test', log).then((d) =>
      d.map((w) => w.id),
    );
  const freeSince = async (id: string) =>
    (
      await handle.db
        .selectFrom('workers')
        .select('lock_free_since')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).lock_free_since;

  void it('J18: a held lock is alive; a free lock is a death only when seen free twice, confirmMs apart; a lock seen held again clears the first sighting', async () => {
    const w = await crafted();
    assert.deepEqual(await watch(), []);
    assert.equal(await freeSince(w.id), null);

    await w.release();
    assert.deepEqual(await watch(), [], 'the first sighting only notes it');
    assert.ok(await freeSince(w.id));
    // The lock is taken again (a terminated backend, reconnected): the sighting is forgotten.
    const again = new pg.Client({ connectionString: tdb.url });
    clients.push(again);
    await again.connect();
    await again.query('select pg_advisory_lock($1, $2)', [LIFE_LOCK_NAMESPACE, w.key]);
    assert.deepEqual(await watch(), []);
    assert.equal(await freeSince(w.id), null);

    await again.end();
    assert.deepEqual(await watch(60_000), []);
    assert.deepEqual(await watch(60_000), [], 'not confirmed within confirmMs');
    await handle.db
      .updateTable('workers')
      .set({ lock_free_since: sql<Date>`now() - interval '1 minute'` })
      .where('id', '=', w.id)
      .execute();
    assert.deepEqual(await watch(), [w.id]);
    assert.deepEqual(await watch(), [], 'declared once');
  });

  void it('J18: a dead worker’s running attempt has its lease ended at once, so the next reclaim takes it', async () => {
    const w = await crafted();
    const workspace = randomUUID();
    await handle.db.insertInto('workspaces').values({ id: workspace, name: 'w' }).execute();
    const jobId = randomUUID();
    await handle.db
      .insertInto('jobs')
      .values({
        id: jobId,
        workspace_id: workspace,
        kind: 'write-minutes',
        queue: 'minutes',
        subject_type: 'meeting',
        subject_id: randomUUID(),
        status: 'running',
        payload: JSON.stringify({}),
        max_errors: 3,
        max_reclaims: 3,
        run_after: new Date(),
        delivery_id: randomUUID(),
      })
      .execute();
    await handle.db
      .insertInto('job_attempts')
      .values({
        id: randomUUID(),
        job_id: jobId,
        workspace_id: workspace,
        attempt_no: 1,
        status: 'running',
        context: JSON.stringify({}),
        input_revision: 0,
        owner: w.id,
        token: randomUUID(),
        lease_expires_at: sql<Date>`now() + interval '15 seconds'`,
      })
      .execute();
    await w.release();
    await watch(0);
    assert.deepEqual(await watch(0), [w.id]);
    const lease = await handle.db
      .selectFrom('job_attempts')
      .select(sql<boolean>`lease_expires_at < now()`.as('over'))
      .where('job_id', '=', jobId)
      .executeTakeFirstOrThrow();
    assert.equal(lease.over, true);
  });

  void it('J18: a dead worker’s claimed object deletions, webhook deliveries and bot backstop runs go to the next pass at once (found by the simulation: heals waited out a one-minute lease; lost bot webhooks waited 15 minutes)', async () => {
    const w = await crafted();
    const workspace = randomUUID();
    await handle.db.insertInto('workspaces').values({ id: workspace, name: 'w' }).execute();
    const endpoint = randomUUID();
    await handle.db
      .insertInto('webhook_endpoints')
      .values({
        id: endpoint,
        workspace_id: workspace,
        url: 'https://hooks.example/x',
        secret: 'whsec_x',
        events: [],
      })
      .execute();
    await handle.db
      .insertInto('webhook_deliveries')
      .values({
        id: randomUUID(),
        workspace_id: workspace,
        endpoint_id: endpoint,
        event_id: randomUUID(),
        event_type: 'meeting.completed',
        body: '{}',
        status: 'pending',
        lease_owner: w.id,
        lease_expires_at: sql<Date>`now() + interval '25 seconds'`,
      })
      .execute();
    await handle.db
      .insertInto('object_cleanups')
      .values({
        id: randomUUID(),
        workspace_id: workspace,
        meeting_id: null,
        object_key: `test/${randomUUID()}`,
        bytes: 10,
        state: 'pending',
        reason: 'test',
        lease_owner: w.id,
        lease_expires_at: sql<Date>`now() + interval '60 seconds'`,
      })
      .execute();
    await handle.db
      .insertInto('bot_backstops')
      .values({
        workspace_id: workspace,
        next_run_at: new Date(),
        lease_owner: w.id,
        lease_expires_at: sql<Date>`now() + interval '15 minutes'`,
      })
      .execute();
    const leased = async () => {
      const r = await sql<{ n: number }>`select
          (select count(*) from webhook_deliveries where lease_owner = ${w.id})
        + (select count(*) from object_cleanups where lease_owner = ${w.id})
        + (select count(*) from bot_backstops where lease_owner = ${w.id}) as n`.execute(handle.db);
      return Number(r.rows[0]?.n);
    };
    assert.equal(await leased(), 3);
    await w.release();
    await watch(0);
    assert.deepEqual(await watch(0), [w.id]);
    assert.equal(await leased(), 0);
  });

  void it('J18: a worker declared dead while only paused clears the declaration when it heartbeats again, so its real death later is noticed too (found by the simulation)', async () => {
    const w = await crafted();
    await handle.db
      .updateTable('workers')
      .set({ declared_dead_at: sql<Date>`now()` })
      .where('id', '=', w.id)
      .execute();
    await new WorkerRegistry(handle.db, log).heartbeat(w.id);
    const row = await handle.db
      .selectFrom('workers')
      .select('declared_dead_at')
      .where('id', '=', w.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.declared_dead_at, null);
    const audit = await handle.db
      .selectFrom('audit_events')
      .select(['from_status', 'to_status'])
      .where('subject_id', '=', w.id)
      .execute();
    assert.deepEqual(audit, [{ from_status: 'dead', to_status: 'alive' }]);
    // Now it dies for real: the death watch sees it.
    await w.release();
    await watch(0);
    assert.deepEqual(await watch(0), [w.id]);
  });

  void it('J18: a worker declared dead by its silence (paused) and then killed while paused has its claims released once its lock is seen free (found by the simulation: a bot recording waited out a 15-minute backstop lease)', async () => {
    const w = await crafted();
    const workspace = randomUUID();
    await handle.db.insertInto('workspaces').values({ id: workspace, name: 'w' }).execute();
    await handle.db
      .insertInto('bot_backstops')
      .values({
        workspace_id: workspace,
        next_run_at: new Date(),
        lease_owner: w.id,
        lease_expires_at: sql<Date>`now() + interval '15 minutes'`,
      })
      .execute();
    const leased = async () =>
      (
        await handle.db
          .selectFrom('bot_backstops')
          .select('lease_owner')
          .where('lease_owner', '=', w.id)
          .execute()
      ).length;
    // Silent: declared dead without a known death (the silence reaper keeps its claims).
    await handle.db
      .updateTable('workers')
      .set({ declared_dead_at: sql<Date>`now()` })
      .where('id', '=', w.id)
      .execute();
    assert.deepEqual(await watch(0), [], 'its lock is held: it is only paused');
    assert.equal(await leased(), 1, 'a paused worker keeps its claim');
    // Killed while stopped: no heartbeat ever clears the declaration; its lock goes free.
    await w.release();
    await watch(0);
    assert.deepEqual(await watch(0), [], 'not declared a second time');
    assert.equal(await leased(), 0, 'its backstop run goes to the next pass at once');
  });

  void it('V8: a lost database connection is told apart from other errors (the process rides the first out)', () => {
    const lost = [
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection terminated unexpectedly'),
      new Error('Client has encountered a connection error and is not queryable'),
      Object.assign(new Error('sorry, too many clients already'), { code: '53300' }),
      // Kysely, reusing a connection whose backend was terminated (found by the simulation, seed 1402).
      new Error('migration  failed: Error: Postgres connection has been discarded', {
        cause: new Error('Postgres connection has been discarded'),
      }),
      new Error('migration failed', {
        cause: Object.assign(new Error('terminating connection due to administrator command'), {
          code: '57P01',
        }),
      }),
    ];
    for (const err of lost) assert.equal(isDatabaseConnectionLoss(err), true, err.message);
    const others = [
      Object.assign(new Error('permission denied to set role "verbatim_tenant"'), { code: '42501' }),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      'a string',
    ];
    for (const err of others) assert.equal(isDatabaseConnectionLoss(err), false, String(err));
  });

  void it('J18: a lock taken before the database last started is not read as a death (a restart frees every lock)', async () => {
    const w = await crafted({ takenBeforeStart: true });
    await w.release();
    await watch(0);
    assert.deepEqual(await watch(0), []);
    assert.equal(await freeSince(w.id), null, 'not even noted');
  });
});
