import type { App } from '../app.ts';
import { AppError } from '../domain/errors.ts';
import { JobKind } from '../domain/status.ts';
import { regenerateMinutes } from '../meetings/minutes.ts';
import { releaseHeldAudio, resubmitMeeting } from '../meetings/operator.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import {
  deadLetters as listDeadLetters,
  inspection,
  jobDetail,
  type JobDetail,
} from '../ops/inspect-store.ts';
import { healthFigures, queueStats, workspaceUsage, type WorkspaceUsage } from '../ops/queue-stats-store.ts';
import { UsageError } from './usage-error.ts';

const out = (line = '') => process.stdout.write(`${line}\n`);
const ts = (d: Date | null) => (d ? d.toISOString() : '-');

/** X1: per queue, how much is waiting and for how long. */
export async function status(app: App): Promise<number> {
  const stats = await queueStats(app.database.db);
  out('queue          pending  due  running  oldest due (s)');
  for (const s of stats) {
    out(
      `${s.queue.padEnd(14)} ${String(s.pending).padStart(7)} ${String(s.due).padStart(4)} ${String(s.running).padStart(8)}  ${s.oldestPendingAgeSeconds.toFixed(1).padStart(14)}`,
    );
  }
  if (stats.length === 0) out('(no jobs yet)');
  const h = await healthFigures(app.database.db);
  out();
  out(
    `dead letters ${h.jobsFailed} (poison ${h.jobsPoison}), leases reclaimed ${h.leasesReclaimed}, isolated now ${h.jobsIsolated} (ever ${h.jobsQuarantined})`,
  );
  out(
    `held stretches ${h.heldStretches} (oldest ${h.heldStretchOldestSeconds.toFixed(1)} s): audio kept for windows with no transcript; verbatim inspect MEETING, resubmit JOB or release MEETING`,
  );
  out(
    `minutes outages in progress ${h.minutesOutagesInProgress}, jobs waiting out an outage ${h.jobsWaitingOutOutages}, workers alive ${h.workersAlive}`,
  );
  out(
    `events pending ${h.outboxPending} (oldest ${h.oldestOutboxPendingAgeSeconds.toFixed(1)} s), failed ${h.outboxFailed}`,
  );
  out(
    `object deletions pending ${h.cleanupPending} (failing ${h.cleanupFailing}, oldest ${h.oldestCleanupPendingAgeSeconds.toFixed(1)} s), orphans awaiting ${h.cleanupStagedExpired}`,
  );
  out(
    `webhook deliveries pending ${h.webhooksPending}, failed ${h.webhooksFailed}; endpoints disabled for failing ${h.webhookEndpointsDisabled}`,
  );
  out(
    `bot recordings overdue ${h.botRecordingsOverdue}, erroring ${h.botRecordingsErroring}; calendar feeds failing ${h.calendarFeedsFailing}`,
  );
  out(`late chunks being added ${h.lateChunksRepairing}, stuck (repair gave up) ${h.lateChunksStuck}`);
  out(`search index behind on ${h.searchLedgerMeetings} meetings (oldest ${h.searchLedgerOldestSeconds} s)`);
  out();
  printUsage(await workspaceUsage(app.database.db));
  return 0;
}

/** F7: one line per workspace: what it stores, waits for, runs, transcribed this month and streams. */
function printUsage(rows: WorkspaceUsage[]): void {
  out(
    'workspace                             name                  weight  stored bytes  reserved bytes  queued windows  running  running cap  hours this month  monthly cap  open streams',
  );
  for (const w of rows) {
    out(
      `${w.workspaceId}  ${w.name.slice(0, 20).padEnd(20)}  ${String(w.weight).padStart(6)}  ${String(w.storedBytes).padStart(12)}  ${String(w.reservedBytes).padStart(14)}  ${String(w.queuedWindows).padStart(14)}  ${String(w.runningJobs).padStart(7)}  ${(w.maxRunningJobs === null ? 'none' : String(w.maxRunningJobs)).padStart(11)}  ${w.hoursThisMonth.toFixed(2).padStart(16)}  ${(w.monthlyHoursCap === null ? 'none' : String(w.monthlyHoursCap)).padStart(11)}  ${String(w.openStreams).padStart(12)}`,
    );
  }
}

/**
 * F5/F7: `verbatim workspaces` lists every workspace's usage; `verbatim workspaces weight ID N`
 * gives one a share of each queue N times the others' (1 by default; 0.1 to 100);
 * `verbatim workspaces hours-cap ID HOURS|none` caps the audio hours it may transcribe a month;
 * `verbatim workspaces running-cap ID N|none` caps how many of its batch jobs run at once.
 */
