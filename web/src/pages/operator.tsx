import { useState } from 'preact/hooks';
import { call } from '../api.ts';
import { bytes, seconds } from '../format.ts';
import { usePoll } from '../hooks.ts';
import { PlaybackSetting } from '../components/playback-setting.tsx';
import type { AttemptOutcome, JobStatus } from '../../../src/domain/status.ts';

interface Overview {
  queues: Array<{
    queue: string;
    pending: number;
    due: number;
    running: number;
    oldestPendingAgeSeconds: number;
  }>;
  health: {
    leasesReclaimed: number;
    jobsQuarantined: number;
    jobsFailed: number;
    minutesOutagesInProgress: number;
    outboxPending: number;
    outboxFailed: number;
    workersAlive: number;
    audioAwaitingDeletion: number;
    cleanupPending: number;
    cleanupFailing: number;
    cleanupStagedExpired: number;
    oldestCleanupPendingAgeSeconds: number;
    webhooksPending: number;
    webhooksFailed: number;
  };
  /** The caller's workspace only. */
  workspace: { jobsFailed: number; jobsQuarantined: number; minutesOutagesInProgress: number };
  deadLetters: Array<{
    jobId: string;
    kind: string;
    queue: string;
    meetingId: string | null;
    meetingTitle: string | null;
    quarantined: boolean;
    failedAt: string | null;
    error: { code: string | null; message: string | null };
    counts: { errors: number; reclaims: number; waits: number; outageWaits: number };
    attempts: Array<{
      attemptNo: number;
      status: AttemptOutcome | 'running';
      owner: string;
      startedAt: string;
      endedAt: string | null;
      error: { code: string; message: string | null } | null;
    }>;
    resubmittedAs: { jobId: string; status: JobStatus } | null;
  }>;
  outages: Array<{
    jobId: string;
    meetingId: string | null;
    meetingTitle: string | null;
    waits: number;
    waitingSince: string;
    lastError: { code: string | null; message: string | null };
  }>;
  storedBytes: number;
}

