/**
 * (p) Idle event streams (F3): one `verbatim api` process and one worker, ten live meetings with
 * nothing happening, and the database's transactions per second (pg_stat_database, this database only)
 * over a measured stretch with no stream open, then with `streams` streams open (spread over the
 * ten meetings, one key), in the same run; the api process's resident memory before and after.
 * Target: with the streams, transactions/s ≤ 2 × idle.
 */
import { sql } from 'kysely';
import { markedChunk } from '../test/support/chunk-recognizer.ts';
import { memoryOf, startHarness } from '../test/support/harness.ts';
import { listen, spawnApi } from '../test/support/sse.ts';

export interface IdleStreams {
  streams: number;
  open: number;
  /** How the streams that did not open were answered (status: count; 0 is no answer yet). */
  notOpen: Record<string, number>;
  /** What one more stream was answered, when it was refused. */
  refusal: string | null;
  measuredS: number;
  idleTps: number;
  streamsTps: number;
  rssIdleMb: number;
  rssStreamsMb: number;
}

export async function idleStreams(streams = 1000, measureS = 30): Promise<IdleStreams> {
  // One key of one workspace holds them all: its limits (F2) are raised for the measurement.
  const h = await startHarness({
    env: {
      VERBATIM_LOG_LEVEL: 'warn',
      VERBATIM_STREAMS_PER_KEY: String(streams),
      VERBATIM_STREAMS_PER_WORKSPACE: String(streams),
    },
  });
  const { proc, base } = await spawnApi(h);
  // The service as the README starts it has a worker beside its api: its sweeps are part of idle.
  h.spawnWorker();
  const owner = h.db.owner();
  const listeners: Array<ReturnType<typeof listen>> = [];
  try {
    const meetings: string[] = [];
    for (let i = 0; i < 10; i++) {
      const created = await h.request('POST', '/v1/meetings', { source: 'live', title: `idle ${i}` });
      const id = created.json.id as string;
      await h.request('PUT', `/v1/meetings/${id}/chunks/0`, markedChunk(0), { 'content-type': 'audio/wav' });
      meetings.push(id);
    }
    const transactions = async () => {
      const { rows } = await sql<{ n: string }>`select (xact_commit + xact_rollback)::text as n
          from pg_stat_database where datname = current_database()`.execute(owner);
      return Number(rows[0]?.n ?? Number.NaN);
    };
    const rate = async () => {
      // The statistics reach pg_stat_database within a second of a transaction (ten for an idle
      // backend): the stretch is long enough for that to wash out, and both stretches are alike.
      const before = await transactions();
      await new Promise((r) => setTimeout(r, measureS * 1000));
      return ((await transactions()) - before) / measureS;
    };
    // The setup's own statistics flushed first (an idle backend reports within ten seconds).
    await new Promise((r) => setTimeout(r, 12_000));
    const rssIdle = memoryOf(proc.pid).rss;
    const idleTps = await rate();
    for (let i = 0; i < streams; i++) listeners.push(listen(base, h.apiKey, meetings[i % meetings.length]!));
    const opened = async () => listeners.filter((l) => l.status() === 200 && l.events.length > 0).length;
    const deadline = Date.now() + 120_000;
    while ((await opened()) < streams && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const open = await opened();
    let refusal: string | null = null;
    if (open < streams) {
      const res = await fetch(`${base}/v1/meetings/${meetings[0]}/events`, {
        headers: { authorization: `Bearer ${h.apiKey}` },
      });
      if (res.status !== 200) refusal = `${res.status} ${(await res.text()).slice(0, 300)}`;
      else await res.body?.cancel();
    }
    const notOpen: Record<string, number> = {};
    for (const l of listeners)
      if (!(l.status() === 200 && l.events.length > 0)) notOpen[l.status()] = (notOpen[l.status()] ?? 0) + 1;
    // Past the opening reads, into the streams' idle life.
    await new Promise((r) => setTimeout(r, 5_000));
    const streamsTps = await rate();
    const rssStreams = memoryOf(proc.pid).rss;
    return {
      streams,
      open,
      notOpen,
      refusal,
      measuredS: measureS,
      idleTps,
      streamsTps,
      rssIdleMb: rssIdle / 2 ** 20,
      rssStreamsMb: rssStreams / 2 ** 20,
    };
  } finally {
    await Promise.allSettled(listeners.map((l) => l.close()));
    await proc.stop();
    await h.close();
  }
}
