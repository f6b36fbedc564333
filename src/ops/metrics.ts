import { Gauge, Registry } from 'prom-client';
import type { Db } from '../db/schema.ts';
import { healthFigures, queueStats, storedBytesByWorkspace } from './queue-stats-store.ts';

/** The health figures, each a gauge: the figure's key, the metric's name and its help. */
const HEALTH_FIGURES: Array<[keyof Awaited<ReturnType<typeof healthFigures>>, string, string]> = [
  ['leasesReclaimed', 'verbatim_leases_reclaimed_total', 'Attempts closed as lease_expired'],
  [
    'jobsQuarantined',
    'verbatim_jobs_quarantined_total',
    'Jobs ever isolated (J7/J20: past their reclaim cap, or a window past its error budget)',
  ],
  [
    'jobsIsolated',
    'verbatim_jobs_isolated',
    'Jobs in the isolated lane now, running alone on a slow backoff (J20)',
  ],
  [
    'jobsPoison',
    'verbatim_jobs_poison_total',
    'Jobs declared poison: their isolated runner died run after run (J20)',
  ],
  [
    'heldStretches',
    'verbatim_held_stretches',
    'Windows with no transcript whose audio is held for them (J20: awaiting transcription, or failed and kept for a resubmit)',
  ],
  [
    'heldStretchOldestSeconds',
    'verbatim_held_stretch_oldest_seconds',
    'How long the oldest held stretch has been held (J20)',
  ],
  ['jobsFailed', 'verbatim_jobs_failed', 'Jobs that ended failed (dead letters)'],
  [
    'minutesOutagesInProgress',
    'verbatim_minutes_outages_in_progress',
    'Minutes jobs waiting out a model outage',
  ],
  [
    'jobsWaitingOutOutages',
    'verbatim_jobs_waiting_out_outage',
    'Jobs of any kind that have waited out a provider outage and not yet finished (a window whose recognition always times out shows here)',
  ],
  ['outboxPending', 'verbatim_outbox_pending', 'Events not yet delivered'],
  ['outboxFailed', 'verbatim_outbox_failed', 'Events whose delivery failed for good'],
  [
    'oldestOutboxPendingAgeSeconds',
    'verbatim_outbox_oldest_pending_age_seconds',
    'Age of the oldest undelivered event',
  ],
  ['workersAlive', 'verbatim_workers_alive', 'Workers heartbeating'],
  [
    'audioAwaitingDeletion',
    'verbatim_cleanup_backlog_blobs',
    'Audio objects of ended meetings not yet handed to deletion',
  ],
  ['cleanupPending', 'verbatim_cleanup_pending_objects', 'Objects handed to deletion and not yet deleted'],
  [
    'cleanupFailing',
    'verbatim_cleanup_failed_objects',
    'Pending object deletions that have failed at least once (B9: alert when it grows)',
  ],
  [
    'cleanupStagedExpired',
    'verbatim_cleanup_orphans_awaiting',
    'Staged writes past their deadline, waiting for the cleanup pass',
  ],
  [
    'oldestCleanupPendingAgeSeconds',
    'verbatim_cleanup_oldest_pending_age_seconds',
    'Age of the oldest pending object deletion (B9)',
  ],
  ['webhooksPending', 'verbatim_webhook_deliveries_pending', 'Webhook deliveries not yet accepted'],
  ['webhooksFailed', 'verbatim_webhook_deliveries_failed', 'Webhook deliveries that ran out of attempts'],
  [
    'webhookEndpointsDisabled',
    'verbatim_webhook_endpoints_disabled',
    'Webhook endpoints the system disabled: their deliveries failed for VERBATIM_WEBHOOK_DISABLE_AFTER_DAYS with no success (F6)',
  ],
  [
    'botRecordingsOverdue',
    'verbatim_bot_recordings_overdue',
    'Bot recordings still without a bot after their meeting was due to start (R5/X1)',
  ],
  [
    'botRecordingsErroring',
    'verbatim_bot_recordings_erroring',
    'Pending bot recordings whose last create the provider refused or failed (out of credit, bad key, outage)',
  ],
  ['calendarFeedsFailing', 'verbatim_calendar_feeds_failing', 'Calendar feeds whose last read failed'],
  [
    'searchLedgerMeetings',
    'verbatim_search_ledger_meetings',
    'Published meetings whose search index is missing or behind (O2: the re-drive works them off)',
  ],
  [
    'searchLedgerOldestSeconds',
    'verbatim_search_ledger_oldest_seconds',
    'Seconds since the oldest meeting the search index is behind on last changed',
  ],
  [
    'draftsShed',
    'verbatim_drafts_shed_total',
    'Draft captions skipped because the drafts queue was behind real time (L22: add workers when it grows)',
  ],
  [
    'lateChunksRepairing',
    'verbatim_late_chunks_pending',
    'Chunks that arrived after the timeline went past them, not yet in the transcript (L19)',
  ],
  [
    'lateChunksStuck',
    'verbatim_late_chunks_stuck',
    'Late chunks whose repair gave up (no repair job queued): resubmit the meeting once the cause is fixed',
  ],
];

/**
 * X2: Prometheus metrics computed from the database at scrape time, so every api replica reports
 * the same figures for work done by any worker process.
 */
export function createMetrics(db: Db): { registry: Registry; refresh: () => Promise<void> } {
  const registry = new Registry();
  const queueAge = new Gauge({
    name: 'verbatim_queue_oldest_pending_age_seconds',
    help: 'Age of the oldest due pending job per queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  const queuePending = new Gauge({
    name: 'verbatim_queue_pending_jobs',
    help: 'Pending jobs per queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  const queueRunning = new Gauge({
    name: 'verbatim_queue_running_jobs',
    help: 'Running jobs per queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  // S9: no workspace ids as labels (a scraper is not a tenant, and ids are unbounded label values);
  // `verbatim status` lists bytes per workspace for an operator with database access.
  const storedBytes = new Gauge({
    name: 'verbatim_stored_bytes',
    help: 'Bytes held by all workspaces, pending deletions included (what the global quota counts)',
    registers: [registry],
  });
  const largestWorkspaceBytes = new Gauge({
    name: 'verbatim_stored_bytes_largest_workspace',
    help: 'Bytes held by the workspace holding most (compare with the workspace quota; `verbatim status` names it)',
    registers: [registry],
  });
  const gauges = HEALTH_FIGURES.map(([key, name, help]) => ({
    key,
    gauge: new Gauge({ name, help, registers: [registry] }),
  }));
  const scrapeOk = new Gauge({
    name: 'verbatim_scrape_ok',
    help: 'Whether the database answered',
    registers: [registry],
  });
  const refresh = async (): Promise<void> => {
    try {
      const [stats, health, stored] = await Promise.all([
        queueStats(db),
        healthFigures(db),
        storedBytesByWorkspace(db),
      ]);
      storedBytes.set(stored.reduce((sum, w) => sum + w.bytes, 0));
      largestWorkspaceBytes.set(stored.reduce((most, w) => Math.max(most, w.bytes), 0));
      queueAge.reset();
      queuePending.reset();
      queueRunning.reset();
      for (const s of stats) {
        queueAge.set({ queue: s.queue }, s.oldestPendingAgeSeconds);
        queuePending.set({ queue: s.queue }, s.pending);
        queueRunning.set({ queue: s.queue }, s.running);
      }
      for (const { key, gauge } of gauges) gauge.set(health[key]);
      scrapeOk.set(1);
    } catch {
      scrapeOk.set(0);
    }
  };
  return { registry, refresh };
}