/** X1 on a screen: what is stuck and why. */
export function OperatorPage() {
  const [data, setData] = useState<Overview | null>(null);
  const [error, setError] = useState<string | null>(null);
  usePoll(
    async () => {
      try {
        setData(await call<Overview>('GET', '/v1/operator/overview'));
        setError(null);
      } catch (err) {
        setError(`The overview could not be loaded: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    5000,
    [],
  );
  if (!data)
    return error ? (
      <p role="alert" class="error">
        {error}
      </p>
    ) : (
      <p>Loading…</p>
    );
  const h = data.health;
  const w = data.workspace;
  return (
    <>
      <h1>Operator</h1>
      <p class="muted">
        Sections marked <strong>whole installation</strong> count every workspace on this server (numbers
        only, no names); lists name only this workspace&apos;s meetings and jobs.
      </p>
      <PlaybackSetting />
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <QueuesCard queues={data.queues} health={h} />
      <section class="card" aria-labelledby="outages-heading">
        <h2 id="outages-heading">Outages in progress</h2>
        <p data-testid="workspace-outages">
          {w.minutesOutagesInProgress === 0
            ? 'No minutes job of this workspace is waiting out a model outage.'
            : `${w.minutesOutagesInProgress} minutes job(s) of this workspace are waiting out a model outage.`}
        </p>
        <p class="muted">
          Whole installation: {h.minutesOutagesInProgress} minutes job(s) waiting out an outage.
        </p>
        {data.outages.length > 0 && (
          <ul>
            {data.outages.map((o) => (
              <li key={o.jobId}>
                {o.meetingId ? <a href={`#/meetings/${o.meetingId}`}>{o.meetingTitle}</a> : o.jobId}:{' '}
                {o.waits} waits
                {o.lastError.code ? `, last ${o.lastError.code}` : ''}
              </li>
            ))}
          </ul>
        )}
      </section>

      <section class="card" aria-labelledby="dead-heading">
        <h2 id="dead-heading">
          Dead letters in this workspace ({w.jobsFailed}, quarantined {w.jobsQuarantined})
        </h2>
        <p class="muted">
          Whole installation: {h.jobsFailed} failed, {h.jobsQuarantined} quarantined.
        </p>
        {data.deadLetters.length === 0 ? (
          <p>No job in this workspace ended failed.</p>
        ) : (
          data.deadLetters.map((d) => (
            <details key={d.jobId} class="dead" data-job-id={d.jobId}>
              <summary>
                <strong>{d.quarantined ? 'Quarantined' : 'Failed'}</strong> {d.kind}
                {d.meetingId && (
                  <>
                    {' '}
                    of <a href={`#/meetings/${d.meetingId}`}>{d.meetingTitle}</a>
                  </>
                )}
                : {d.error.code} {d.resubmittedAs ? `(resubmitted, now ${d.resubmittedAs.status})` : ''}
              </summary>
              <p class="muted">
                {d.error.message} · errors {d.counts.errors}, reclaims {d.counts.reclaims}, waits{' '}
                {d.counts.waits} ({d.counts.outageWaits} for an outage)
              </p>
              <div class="scroll">
                <table>
                  <caption>Attempt history</caption>
                  <thead>
                    <tr>
                      <th scope="col">#</th>
                      <th scope="col">Outcome</th>
                      <th scope="col">Worker (installation host and process)</th>
                      <th scope="col">Started</th>
                      <th scope="col">Error</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.attempts.map((a) => (
                      <tr key={a.attemptNo}>
                        <td>{a.attemptNo}</td>
                        <td>{a.status}</td>
                        <td>{a.owner}</td>
                        <td>{new Date(a.startedAt).toLocaleString()}</td>
                        <td>{a.error ? `${a.error.code}: ${a.error.message ?? ''}` : ''}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </details>
          ))
        )}
      </section>

      <section class="card" aria-labelledby="cleanup-heading">
        <h2 id="cleanup-heading">Cleanup backlog</h2>
        <p>
          Stored by this workspace: <span data-testid="stored-bytes">{bytes(data.storedBytes)}</span>
        </p>
        <p class="muted">Whole installation:</p>
        <ul>
          <li>
            Object deletions pending: {h.cleanupPending} (failing: {h.cleanupFailing})
          </li>
          <li>
            Oldest pending deletion: {h.cleanupPending ? seconds(h.oldestCleanupPendingAgeSeconds) : '–'}
          </li>
          <li>Orphaned writes awaiting removal: {h.cleanupStagedExpired}</li>
          <li>Ended meetings whose audio is still stored: {h.audioAwaitingDeletion}</li>
        </ul>
      </section>
    </>
  );
}

/** The queues of the whole installation (pending, due, running, the oldest due job) and its health. */
function QueuesCard({ queues, health: h }: { queues: Overview['queues']; health: Overview['health'] }) {
  return (
    <section class="card" aria-labelledby="queues-heading">
      <h2 id="queues-heading">
        Queues <span class="scope">(whole installation)</span>
      </h2>
      <div class="scroll">
        <table>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Pending</th>
              <th scope="col">Due</th>
              <th scope="col">Running</th>
              <th scope="col">Oldest due</th>
            </tr>
          </thead>
          <tbody>
            {queues.length === 0 && (
              <tr>
                <td colSpan={5}>No jobs yet.</td>
              </tr>
            )}
            {queues.map((q) => (
              <tr key={q.queue} data-queue={q.queue}>
                <th scope="row">{q.queue}</th>
                <td>{q.pending}</td>
                <td>{q.due}</td>
                <td>{q.running}</td>
                <td>{q.due ? seconds(q.oldestPendingAgeSeconds) : '–'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p class="muted" data-testid="installation-health">
        Whole installation: workers alive: {h.workersAlive} · leases reclaimed: {h.leasesReclaimed} · events
        pending: {h.outboxPending}
        {h.outboxFailed ? ` (failed ${h.outboxFailed})` : ''} · webhooks pending {h.webhooksPending}, failed{' '}
        {h.webhooksFailed}
      </p>
    </section>
  );
}
