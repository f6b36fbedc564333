import { sql } from 'kysely';
import type { Checkpoints } from '../checkpoints.ts';
import type { Db } from '../db/schema.ts';
import { ATTEMPT_RUNNING, JobStatus } from '../domain/status.ts';
import type { Logger } from '../log.ts';
import { recordAudit } from './audit-store.ts';
import { enqueueDelivery, newDeliveryId } from './delivery-store.ts';
import { JobRows, RECLAIM_CAP_EXCEEDED, type JobTimings, type ReclaimReport } from './job-rows.ts';

/**
 * The recovery passes over job rows (J7, J8, J9). Each repair is a compare-and-swap under the job
 * row's lock, so any number of workers may run them at once.
 */
export class PgJobSweeps {
  private readonly rows: JobRows;

  constructor(
    private readonly db: Db,
    private readonly timings: JobTimings,
    private readonly deps: { checkpoints: Checkpoints; log: Logger },
  ) {
    this.rows = new JobRows(timings, deps);
  }

  /**
   * J2/J7/J8: the stale-lease sweep. Each expired attempt is closed as lease_expired and its job is
   * returned to the queue (same job, new delivery), past the reclaim cap in the isolated lane (J20).
   * Safe on many replicas at once: each reclaim locks the job and re-checks the attempt.
   */
  async reclaimExpiredLeases(actor: string): Promise<ReclaimReport[]> {
    const expired = await this.db
      .selectFrom('job_attempts')
      .select(['job_id'])
      .where('status', '=', ATTEMPT_RUNNING)
      .where(sql<boolean>`lease_expires_at + ${this.timings.leaseGraceMs} * interval '1 millisecond' < now()`)
      .limit(100)
      .execute();
    const reports: ReclaimReport[] = [];
    for (const { job_id } of expired) {
      // One job that cannot be reclaimed (a throwing hook, a deadlock) must not stall the others.
      const report = await this.db
        .transaction()
        .execute(async (trx) => {
          const job = await trx
            .selectFrom('jobs')
            .selectAll()
            .where('id', '=', job_id)
            .forNoKeyUpdate()
            .executeTakeFirst();
          if (!job || job.status !== JobStatus.running) return null;
          const outcome = await this.rows.closeExpiredAttempt(trx, job, actor);
          return outcome?.report ?? null;
        })
        .catch((err: unknown) => {
          this.deps.log.error(
            { jobId: job_id, err: String(err) },
            'could not reclaim an expired lease; will try again',
          );
          return null;
        });
      if (report) {
        reports.push(report);
        const level = report.quarantined ? 'error' : 'warn';
        this.deps.log[level](
          {
            jobId: report.jobId,
            kind: report.kind,
            reclaims: report.reclaims,
            quarantined: report.quarantined,
          },
          report.quarantined
            ? `job quarantined: ${RECLAIM_CAP_EXCEEDED}; isolated, not failed (J20)`
            : 'expired lease reclaimed; job returned to the queue',
        );
      }
    }
    return reports;
  }

  /**
   * A transport row can stay locked by a worker that is alive: graphile-worker completes or fails
   * job rows in batches, and a batch cut by a lost database connection is dropped (logged, and no
   * longer fatal: V8), leaving its rows locked for graphile-worker's 4 hours. Our rows are the truth,
   * so such a row is only a stale message: a row whose job of ours is not running any more
   * (settled, or pending under a new delivery id) and that has been locked for longer than a
   * lease, or a wake-up row without a job of ours (the outbox dispatcher, the cron backstop)
   * locked for longer than `idleLockMs`, is deleted. Found by the simulation (docs/simulation.md).
   */
  async releaseStaleTransportRows(idleLockMs: number): Promise<number> {
    const lease = this.timings.leaseMs + this.timings.leaseGraceMs;
    const released = await sql`
      delete from graphile_worker._private_jobs g
       where g.locked_at is not null
         and (
           (g.key is not null and exists (select 1 from jobs j where j.delivery_id::text = g.key)
             and not exists (select 1 from jobs j where j.delivery_id::text = g.key and j.status = 'running')
             and g.locked_at < now() - ${lease} * interval '1 millisecond')
           or
           ((g.key is null or not exists (select 1 from jobs j where j.delivery_id::text = g.key))
             and g.locked_at < now() - ${idleLockMs} * interval '1 millisecond'))`.execute(this.db);
    const n = Number(released.numAffectedRows ?? 0);
    if (n > 0)
      this.deps.log.warn(
        { released: n },
        'stale transport rows released (their work is settled or re-driven)',
      );
    return n;
  }