export async function workspacesCommand(app: App, args: string[]): Promise<number> {
  const [sub, id, value] = args;
  if (sub === undefined || sub === 'list') {
    printUsage(await workspaceUsage(app.database.db));
    return 0;
  }
  if (sub === 'weight') {
    const weight = Number(value);
    if (!id || !isUuid(id) || !Number.isFinite(weight) || weight < 0.1 || weight > 100) {
      throw new UsageError('usage: verbatim workspaces weight WORKSPACE_ID N (N from 0.1 to 100)');
    }
    if (!(await app.workspaces.setFairWeight(id, weight))) {
      out(`no workspace ${id}`);
      return 1;
    }
    out(`workspace ${id}: weight ${weight} (its jobs queued from now on)`);
    return 0;
  }
  if (sub === 'hours-cap') {
    const cap = value === 'none' ? null : Number(value);
    if (!id || !isUuid(id) || (cap !== null && (!Number.isFinite(cap) || cap < 0))) {
      throw new UsageError(
        'usage: verbatim workspaces hours-cap WORKSPACE_ID HOURS|none (HOURS of audio a month, 0 or more)',
      );
    }
    if (!(await app.workspaces.setMonthlyHoursCap(id, cap))) {
      out(`no workspace ${id}`);
      return 1;
    }
    out(
      cap === null
        ? `workspace ${id}: no monthly cap`
        : `workspace ${id}: at most ${cap} hours of audio transcribed a month (UTC); past it, new meetings and uploads get 429 quota.hours_exceeded until the month turns`,
    );
    return 0;
  }
  if (sub === 'running-cap') {
    const cap = value === 'none' ? null : Number(value);
    if (!id || !isUuid(id) || (cap !== null && (!Number.isInteger(cap) || cap < 1))) {
      throw new UsageError(
        'usage: verbatim workspaces running-cap WORKSPACE_ID N|none (N batch jobs at once, 1 or more)',
      );
    }
    if (!(await app.workspaces.setMaxRunningJobs(id, cap))) {
      out(`no workspace ${id}`);
      return 1;
    }
    out(
      cap === null
        ? `workspace ${id}: no running cap`
        : `workspace ${id}: at most ${cap} of its batch jobs (uploads, their windows, repairs) run at once; its live meetings are not capped`,
    );
    return 0;
  }
  throw new UsageError(
    'usage: verbatim workspaces [list] | verbatim workspaces weight WORKSPACE_ID N | verbatim workspaces hours-cap WORKSPACE_ID HOURS|none | verbatim workspaces running-cap WORKSPACE_ID N|none',
  );
}

/**
 * X1: a meeting (windows, jobs, attempts, audit), a single job, or a bot recording (its statuses
 * with the time it entered each, its jobs, its audit trail). Tokens are never selected.
 */
export async function inspect(app: App, id: string): Promise<number> {
  if (!isUuid(id)) {
    out(`not an id: ${id}`);
    return 2;
  }
  const found = await inspection(app.database.db, id);
  if (!found) {
    out(`no meeting, job or bot recording ${id}`);
    return 1;
  }
  if (found.kind === 'meeting') {
    const { meeting, windows } = found;
    out(`meeting ${meeting.id}  "${meeting.title}"  ${meeting.source}  status=${meeting.status}`);
    if (meeting.failure_code) out(`  failure: ${meeting.failure_code}: ${meeting.failure_message}`);
    out(
      `  minutes: ${meeting.minutes_status}${meeting.minutes_code ? ` (${meeting.minutes_code}: ${meeting.minutes_message})` : ''}`,
    );
    out(`  audio deleted: ${ts(meeting.audio_deleted_at)}`);
    out(`windows (${windows.length}):`);
    for (const w of windows) {
      out(
        `  #${w.index} ${(w.start_ms / 1000).toFixed(1)}-${(w.end_ms / 1000).toFixed(1)}s ${w.status}${w.failure_code ? ` ${w.failure_code}` : ''}${heldNote(w, found.jobs)}`,
      );
    }
  } else if (found.kind === 'bot-recording') {
    // R7/R9: a bot recording, its bot's jobs and its trail.
    const { recording } = found;
    out(
      `bot recording ${recording.id}  "${recording.title}"  status=${recording.status}  bot=${recording.bot_id ?? '∅'}  meeting=${recording.meeting_id ?? '∅'}`,
    );
    out(`  joins ${ts(recording.join_at)}  ends ${ts(recording.ends_at)}`);
    if (recording.failure_code) out(`  failure: ${recording.failure_code}: ${recording.failure_message}`);
    if (recording.last_error) out(`  last error: ${ts(recording.last_error_at)} ${recording.last_error}`);
    const times = Object.entries(recording.state_times).sort((a, b) => a[1].localeCompare(b[1]));
    out(`  entered: ${times.map(([status, at]) => `${status} ${at}`).join(', ') || '∅'}`);
  }
  for (const detail of found.jobs) printJob(detail);
  out(`audit trail (${found.audit.length}):`);
  for (const a of found.audit) {
    out(
      `  ${ts(a.at)} ${a.subject_type} ${a.subject_id.slice(0, 8)} ${a.from_status ?? '∅'} -> ${a.to_status} by ${a.actor}${a.reason ? ` (${a.reason})` : ''}`,
    );
  }
  return 0;
}

