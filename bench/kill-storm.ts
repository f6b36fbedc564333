/**
 * (c) under a kill storm (J20): one api and three worker processes of the real CLI, with
 * the default settings and real PocketSphinx, take uploads and live meetings while a random one of
 * them is SIGKILLed every `killEveryMs` for `stormMs` (a supervisor starts it again after 0.3 s, as
 * systemd would). The clients are patient: each request is retried until it is answered. Then the
 * kills stop and the run waits until every meeting has ended and no window is held.
 *
 * Reported: how many windows needed the isolated lane (their job passed its reclaim cap, or their
 * error budget), how long after the storm the last of them was transcribed, next to the last
 * ordinary window of the same run (the baseline), and what was lost: windows failed or held, and
 * the meetings' words against the speech they were given (PocketSphinx's own errors included).
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase } from '../test/support/db.ts';
import {
  freePort,
  killIsolatedRunners,
  speechWav,
  spawnVerbatim,
  type WorkerProcess,
} from '../test/support/harness.ts';
import { chunksOf } from '../test/support/live.ts';
import { sleep } from './fixtures.ts';

export interface KillStormResult {
  kills: number;
  meetings: number;
  complete: number;
  windows: number;
  /** Windows whose job entered the isolated lane. */
  isolated: number;
  /** Windows failed (poison or otherwise) or still held when the run ended: words not there. */
  lost: number;
  /** End of the storm → the last isolated window transcribed (null: none was isolated). */
  lastIsolatedS: number | null;
  /** End of the storm → the last ordinary window transcribed: the baseline of the same run. */
  lastOrdinaryS: number | null;
  /** End of the storm → every meeting ended and nothing held. */
  quietS: number;
  /** Words of the speech found in the transcripts, over all meetings. */
  wordsKept: number;
  wordsGiven: number;
}

const TEXT =
  'The quarterly budget meeting will discuss the marketing plan. We decided to hire two engineers. ' +
  'Alice will send the report to the finance team by Friday. The customer survey shows strong demand ' +
  'in the northern region. Bob will prepare the hiring plan and the travel budget for next quarter.';

