/**
 * The system as the driver watches it (docs/simulation.md): how busy the machine is, when an api
 * process answers, and when the system is quiet after the heal (the moment the oracle judges).
 */
import fs from 'node:fs';
import os from 'node:os';
import pg from 'pg';

const say = (line: string) => process.stdout.write(`${line}\n`);

/**
 * How busy the machine is before the run: its load, and Verbatim processes or Postgres clusters
 * that are not this run's (left by a run stopped by hand, or a test). A loaded machine starves the
 * processes under test, and the figures of such a run (provider calls, heal time) say so.
 */
export function machineLoad(): string {
  const load = os.loadavg()[0]!.toFixed(2);
  let strays = 0;
  let clusters = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmd = '';
    try {
      cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (cmd.includes('src/cli/main.ts') || cmd.includes('dist/cli/main.js')) strays++;
    else if (/postgres -D \S*verbatim-pg-/.test(cmd)) clusters++;
  }
  return `machine: ${os.cpus().length} cores, load ${load}; before the run, ${strays} Verbatim processes and ${clusters} throwaway Postgres clusters not its own`;
}

export async function waitHealthy(port: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await sleep(100);
  }
  throw new Error(`api on port ${port} did not come up`);
}

/**
 * Nothing left to do: every meeting ended, no job waiting or running, no outbox, cleanup or webhook
 * delivery left, no transport job locked.
 */
export async function quiesce(dbUrl: string, boundMs: number, clientsLeft: () => number): Promise<boolean> {
  const started = Date.now();
  const deadline = started + boundMs;
  let lastSaid = started;
  while (Date.now() < deadline) {
    const c = new pg.Client({ connectionString: dbUrl, options: '-c statement_timeout=5000' });
    c.on('error', () => undefined);
    try {
      await c.connect();
      const r = await c.query<Record<string, string>>(`select
          (select count(*) from meetings where status not in ('complete', 'failed', 'created')) as meetings,
          (select count(*) from jobs where status in ('pending', 'running')) as jobs,
          (select string_agg(kind || ' ' || status || ' ×' || n || case when due > 0 then ' due in ' || due || ' s' else '' end, ', ')
             from (select kind, status, count(*) as n,
                          ceil(max(extract(epoch from run_after - now())))::int as due
                     from jobs where status in ('pending', 'running') group by kind, status) j) as kinds,
          (select count(*) from outbox where delivered_at is null) as outbox,
          (select count(*) from object_cleanups) as cleanups,
          (select string_agg(distinct state || case when lease_expires_at > now() then ' leased' else '' end
                  || case when state = 'staged' then ' due in ' || ceil(extract(epoch from reserve_until - now())) || ' s'
                          else ' due in ' || ceil(extract(epoch from next_attempt_at - now())) || ' s' end
                  || ' (' || reason || ')'
                  || case when lease_expires_at > now() then ' by ' || coalesce(
                       (select case when w.declared_dead_at is not null then 'a worker declared dead'
                                    when w.stopped_at is not null then 'a stopped worker'
                                    else 'a live worker, heartbeat ' || ceil(extract(epoch from now() - w.heartbeat_at)) || ' s ago' end
                          from workers w where w.id = lease_owner), 'an unregistered owner') else '' end,
                  '; ') from object_cleanups) as cleanup_detail,
          (select count(*) from webhook_deliveries where status = 'pending') as webhooks,
          (select count(*) from bot_recordings
            where status not in ('complete', 'failed', 'canceled', 'not_recorded')) as bots,
          (select count(*) from graphile_worker._private_jobs where locked_at is not null) as locked,
          (select count(*) from windows where pending_at_publication) as late`);
      const row = r.rows[0] ?? {};
      row.clients = String(clientsLeft());
      const busy = [
        'clients',
        'meetings',
        'jobs',
        'outbox',
        'cleanups',
        'webhooks',
        'bots',
        'locked',
        'late',
      ].filter((k) => Number(row[k]) > 0);
      if (busy.length === 0) return true;
      // What the heal is still waiting on, every ten seconds, so a slow heal explains itself.
      if (Date.now() - lastSaid >= 10_000) {
        lastSaid = Date.now();
        say(
          `  heal +${Math.round((Date.now() - started) / 1000)} s: ` +
            busy.map((k) => `${k} ${row[k]}`).join(', ') +
            (row.kinds ? ` (jobs: ${row.kinds})` : '') +
            (row.cleanup_detail ? ` (cleanups: ${row.cleanup_detail.slice(0, 300)})` : ''),
        );
      }
    } catch {
      // a worker restart or a slow server: ask again
    } finally {
      await c.end().catch(() => undefined);
    }
    await sleep(500);
  }
  return false;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
