import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { Checkpoints } from '../src/checkpoints.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import { ErrorKind, toErrorRecord } from '../src/domain/errors.ts';
import { decideFailure, linearBackoffMs } from '../src/domain/retry-policy.ts';
import { JobKind } from '../src/domain/status.ts';
import { AttemptHandle, LostLeaseError } from '../src/jobs/attempt-handle.ts';
import { PgJobSweeps } from '../src/jobs/job-sweep-store.ts';
import { OUTAGE_WAITS } from '../src/domain/retry-policy.ts';
import { loadConfig } from '../src/config.ts';
import { PgJobStore, specJson } from '../src/jobs/pg-job-store.ts';
import { failurePolicyOf, LOCKED_FIRST, workspacelessSpec } from '../src/jobs/catalog.ts';
import type { Config } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';

void describe('job store', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  let store: PgJobStore;
  let sweeps: PgJobSweeps;
  let workspaceId: string;
  const log = createLogger('silent');

  before(async () => {
    tdb = await createTestDatabase();
    handle = openDatabase(tdb.url, log);
    const timings = { leaseMs: 300, leaseGraceMs: 0, retryStepMs: 100, rescueAfterMs: 1000 };
    // Each kind's failure policy as the catalog declares it, as the app wires it (src/app.ts).
    const config = loadConfig({});
    store = new PgJobStore(handle.db, timings, {
      checkpoints: Checkpoints.none(),
      log,
      failurePolicyOf: (kind) => failurePolicyOf(config, kind),
      lockedFirst: LOCKED_FIRST,
    });
    sweeps = new PgJobSweeps(handle.db, timings, { checkpoints: Checkpoints.none(), log });
    workspaceId = randomUUID();
    await handle.db.insertInto('workspaces').values({ id: workspaceId, name: 't' }).execute();
  });
  after(async () => {
    await handle?.close();
    await tdb?.drop();
  });

  async function newJob(maxErrors = 3, maxReclaims = 2) {
    return handle.db.transaction().execute(async (trx) => {
      const job = await store.createJob(
        trx,
        {
          workspaceId,
          kind: JobKind.writeMinutes,
          subjectType: 'meeting',
          subjectId: randomUUID(),
          meetingId: null,
          maxErrors,
          maxReclaims,
        },
        'test',
      );
      return job!;
    });
  }

  async function jobRow(jobId: string) {
    return handle.db.selectFrom('jobs').selectAll().where('id', '=', jobId).executeTakeFirstOrThrow();
  }

  async function expire(jobId: string) {
    await sql`update job_attempts set lease_expires_at = now() - interval '1 second' where job_id = ${jobId} and status = 'running'`.execute(
      handle.db,
    );
  }

  void it('J1: a claim inserts an attempt with number, snapshot, revision, owner, token and lease in one transaction', async () => {
    const job = await newJob();
    const claimed = await store.claimJob(job.id, 'w1');
    assert.ok(claimed);
    const attempt = await handle.db
      .selectFrom('job_attempts')
      .selectAll()
      .where('job_id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(attempt.attempt_no, 1);
    assert.equal(attempt.owner, 'w1');
    assert.equal(attempt.status, 'running');
    assert.equal(attempt.context.kind, JobKind.writeMinutes);
    assert.equal(attempt.input_revision, 0);
    assert.ok(attempt.lease_expires_at > attempt.started_at);
    const row = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'running');
    assert.equal(row.current_attempt_id, attempt.id);
    assert.equal(await store.claimJob(job.id, 'w2'), null, 'a live lease cannot be claimed twice');
  });

  void it('J2: an expired lease is taken over in one transaction: old attempt lease_expired, new token', async () => {
    const job = await newJob();
    const first = (await store.claimJob(job.id, 'w1'))!;
    await expire(job.id);
    const second = (await store.claimJob(job.id, 'w2'))!;
    assert.ok(second);
    assert.notEqual(AttemptHandle.tokenOf(second.handle), AttemptHandle.tokenOf(first.handle));
    const rows = await handle.db
      .selectFrom('job_attempts')
      .select(['attempt_no', 'status'])
      .where('job_id', '=', job.id)
      .orderBy('attempt_no')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.status),
      ['lease_expired', 'running'],
    );
    const jobRow = await handle.db
      .selectFrom('jobs')
      .select('reclaim_count')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(jobRow.reclaim_count, 1);
  });

  void it('J3: a stale token can neither renew, complete nor fail, and changes nothing', async () => {
    const job = await newJob();
    const stale = (await store.claimJob(job.id, 'w1'))!.handle;
    await expire(job.id);
    const fresh = (await store.claimJob(job.id, 'w2'))!.handle;
    const snapshot = await handle.db
      .selectFrom('job_attempts')
      .selectAll()
      .where('job_id', '=', job.id)
      .orderBy('attempt_no')
      .execute();
    assert.equal(await store.renewLease(stale), false);
    await assert.rejects(store.completeAttempt(stale, 'w1'), LostLeaseError);
    await assert.rejects(
      store.failAttempt(
        stale,
        'w1',
        { kind: ErrorKind.permanent, code: 'x', message: 'x' },
        undefined,
        undefined,
      ),
      LostLeaseError,
    );
    await assert.rejects(store.requeueAttempt(stale, 'w1', 10, 'x'), LostLeaseError);
    assert.deepEqual(
      await handle.db
        .selectFrom('job_attempts')
        .selectAll()
        .where('job_id', '=', job.id)
        .orderBy('attempt_no')
        .execute(),
      snapshot,
    );
    assert.equal(await store.renewLease(fresh), true);
    await store.completeAttempt(fresh, 'w2');
  });

  void it('J4: only running -> outcome is permitted, enforced in the database', async () => {
    const job = await newJob();
    const claimed = (await store.claimJob(job.id, 'w1'))!;
    await store.completeAttempt(claimed.handle, 'w1');
    const id = claimed.handle.attemptId;
    await assert.rejects(
      sql`update job_attempts set status = 'failed' where id = ${id}`.execute(handle.db),
      /only running -> outcome/,
    );
    await assert.rejects(
      sql`update job_attempts set status = 'running' where id = ${id}`.execute(handle.db),
      /only running -> outcome/,
    );
    await assert.rejects(sql`delete from job_attempts where id = ${id}`.execute(handle.db), /audit evidence/);
    await assert.rejects(
      sql`insert into job_attempts (id, job_id, workspace_id, attempt_no, status, context, input_revision, owner, token, lease_expires_at)
          values (${randomUUID()}, ${job.id}, ${workspaceId}, 9, 'paused', '{}', 0, 'x', ${randomUUID()}, now())`.execute(
        handle.db,
      ),
      /check/,
    );
    const job2 = await newJob();
    const running = (await store.claimJob(job2.id, 'w1'))!;
    await assert.rejects(
      sql`update job_attempts set token = ${randomUUID()} where id = ${running.handle.attemptId}`.execute(
        handle.db,
      ),
      /immutable/,
    );
    await assert.rejects(
      sql`insert into job_attempts (id, job_id, workspace_id, attempt_no, status, context, input_revision, owner, token, lease_expires_at)
          values (${randomUUID()}, ${job2.id}, ${workspaceId}, 2, 'running', '{}', 0, 'x', ${randomUUID()}, now())`.execute(
        handle.db,
      ),
      /job_attempts_one_running/,
      'one running attempt per job',
    );
  });

  void it('L7/J6: a lost database connection or a speech-provider outage is waited out without spending retries, up to a bound (found by the simulation)', async () => {
    const job = await newJob(1);
    const lost = {
      kind: ErrorKind.transient,
      code: 'db.connection_lost',
      message: 'database connection lost',
    };
    const down = {
      kind: ErrorKind.transient,
      code: 'asr.unreachable',
      message: 'speech provider unreachable',
    };
    for (const error of [lost, down, lost]) {
      const h = (await store.claimJob(job.id, 'w1'))!.handle;
      assert.equal(await store.failAttempt(h, 'w1', error, undefined, undefined), 'retrying');
      await sql`update jobs set run_after = now() where id = ${job.id}`.execute(handle.db);
    }
    const row = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'pending');
    assert.equal(row.error_count, 0, 'no retry spent');
    assert.equal(row.wait_count, 3);
    assert.equal(row.outage_waits, 3);
    // Past the bound such errors spend retries like any other (a job that kills its own connection ends).
    await sql`update jobs set outage_waits = ${OUTAGE_WAITS} where id = ${job.id}`.execute(handle.db);
    const h = (await store.claimJob(job.id, 'w1'))!.handle;
    assert.equal(await store.failAttempt(h, 'w1', lost, undefined, undefined), 'failed');
  });

  void it('L7/V8: a database socket reset under a job (ECONNRESET, as a terminated backend gives) is waited out like a lost connection, not spent from the error budget (found by the soak)', async () => {
    // A real reset, as node-postgres reports it: a server that resets the connection it accepted.
    const server = net.createServer((socket) => socket.once('data', () => socket.resetAndDestroy()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const client = new pg.Client({ connectionString: `postgres://verbatim@127.0.0.1:${port}/verbatim` });
    client.on('error', () => undefined);
    const reset = await client.connect().then(
      () => null,
      (err: unknown) => err,
    );
    server.close();
    assert.equal((reset as { code?: string } | null)?.code, 'ECONNRESET');
    const record = toErrorRecord(reset);
    assert.equal(record.code, 'internal.network');

    const job = await newJob(1);
    for (let i = 0; i < 2; i++) {
      const h = (await store.claimJob(job.id, 'w1'))!.handle;
      assert.equal(await store.failAttempt(h, 'w1', record, undefined, undefined), 'retrying');
      await sql`update jobs set run_after = now() where id = ${job.id}`.execute(handle.db);
    }
    const row = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.error_count, 0, 'no retry spent on the reset');
    assert.equal(row.outage_waits, 2);
  });

  void it('L7: a job that waited many times for other work (a close-out polling its windows) still waits out its next outage without spending a retry (found by the simulation)', async () => {
    const job = await newJob(1);
    for (let i = 0; i < OUTAGE_WAITS + 2; i++) {
      const h = (await store.claimJob(job.id, 'w1'))!.handle;
      await store.requeueAttempt(h, 'w1', 0, 'waiting for windows');
    }
    const h = (await store.claimJob(job.id, 'w1'))!.handle;
    const lost = {
      kind: ErrorKind.transient,
      code: 'db.connection_lost',
      message: 'database connection lost',
    };
    assert.equal(await store.failAttempt(h, 'w1', lost, undefined, undefined), 'retrying');
    const row = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.error_count, 0, 'no retry spent');
    assert.equal(row.wait_count, OUTAGE_WAITS + 3);
    assert.equal(row.outage_waits, 1);
    // Its first outage waits one step, not the longest backoff its waits would have earned.
    const wait = await sql<{
      s: number;
    }>`select extract(epoch from run_after - now())::float as s from jobs where id = ${job.id}`.execute(
      handle.db,
    );
    assert.ok(wait.rows[0]!.s < 2, `waits ${wait.rows[0]!.s} s`);
  });

  void it('J9/V3: a transport row left locked by a live worker is released once its job no longer runs, or, without a job, once it is stuck (found by the simulation)', async () => {
    const running = await newJob();
    await store.claimJob(running.id, 'w1');
    const settled = await newJob();
    await sql`update jobs set status = 'completed' where id = ${settled.id}`.execute(handle.db);
    const keyOf = async (id: string) =>
      (
        await handle.db
          .selectFrom('jobs')
          .select('delivery_id')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).delivery_id;
    const rows = {
      running: await keyOf(running.id),
      settled: await keyOf(settled.id),
      wakeUp: 'dispatch-outbox',
    };
    // Each row is in the queue (createJob enqueued the two jobs'; the wake-up is added here), then
    // locked an hour ago by a worker that never completed it.
    await sql`select verbatim_enqueue('dispatch-outbox', '{}'::json, null, 1, 'dispatch-outbox')`.execute(
      handle.db,
    );
    await sql`update graphile_worker._private_jobs set locked_at = now() - interval '1 hour', locked_by = 'pool-test'
      where key in (${rows.running}, ${rows.settled}, ${rows.wakeUp})`.execute(handle.db);
    const left = async () =>
      (
        await sql<{ key: string }>`select key from graphile_worker._private_jobs
          where key in (${rows.running}, ${rows.settled}, ${rows.wakeUp}) order by key`.execute(handle.db)
      ).rows.map((r) => r.key);
    // Younger than the idle bound, the wake-up stays; the settled job's row goes (past a lease).
    assert.equal(await sweeps.releaseStaleTransportRows(2 * 3_600_000), 1);
    assert.deepEqual(await left(), [rows.running, rows.wakeUp].sort());
    assert.equal(await sweeps.releaseStaleTransportRows(60_000), 1);
    assert.deepEqual(await left(), [rows.running], 'a running job keeps its row');
  });

  void it('J6: transient errors retry with growing backoff until the budget is spent; permanent ones fail at once', async () => {
    const job = await newJob(2);
    let h = (await store.claimJob(job.id, 'w1'))!.handle;
    // Not an outside outage (those wait without spending retries: the test above).
    const transient = { kind: ErrorKind.transient, code: 'storage.unavailable', message: 'read failed' };
    assert.equal(await store.failAttempt(h, 'w1', transient, undefined, undefined), 'retrying');
    await sql`update jobs set run_after = now() where id = ${job.id}`.execute(handle.db);
    h = (await store.claimJob(job.id, 'w1'))!.handle;
    assert.equal(await store.failAttempt(h, 'w1', transient, undefined, undefined), 'failed');
    const row = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'failed');
    assert.equal(row.last_error_code, 'storage.unavailable');

    const job2 = await newJob(5);
    const h2 = (await store.claimJob(job2.id, 'w1'))!.handle;
    const permanent = { kind: ErrorKind.permanent, code: 'asr.bad_request', message: 'bad' };
    assert.equal(await store.failAttempt(h2, 'w1', permanent, undefined, undefined), 'failed');

    assert.deepEqual(
      [1, 2, 3].map((n) => linearBackoffMs(15_000, n)),
      [15_000, 30_000, 45_000],
    );
    const d = decideFailure(
      { kind: ErrorKind.transient, code: 'llm.rate_limited', message: '' },
      1,
      3,
      1000,
      20,
    );
    assert.deepEqual(
      d,
      { type: 'retry', delayMs: 20_000 },
      'Retry-After is honoured when longer than the backoff',
    );
    assert.equal(
      decideFailure({ kind: ErrorKind.unclassified, code: 'internal.error', message: '' }, 1, 3, 1000).type,
      'retry',
    );
  });

  void it('J7/J8/J20: the sweep reclaims expired leases, and past the cap isolates the job instead of failing it', async () => {
    const job = await newJob(3, 1);
    await store.claimJob(job.id, 'w1');
    await expire(job.id);
    // Other tests' jobs may expire in the same sweep on a slow machine; this test looks at its own.
    const first = (await sweeps.reclaimExpiredLeases('sweep:test')).filter((r) => r.jobId === job.id);
    assert.deepEqual(
      first.map((r) => [r.jobId, r.quarantined]),
      [[job.id, false]],
    );
    await store.claimJob(job.id, 'w2');
    await expire(job.id);
    const second = (await sweeps.reclaimExpiredLeases('sweep:test')).filter((r) => r.jobId === job.id);
    assert.deepEqual(
      second.map((r) => [r.jobId, r.quarantined]),
      [[job.id, true]],
    );
    const row = await jobRow(job.id);
    assert.equal(row.status, 'pending', 'not failed: isolated, its input kept');
    assert.ok(row.isolated_at, 'in the isolated lane');
    assert.equal(row.isolation_reason, 'reclaim_cap_exceeded');
    assert.ok(row.run_after.getTime() <= Date.now() + 50, 'its first isolated run is at once');
    // J20: an ordinary worker no longer takes it; only an isolated runner does.
    assert.equal(await store.claimJob(job.id, 'w3'), null, 'the ordinary lane refuses an isolated job');
    const isolated = await store.claimJob(job.id, 'w3/isolated-1', {}, true);
    assert.ok(isolated, 'an isolated runner claims it');
    assert.equal((await jobRow(job.id)).isolated_runs, 1);
    // Its lease running out (its worker died with it, say) is no reason to fail it now.
    await expire(job.id);
    const third = (await sweeps.reclaimExpiredLeases('sweep:test')).filter((r) => r.jobId === job.id);
    assert.equal(third.length, 1);
    const after = await jobRow(job.id);
    assert.equal(after.status, 'pending');
    assert.equal(after.runner_deaths, 0, 'a run lost with its worker is no runner death');
    assert.ok(after.run_after.getTime() > Date.now() + 10_000, 'it runs again after its slow backoff');
    const audit = await handle.db
      .selectFrom('audit_events')
      .select(['to_status', 'actor', 'reason'])
      .where('subject_id', '=', job.id)
      .where('subject_type', '=', 'job')
      .orderBy('id')
      .execute();
    assert.deepEqual(
      audit.map((a) => a.to_status),
      ['pending', 'running', 'pending', 'running', 'pending', 'running', 'pending'],
    );
    assert.match(audit[4]!.reason ?? '', /isolated \(reclaim_cap_exceeded\)/);
    assert.equal(audit.at(-1)!.actor, 'sweep:test');
  });

  void it('J20: an isolated job whose runner dies several runs in a row is poison; a run that ends otherwise breaks the count', async () => {
    const job = await newJob(3, 0);
    await store.claimJob(job.id, 'w1');
    await expire(job.id);
    await sweeps.reclaimExpiredLeases('sweep:test');
    assert.ok((await jobRow(job.id)).isolated_at);
    let terminal: string | null = null;
    const hooks = {
      [JobKind.writeMinutes]: (_trx: unknown, failed: { id: string }, error: { code: string }) => {
        if (failed.id === job.id) terminal = error.code;
        return Promise.resolve(null);
      },
    };
    const run = async (owner: string) => {
      await sql`update jobs set run_after = now() where id = ${job.id}`.execute(handle.db);
      const claimed = await store.claimJob(job.id, owner, {}, true);
      assert.ok(claimed, `run ${owner} claims`);
      return claimed;
    };
    const died = { died: true, detail: 'was killed by SIGKILL' };
    await run('w/iso-a');
    assert.equal(await store.endIsolatedRun(job.id, 'w/iso-a', died, hooks, 'worker:w'), 'retrying');
    await run('w/iso-b');
    assert.equal(await store.endIsolatedRun(job.id, 'w/iso-b', died, hooks, 'worker:w'), 'retrying');
    assert.equal((await jobRow(job.id)).runner_deaths, 2);
    // A run that fails with an error (its runner lived) breaks the row of deaths.
    const errored = await run('w/iso-c');
    const transient = { kind: ErrorKind.transient, code: 'asr.bad_gateway', message: 'x' };
    assert.equal(
      await store.failAttempt(errored.handle, 'w/iso-c', transient, undefined, undefined),
      'retrying',
    );
    assert.equal((await jobRow(job.id)).runner_deaths, 0);
    // A runner that only could not reach the database is no death either, and another runner's
    // report about a run that is not its own changes nothing.
    await run('w/iso-d');
    assert.equal(await store.endIsolatedRun(job.id, 'w/iso-x', died, hooks, 'worker:w'), 'none');
    assert.equal(
      await store.endIsolatedRun(
        job.id,
        'w/iso-d',
        { died: false, detail: 'no database' },
        hooks,
        'worker:w',
      ),
      'retrying',
    );
    assert.equal((await jobRow(job.id)).runner_deaths, 0);
    for (const owner of ['w/iso-e', 'w/iso-f']) {
      await run(owner);
      assert.equal(await store.endIsolatedRun(job.id, owner, died, hooks, 'worker:w'), 'retrying');
    }
    await run('w/iso-g');
    assert.equal(await store.endIsolatedRun(job.id, 'w/iso-g', died, hooks, 'worker:w'), 'poison');
    const row = await jobRow(job.id);
    assert.equal(row.status, 'failed');
    assert.equal(row.last_error_code, 'poison');
    assert.equal(row.runner_deaths, 3);
    assert.equal(terminal, 'poison', "the kind's terminal hook settles its subject");
    const attempts = await handle.db
      .selectFrom('job_attempts')
      .select(['status', 'error_code'])
      .where('job_id', '=', job.id)
      .orderBy('attempt_no')
      .execute();
    assert.deepEqual(
      attempts.map((a) => `${a.status}:${a.error_code}`),
      [
        'lease_expired:lease_expired',
        'lease_expired:runner_died',
        'lease_expired:runner_died',
        'retryable_failed:asr.bad_gateway',
        'lease_expired:runner_lost',
        'lease_expired:runner_died',
        'lease_expired:runner_died',
        'lease_expired:runner_died',
      ],
    );
  });

  void it('J20: a window whose error budget runs out on errors that may pass is isolated and keeps trying; other kinds fail as before', async () => {
    const windowStore = new PgJobStore(
      handle.db,
      { leaseMs: 300, leaseGraceMs: 0, retryStepMs: 100, rescueAfterMs: 1000 },
      {
        checkpoints: Checkpoints.none(),
        log,
        failurePolicyOf: (kind) => failurePolicyOf(loadConfig({}), kind),
      },
    );
    const make = (kind: typeof JobKind.transcribeWindow | typeof JobKind.writeMinutes) =>
      handle.db.transaction().execute(async (trx) =>
        windowStore.createJob(
          trx,
          {
            workspaceId,
            kind,
            subjectType: kind === JobKind.transcribeWindow ? 'window' : 'meeting',
            subjectId: randomUUID(),
            meetingId: null,
            maxErrors: 2,
            maxReclaims: 3,
          },
          'test',
        ),
      );
    const unclassified = { kind: ErrorKind.unclassified, code: 'internal.error', message: 'boom' };
    const spend = async (jobId: string, owner: string, isolated: boolean) => {
      await sql`update jobs set run_after = now() where id = ${jobId}`.execute(handle.db);
      const claimed = await windowStore.claimJob(jobId, owner, {}, isolated);
      assert.ok(claimed);
      return windowStore.failAttempt(claimed.handle, owner, unclassified, undefined, undefined);
    };
    const win = (await make(JobKind.transcribeWindow))!;
    assert.equal(await spend(win.id, 'w1', false), 'retrying');
    assert.equal(await spend(win.id, 'w1', false), 'retrying', 'the budget is spent: isolated, not failed');
    let row = await jobRow(win.id);
    assert.equal(row.status, 'pending');
    assert.equal(row.isolation_reason, 'error_budget_spent');
    assert.ok(row.run_after.getTime() > Date.now() + 30_000, 'after the slow backoff (a minute)');
    assert.equal(await spend(win.id, 'w1/iso', true), 'retrying', 'isolated, it keeps trying');
    row = await jobRow(win.id);
    assert.equal(row.status, 'pending');
    assert.equal(row.error_count, 3);
    const minutes = (await make(JobKind.writeMinutes))!;
    assert.equal(await spend(minutes.id, 'w1', false), 'retrying');
    assert.equal(await spend(minutes.id, 'w1', false), 'failed', 'minutes have their own path (L8, L9)');
    // A permanent error still fails a window at once (its audio is then held: J20, audio tests).
    const win2 = (await make(JobKind.transcribeWindow))!;
    const claimed = (await windowStore.claimJob(win2.id, 'w1'))!;
    const bad = { kind: ErrorKind.permanent, code: 'asr.bad_input', message: 'not audio' };
    assert.equal(await windowStore.failAttempt(claimed.handle, 'w1', bad, undefined, undefined), 'failed');
  });

  void it('J13: a new request supersedes the active job and closes its running attempt, keeping the audit trail', async () => {
    const job = await newJob();
    const claimed = (await store.claimJob(job.id, 'w1'))!;
    await handle.db
      .transaction()
      .execute((trx) => store.supersedeActiveJobs(trx, job.subject_id, JobKind.writeMinutes, 'user:x'));
    const attempt = await handle.db
      .selectFrom('job_attempts')
      .select('status')
      .where('id', '=', claimed.handle.attemptId)
      .executeTakeFirstOrThrow();
    assert.equal(attempt.status, 'superseded');
    const row = await handle.db
      .selectFrom('jobs')
      .select('status')
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'superseded');
    await assert.rejects(
      store.completeAttempt(claimed.handle, 'w1'),
      LostLeaseError,
      'its token no longer commits',
    );
  });

  void it('J12: an attempt handle never serialises its token', async () => {
    const job = await newJob();
    const claimed = (await store.claimJob(job.id, 'w1'))!;
    const token = AttemptHandle.tokenOf(claimed.handle);
    assert.ok(!JSON.stringify(claimed.handle).includes(token));
    assert.ok(!JSON.stringify({ ...claimed.handle }).includes(token));
    assert.ok(!inspect(claimed.handle).includes(token));
  });

  void it("J7/J10: a job is inserted in one place: the close-out SQL starts is the catalog's row, from the same function as every other job", async () => {
    const meetingId = randomUUID();
    await handle.db
      .insertInto('meetings')
      .values({
        id: meetingId,
        workspace_id: workspaceId,
        source: 'live',
        title: 't',
        status: 'processing',
        window_ms: 8000,
      })
      .execute();
    const config = { closeoutMaxErrors: 7, closeoutMaxReclaims: 4 } as Config;
    const spec = specJson(workspacelessSpec(config, JobKind.closeOutMeeting, { meetingId }));
    const started = async () =>
      (
        await sql<{
          outcome: string;
        }>`select verbatim_start_close_out(${meetingId}::uuid, 'test', ${spec}::jsonb) as outcome`.execute(
          handle.db,
        )
      ).rows[0]!.outcome;
    assert.equal(await started(), 'started');
    const job = await handle.db
      .selectFrom('jobs')
      .selectAll()
      .where('meeting_id', '=', meetingId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      [
        job.workspace_id,
        job.kind,
        job.queue,
        job.subject_type,
        job.subject_id,
        job.dedupe_key,
        job.max_errors,
        job.max_reclaims,
        job.payload,
        job.status,
      ],
      [
        workspaceId,
        'close-out-meeting',
        'closeout',
        'meeting',
        meetingId,
        `close-out:${meetingId}`,
        7,
        4,
        { meetingId },
        'pending',
      ],
    );
    assert.ok(job.delivered_at, 'its delivery was enqueued with it');
    const created = await handle.db
      .selectFrom('audit_events')
      .select(['to_status', 'reason', 'actor'])
      .where('subject_id', '=', job.id)
      .execute();
    assert.deepEqual(created, [{ to_status: 'pending', reason: 'close-out-meeting created', actor: 'test' }]);
    assert.equal(await started(), 'not_started', 'a finalizing meeting is not started twice');
    // One function of ours inserts into jobs; a copy of the insert in another would show here.
    const inserters = await sql<{ proname: string }>`select proname from pg_proc
      where proname like 'verbatim_%' and prosrc ilike '%insert into jobs%' order by proname`.execute(
      handle.db,
    );
    assert.deepEqual(
      inserters.rows.map((r) => r.proname),
      ['verbatim_insert_job'],
    );
  });
});