/** J20: a window with no transcript whose audio is held, said as such. */
function heldNote(
  w: { id: string; status: string; audio_released_at: Date | null; failure_code: string | null },
  jobs: JobDetail[],
): string {
  if (w.audio_released_at) return ` (held audio released ${ts(w.audio_released_at)})`;
  const isolated = jobs.find(
    (d) => d.job.subject_id === w.id && d.job.isolated_at && ['pending', 'running'].includes(d.job.status),
  );
  if (w.status === 'pending' && isolated)
    return ` HELD: isolated (${isolated.job.isolation_reason}), next run ${ts(isolated.job.run_after)}`;
  if (w.status === 'failed' && !['audio.deleted', 'audio.missing'].includes(w.failure_code ?? ''))
    return ' HELD: audio kept for a resubmit';
  return '';
}

function printJob({ job, attempts }: JobDetail): void {
  const index = job.payload.windowIndex;
  const subject = typeof index === 'number' ? ` window #${index}` : '';
  const isolated = job.isolated_at
    ? ` isolated=${job.isolation_reason} since ${ts(job.isolated_at)} runs=${job.isolated_runs} runner_deaths=${job.runner_deaths}`
    : '';
  out(
    `job ${job.id} ${job.kind}${subject} status=${job.status} errors=${job.error_count}/${job.max_errors} reclaims=${job.reclaim_count}/${job.max_reclaims} waits=${job.wait_count} outage_waits=${job.outage_waits}${isolated}${job.last_error_code ? ` last_error=${job.last_error_code}` : ''}`,
  );
  for (const a of attempts) {
    out(
      `  attempt ${a.attempt_no} ${a.status} owner=${a.owner} ${ts(a.started_at)} -> ${ts(a.ended_at)}${a.error_code ? ` ${a.error_code}: ${a.error_message}` : ''}`,
    );
  }
}

/** J16: jobs that ended failed, with their attempt history; never republished as they are. */
export async function deadLetters(app: App): Promise<number> {
  const failed = await listDeadLetters(app.database.db);
  out(`${failed.length} dead letters`);
  for (const letter of failed) {
    printJob(letter);
    const next = letter.replacement;
    out(
      next
        ? `  resubmitted: job ${next.id} is ${next.status}`
        : `  resubmit with: verbatim resubmit ${letter.job.id}`,
    );
  }
  return 0;
}

/**
 * J13/J16: the operator's repair — never a republished message, always a new request. A failed
 * minutes job is answered with a regeneration; any other job with a resubmission of its meeting,
 * which supersedes what is still active and creates the remaining work again.
 */
export async function resubmit(app: App, jobId: string): Promise<number> {
  if (!isUuid(jobId)) {
    out(`not a job id: ${jobId}`);
    return 2;
  }
  const job = (await jobDetail(app.database.db, jobId))?.job;
  if (!job || !job.meeting_id) {
    out(`no job ${jobId} with a meeting`);
    return 1;
  }
  try {
    if (job.kind === JobKind.writeMinutes) {
      await regenerateMinutes(app.deps, job.workspace_id, job.meeting_id);
      out(`minutes of meeting ${job.meeting_id} requested again`);
    } else {
      const result = await resubmitMeeting(app.deps, job.workspace_id, job.meeting_id);
      out(
        `meeting ${job.meeting_id} resubmitted: ${result.superseded} superseded, ${result.created} created`,
      );
    }
  } catch (err) {
    if (err instanceof AppError) {
      out(`cannot resubmit: ${err.code}: ${err.message}`);
      return 1;
    }
    throw err;
  }
  return 0;
}

/**
 * J20: gives up a meeting's held stretches: windows with no transcript whose audio was held for
 * another try. Their jobs end, and the audio is deleted now instead of at the retention bound.
 */
export async function release(app: App, meetingId: string): Promise<number> {
  if (!isUuid(meetingId)) {
    out(`not a meeting id: ${meetingId}`);
    return 2;
  }
  const found = await inspection(app.database.db, meetingId);
  if (!found || found.kind !== 'meeting') {
    out(`no meeting ${meetingId}`);
    return 1;
  }
  const released = await releaseHeldAudio(app.deps, meetingId, 'operator:cli');
  out(
    released === 0
      ? `meeting ${meetingId} holds no audio for untranscribed stretches`
      : `meeting ${meetingId}: ${released} held stretch(es) given up; their audio is being deleted`,
  );
  return 0;
}