  /**
   * J9: a due pending job with no live delivery (the enqueue failed, its transport row was lost,
   * or graphile-worker's own retry backoff put it off) is re-driven. The compare-and-swap on
   * delivery_id claims the rescue, so racing sweeps re-drive it once, and the new delivery id keeps
   * graphile-worker's job key from deduplicating it.
   */
  async rescuePendingJobs(actor: string): Promise<string[]> {
    const candidates = await this.db
      .selectFrom('jobs')
      .select(['id', 'delivery_id'])
      .where('status', '=', JobStatus.pending)
      .where(sql<boolean>`run_after <= now() - ${this.timings.rescueAfterMs} * interval '1 millisecond'`)
      .where((eb) =>
        eb.or([
          eb('dispatch_claimed_at', 'is', null),
          eb(
            sql<Date>`dispatch_claimed_at`,
            '<',
            sql<Date>`now() - ${this.timings.rescueAfterMs} * interval '1 millisecond'`,
          ),
        ]),
      )
      // A live delivery is one running now or due to run: a transport row that graphile-worker
      // pushed into the future after its handler threw (a claim cut by a lost connection: its own
      // backoff of e^attempts seconds, up to a minute by the fourth) is no live delivery for a job
      // of ours that is due. Found by the simulation: such jobs waited out that backoff.
      .where(
        sql<boolean>`not exists (select 1 from graphile_worker.jobs gj
          where gj.key = jobs.delivery_id::text and gj.attempts < gj.max_attempts
            and (gj.locked_at is not null or gj.run_at <= now()))`,
      )
      .limit(100)
      .execute();
    const rescued: string[] = [];
    for (const candidate of candidates) {
      const ok = await this.db.transaction().execute(async (trx) => {
        const job = await trx
          .updateTable('jobs')
          .set({
            delivery_id: newDeliveryId(),
            dispatch_claimed_at: sql<Date>`now()`,
            updated_at: sql<Date>`now()`,
          })
          .where('id', '=', candidate.id)
          .where('status', '=', JobStatus.pending)
          .where('delivery_id', '=', candidate.delivery_id)
          .returningAll()
          .executeTakeFirst();
        if (!job) return false;
        // The delivery it replaces (backed off by graphile-worker, say) would only claim out of turn.
        await sql`select verbatim_unqueue(${candidate.delivery_id}::text)`.execute(trx);
        await recordAudit(trx, {
          workspaceId: job.workspace_id,
          subjectType: 'job',
          subjectId: job.id,
          from: JobStatus.pending,
          to: JobStatus.pending,
          actor,
          reason: 'delivery lost; re-driven with a fresh delivery id',
        });
        return enqueueDelivery(trx, job, this.deps);
      });
      if (ok) {
        rescued.push(candidate.id);
        this.deps.log.warn({ jobId: candidate.id }, 'pending job had no delivery; re-driven');
      }
    }
    return rescued;
  }

  /**
   * F5: keeps graphile-worker's priorities (a smallint) in range: a queue's base moves up to its
   * lowest pending round once that is `minGap` rounds past it, and the waiting messages are
   * re-priced with it (verbatim_fair_rebase, migration 0053). Returns how many classes moved.
   */
  private lastRebase = 0;

  async rebaseFairRoundsIfDue(minGap: number, everyMs = 5_000): Promise<number> {
    // Every five seconds per process, long before a round could leave graphile-worker's range.
    if (Date.now() - this.lastRebase < everyMs) return 0;
    this.lastRebase = Date.now();
    const { rows } = await sql<{ n: number }>`select verbatim_fair_rebase(${minGap}::float8) as n`.execute(
      this.db,
    );
    return rows[0]?.n ?? 0;
  }
}