export async function killStorm(opts: {
  killEveryMs: number;
  stormMs: number;
  uploads: number;
  lives: number;
  log: (line: string) => void;
}): Promise<KillStormResult> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-storm-'));
  const port = await freePort();
  const env: Record<string, string> = {
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_PORT: String(port),
    VERBATIM_LOG_LEVEL: 'warn',
    VERBATIM_DRAFTS: 'off',
  };
  const setup = await openApp(loadConfig(env), { logger: createLogger('silent') });
  const workspaceId = await setup.workspaces.createWorkspace('storm');
  const { apiKey } = await setup.workspaces.createApiKey(workspaceId, 'storm');
  await setup.close();

  const roles = ['api', 'worker', 'worker', 'worker'] as const;
  const procs: Array<WorkerProcess | null> = roles.map(() => null);
  let stopping = false;
  const start = (i: number) => {
    if (stopping) return;
    const p = spawnVerbatim([roles[i]!], env);
    procs[i] = p;
    void p.exited.then(() => {
      if (!stopping) setTimeout(() => start(i), 300);
    });
  };
  roles.forEach((_, i) => start(i));

  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, url: string, body?: Buffer | object, type?: string) => {
    for (;;) {
      try {
        const res = await fetch(base + url, {
          method,
          headers: {
            authorization: `Bearer ${apiKey}`,
            ...(body === undefined ? {} : { 'content-type': type ?? 'application/json' }),
          },
          body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        if (res.status >= 500 || res.status === 429 || res.status === 408)
          throw new Error(String(res.status));
        return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
      } catch {
        await sleep(250);
      }
    }
  };
  const create = async (source: 'upload' | 'live', title: string) => {
    const key = randomUUID();
    for (;;) {
      const res = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify({ source, title }),
        signal: AbortSignal.timeout(30_000),
      }).catch(() => null);
      if (res && (res.status === 201 || res.status === 200)) return ((await res.json()) as { id: string }).id;
      await sleep(250);
    }
  };

  await pollUntilUp(base);
  const wav = speechWav(TEXT);
  const chunks = chunksOf(TEXT);
  const meetingIds: string[] = [];
  let kills = 0;
  const storm = (async () => {
    const until = Date.now() + opts.stormMs;
    while (Date.now() < until) {
      await sleep(opts.killEveryMs);
      const i = Math.floor(Math.random() * procs.length);
      const p = procs[i];
      if (p && p.proc.exitCode === null && p.proc.signalCode === null) {
        p.proc.kill('SIGKILL');
        kills++;
      }
    }
  })();
  const clients = [
    ...Array.from({ length: opts.uploads }, async (_, n) => {
      await sleep(n * 3000);
      const id = await create('upload', `upload ${n}`);
      meetingIds.push(id);
      const put = await call('PUT', `/v1/meetings/${id}/recording`, wav, 'audio/wav');
      if (put.status !== 202 && put.status !== 409) throw new Error(`upload refused: ${put.status}`);
    }),
    ...Array.from({ length: opts.lives }, async (_, n) => {
      await sleep(n * 2000);
      const id = await create('live', `live ${n}`);
      meetingIds.push(id);
      for (const [seq, chunk] of chunks.entries()) {
        const put = await call('PUT', `/v1/meetings/${id}/chunks/${seq}`, chunk, 'audio/wav');
        if (put.status >= 300) throw new Error(`chunk ${seq} refused: ${put.status}`);
        await sleep(1000);
      }
      const end = await call('POST', `/v1/meetings/${id}/end`, { chunks: chunks.length });
      if (end.status >= 300 && end.status !== 409) throw new Error(`end refused: ${end.status}`);
    }),
  ];
  await Promise.all([storm, ...clients]);
  const stormEnded = Date.now();
  opts.log(`    storm over: ${kills} kills; waiting for every meeting to end and nothing to be held…`);

  const probe = new pg.Client({ connectionString: db.url });
  await probe.connect();
  const ids = [...meetingIds];
  let quietAt = 0;
  for (;;) {
    const left = await probe.query<{ n: number }>(
      `select count(*)::int as n from meetings m where m.id = any($1::uuid[])
         and (m.status not in ('complete', 'failed')
              or exists (select 1 from windows w where w.meeting_id = m.id and w.status = 'pending'))`,
      [ids],
    );
    if (left.rows[0]!.n === 0) {
      quietAt = Date.now();
      break;
    }
    if (Date.now() - stormEnded > 20 * 60_000) throw new Error('the run did not settle within 20 minutes');
    await sleep(500);
  }
  const windows = await probe.query<{ transcribed_at: Date | null; status: string; isolated: boolean }>(
    `select w.transcribed_at, w.status,
            exists (select 1 from jobs j where j.subject_id = w.id and j.isolated_at is not null) as isolated
       from windows w where w.meeting_id = any($1::uuid[]) and w.status <> 'superseded'`,
    [ids],
  );
  const meetings = await probe.query<{ status: string; text: string | null }>(
    `select m.status, (select string_agg(s.text, ' ' order by s.start_ms) from segments s where s.meeting_id = m.id) as text
       from meetings m where m.id = any($1::uuid[])`,
    [ids],
  );
  await probe.end();
  stopping = true;
  await Promise.all(procs.map((p) => (p ? p.stop() : Promise.resolve())));
  killIsolatedRunners(db.url);
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });

  const after = (rows: typeof windows.rows) => {
    const times = rows.filter((w) => w.transcribed_at).map((w) => w.transcribed_at!.getTime());
    return times.length === 0 ? null : Math.max(0, (Math.max(...times) - stormEnded) / 1000);
  };
  const words = TEXT.toLowerCase().match(/[a-z]+/g)!;
  let kept = 0;
  for (const m of meetings.rows) {
    const said = new Set((m.text ?? '').toLowerCase().match(/[a-z]+/g) ?? []);
    kept += words.filter((w) => said.has(w)).length;
  }
  return {
    kills,
    meetings: meetings.rows.length,
    complete: meetings.rows.filter((m) => m.status === 'complete').length,
    windows: windows.rows.length,
    isolated: windows.rows.filter((w) => w.isolated).length,
    lost: windows.rows.filter((w) => w.status !== 'transcribed' && w.status !== 'missing').length,
    lastIsolatedS: after(windows.rows.filter((w) => w.isolated)),
    lastOrdinaryS: after(windows.rows.filter((w) => !w.isolated)),
    quietS: (quietAt - stormEnded) / 1000,
    wordsKept: kept,
    wordsGiven: words.length * meetings.rows.length,
  };
}

async function pollUntilUp(base: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`${base}/healthz`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) return;
    await sleep(100);
  }
  throw new Error('the api did not come up');
}
