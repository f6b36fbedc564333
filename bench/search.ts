/**
 * (j) Search latency and indexing throughput. A corpus of BENCH_SEARCH_MEETINGS (2,000)
 * published meetings of BENCH_SEARCH_MINUTES (60) minutes each, one 5 s segment of generated speech
 * after another (a fixed vocabulary drawn with a Zipf law, so some words are in every meeting and
 * some in a few, seeded so every run has the same text), is written to the tables a transcription
 * leaves. The index is then built by the search consumer (`indexMeetingForSearch`, what the
 * dispatcher calls for meeting.transcribed), four meetings at a time as four workers would, and
 * timed: segments/s, and the meetings per minute that makes. Then 200 queries of mixed kinds (a
 * common word, a rarer one, two words, a quoted phrase, a negation, an `or`) go through
 * GET /v1/search (in-process inject, no network), timed end to end.
 *
 * Targets on this machine: p95 ≤ 50 ms, and indexing at least 100 meetings per minute.
 */
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql, type Insertable } from 'kysely';
import pg from 'pg';
import type { SegmentsTable } from '../src/db/schema.ts';
import { buildAppApi, openApp, type App } from '../src/app.ts';
import { Role } from '../src/domain/roles.ts';
import { createInviteLink, redeemLink } from '../src/workspaces/sign-in.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { indexMeetingForSearch } from '../src/search/indexer.ts';
import { createTestDatabase } from '../test/support/db.ts';

const SEGMENT_MS = 5000;

/**
 * Statistics for the planner, gathered as the tables' owner: the app's login owns nothing (S10),
 * and ANALYZE skips, with only a warning, a table its caller does not own. Without statistics the
 * text match is planned blind (a rare word took 22 s, a phrase 4 min). An installation has them
 * from autovacuum; this server may run with it off.
 */
async function analyzeAsOwner(url: string): Promise<void> {
  const owner = new pg.Client({ connectionString: url });
  await owner.connect();
  try {
    await owner.query('analyze');
  } finally {
    await owner.end();
  }
}

/** A person who joined the workspace by an invite link, with their session's secret. */
async function joined(app: App, workspaceId: string, email: string, role: Role) {
  const invite = await createInviteLink(app.people, workspaceId, role, null);
  const signed = await redeemLink(app.people, {
    token: invite.token,
    email,
    password: 'bench password 123',
    address: null,
  });
  return { userId: signed.user.id, secret: signed.secret };
}
const WORDS_PER_SEGMENT = 12;

export interface SearchBench {
  meetings: number;
  segments: number;
  seedS: number;
  indexS: number;
  segmentsPerS: number;
  meetingsPerMinute: number;
  queries: number;
  p50Ms: number;
  p95Ms: number;
  byKind: Array<{ kind: string; p50Ms: number; p95Ms: number; meanHits: number }>;
  /** The baseline: the same one-word lookups as a scan of the segments (ILIKE), as without the index. */
  scanP50Ms: number;
  /** (n) with `perUser`: the same queries as a member who reads two thirds of the corpus. */
  people?: PeopleBench;
}

/** (n) people: what per-user visibility and cookie sessions cost next to the workspace-wide key. */
export interface PeopleBench {
  /** Meetings the member may read (their own, shared with them, or the workspace's). */
  visible: number;
  memberP50Ms: number;
  memberP95Ms: number;
  /** The same queries by the workspace-wide key, each next to the member's (the baseline). */
  keyP50Ms: number;
  keyP95Ms: number;
  /** GET /v1/meetings/{id}: by the bearer key, and by the member's session cookie. */
  readKeyP50Ms: number;
  readKeyP95Ms: number;
  readCookieP50Ms: number;
  readCookieP95Ms: number;
}

/** A small deterministic generator (mulberry32), so the corpus is the same every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const BASE = (
  'budget contract vendor renewal launch customer release roadmap hiring engineer design review ' +
  'marketing campaign finance report deadline quarter revenue forecast pricing support ticket ' +
  'migration database server outage incident security audit compliance legal invoice payment ' +
  'partner onboarding training feedback survey metric dashboard analytics mobile web backend ' +
  'frontend testing deployment pipeline staging production rollback feature request priority ' +
  'sprint planning retrospective standup demo prototype research interview candidate offer ' +
  'salary benefit office lease travel conference sponsor booth webinar newsletter blog social ' +
  'content brand logo website domain email calendar meeting agenda minutes decision action owner ' +
  'schedule delay risk dependency scope estimate capacity headcount contractor agency supplier ' +
  'shipment warehouse inventory logistics procurement tender proposal quote discount churn ' +
  'retention upgrade subscription license renewal trial conversion funnel lead pipeline deal'
).split(/\s+/);

/** The vocabulary: real meeting words, then made-up project names that are rarer by the Zipf law. */
function vocabulary(): string[] {
  const out = [...new Set(BASE)];
  const syllables = ['zan', 'kor', 'vel', 'mira', 'tus', 'quen', 'dor', 'ly', 'bex', 'ron', 'sa', 'fi'];
  const r = rng(7);
  while (out.length < 3000) {
    const n = 2 + Math.floor(r() * 3);
    let w = '';
    for (let i = 0; i < n; i++) w += syllables[Math.floor(r() * syllables.length)];
    if (!out.includes(w)) out.push(w);
  }
  return out;
}

/** A Zipf sampler over `n` ranks (exponent 1). */
function zipf(n: number, r: () => number): () => number {
  const cumulative: number[] = [];
  let sum = 0;
  for (let k = 1; k <= n; k++) cumulative.push((sum += 1 / k));
  return () => {
    const x = r() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

const FILLER = ['the', 'we', 'will', 'and', 'to', 'of', 'a', 'for', 'on', 'is', 'that', 'with'];

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

export async function searchBench(
  meetings = 2000,
  minutes = 60,
  queries = 200,
  opts: { perUser?: boolean } = {},
): Promise<SearchBench> {
  // BENCH_SEARCH_DB: the URL of a corpus an earlier run kept (BENCH_SEARCH_KEEP=1), same meetings
  // and minutes: its text is generated again (for the phrases) but neither written nor indexed,
  // and the latest migrations are applied to it. For trying a query change in a minute, not for
  // the figures of record (its indexing time is not measured).
  const reuse = process.env.BENCH_SEARCH_DB;
  const db = reuse
    ? { url: reuse, appUrl: reuse, name: new URL(reuse).pathname.slice(1), drop: () => Promise.resolve() }
    : await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-search-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
    // A kept corpus (BENCH_SEARCH_DB) is opened again with the key its secrets were sealed with.
    VERBATIM_SECRET_KEY:
      process.env.VERBATIM_SECRET_KEY ?? createHash('sha256').update(`bench-search:${db.name}`).digest('hex'),
  });
  const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
  const api = buildAppApi(app);
  await api.ready();
  try {
    const workspaceId = reuse
      ? (
          await app.database.db
            .selectFrom('workspaces')
            .select('id')
            .where('name', '=', 'bench')
            .executeTakeFirstOrThrow()
        ).id
      : await app.workspaces.createWorkspace('bench');
    const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
    const words = vocabulary();
    const r = rng(42);
    const pick = zipf(words.length, r);
    const perMeeting = Math.round((minutes * 60_000) / SEGMENT_MS);
    const ids: string[] = [];
    const phrases: string[] = [];

    // The corpus: as transcriptions leave it (meeting, window, segments), not yet indexed.
    let t = performance.now();
    const database = app.database.db;
    for (let m = 0; m < meetings; m++) {
      const meetingId = randomUUID();
      const windowId = randomUUID();
      ids.push(meetingId);
      const rows: Insertable<SegmentsTable>[] = [];
      for (let s = 0; s < perMeeting; s++) {
        const text: string[] = [];
        for (let w = 0; w < WORDS_PER_SEGMENT; w++) {
          text.push(w % 3 === 1 ? FILLER[Math.floor(r() * FILLER.length)]! : words[pick()]!);
        }
        if (s === 7 && m % 10 === 0) phrases.push(`${text[2]} ${text[3]} ${text[4]}`);
        rows.push({
          workspace_id: workspaceId,
          meeting_id: meetingId,
          window_id: windowId,
          seq: s,
          start_ms: s * SEGMENT_MS,
          end_ms: s * SEGMENT_MS + SEGMENT_MS - 200,
          text: text.join(' '),
        });
      }
      if (reuse) continue;
      await database.transaction().execute(async (trx) => {
        await trx
          .insertInto('meetings')
          .values({
            id: meetingId,
            workspace_id: workspaceId,
            source: 'upload',
            title: `meeting ${m}`,
            status: 'complete',
            window_ms: minutes * 60_000,
            language: 'en',
            transcript_completed_at: new Date(),
            created_at: new Date(Date.UTC(2026, 0, 1) + m * 3_600_000),
          })
          .execute();
        await trx
          .insertInto('windows')
          .values({
            id: windowId,
            workspace_id: workspaceId,
            meeting_id: meetingId,
            index: 0,
            start_ms: 0,
            end_ms: minutes * 60_000,
            status: 'transcribed',
          })
          .execute();
        for (let i = 0; i < rows.length; i += 2000) {
          await trx
            .insertInto('segments')
            .values(rows.slice(i, i + 2000))
            .execute();
        }
      });
    }
    const seedS = (performance.now() - t) / 1000;
    if (reuse) {
      // The kept corpus's own meetings, in the order they were made (one hour apart).
      const kept = await database
        .selectFrom('meetings')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .orderBy('created_at')
        .execute();
      ids.splice(0, ids.length, ...kept.map((k) => k.id));
    }

    // The index, built by the consumer: four at a time.
    t = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: reuse ? 0 : 4 }, async () => {
        while (next < ids.length) {
          const id = ids[next++]!;
          const outcome = await indexMeetingForSearch(app.deps, id);
          if (outcome !== 'indexed') throw new Error(`meeting ${id} was ${outcome}, not indexed`);
        }
      }),
    );
    const indexS = (performance.now() - t) / 1000;
    const segments = meetings * perMeeting;
    await analyzeAsOwner(db.url);

    // The queries: six kinds, in turn.
    const q = rng(99);
    const word = (fromRank: number, toRank: number) =>
      words[fromRank + Math.floor(q() * (toRank - fromRank))]!;
    const kinds: Array<[string, () => string]> = [
      ['common word', () => word(0, 20)],
      ['rarer word', () => word(200, 3000)],
      ['two words', () => `${word(0, 150)} ${word(20, 600)}`],
      ['phrase', () => `"${phrases[Math.floor(q() * phrases.length)]}"`],
      ['negation', () => `${word(0, 60)} -${word(0, 60)}`],
      ['or', () => `${word(300, 3000)} or ${word(300, 3000)}`],
    ];
    const times: number[] = [];
    const asked: string[] = [];
    const perKind = new Map<string, { ms: number[]; hits: number[] }>();
    let headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
    const run = async (query: string) => {
      const started = performance.now();
      const res = await api.inject({
        method: 'GET',
        url: `/v1/search?q=${encodeURIComponent(query)}`,
        headers,
      });
      const ms = performance.now() - started;
      if (res.statusCode !== 200) throw new Error(`search "${query}": ${res.statusCode} ${res.body}`);
      return { ms, hits: (JSON.parse(res.body) as { results: unknown[] }).results.length };
    };
    for (let i = 0; i < 10; i++) await run(kinds[i % kinds.length]![1]()); // warm-up, not counted
    for (let i = 0; i < queries; i++) {
      const [kind, make] = kinds[i % kinds.length]!;
      const query = make();
      asked.push(query);
      const { ms, hits } = await run(query);
      times.push(ms);
      const entry = perKind.get(kind) ?? { ms: [], hits: [] };
      entry.ms.push(ms);
      entry.hits.push(hits);
      perKind.set(kind, entry);
    }
    times.sort((a, b) => a - b);

    // (n): the same queries, in the same order, as a member who may read two thirds of the corpus
    // (a third private to someone else, a third shared with them, a third the workspace's), with
    // the session cookie; and one meeting's read by key and by cookie.
    let people: PeopleBench | undefined;
    if (opts.perUser) {
      const member = await joined(
        app,
        workspaceId,
        `member-${randomUUID().slice(0, 8)}@bench.example`,
        Role.member,
      );
      const other = await joined(
        app,
        workspaceId,
        `other-${randomUUID().slice(0, 8)}@bench.example`,
        Role.member,
      );
      await sql`update meetings set owner_user_id = ${other.userId}::uuid,
                  visibility = case when (substr(title, 9)::int % 3) = 0 then 'private'
                                    when (substr(title, 9)::int % 3) = 1 then 'shared' else 'workspace' end
                where workspace_id = ${workspaceId}::uuid`.execute(database);
      await sql`insert into meeting_shares (meeting_id, user_id, workspace_id)
                select id, ${member.userId}::uuid, workspace_id from meetings
                 where workspace_id = ${workspaceId}::uuid and visibility = 'shared'
                on conflict do nothing`.execute(database);
      await analyzeAsOwner(db.url);
      const visible = Math.round((meetings * 2) / 3);
      const memberTimes: number[] = [];
      const keyTimes: number[] = [];
      const asMember = { cookie: `verbatim_session=${member.secret}` };
      const asKey = { authorization: `Bearer ${apiKey}` };
      headers = asMember;
      for (const query of asked.slice(0, 10)) await run(query); // warm-up, not counted
      // Each query by both, in turn first, so neither finds the pages the other warmed more often.
      for (const [i, query] of asked.entries()) {
        for (const who of i % 2 === 0 ? [asMember, asKey] : [asKey, asMember]) {
          headers = who;
          (who === asMember ? memberTimes : keyTimes).push((await run(query)).ms);
        }
      }
      memberTimes.sort((a, b) => a - b);
      keyTimes.sort((a, b) => a - b);
      const reads = async (h: Record<string, string>) => {
        const ms: number[] = [];
        for (let i = 0; i < 300 + 20; i++) {
          const id = ids[(i * 3 + 2) % ids.length]!; // a workspace meeting: both may read it
          const started = performance.now();
          const res = await api.inject({ method: 'GET', url: `/v1/meetings/${id}`, headers: h });
          if (res.statusCode !== 200) throw new Error(`read ${id}: ${res.statusCode} ${res.body}`);
          if (i >= 20) ms.push(performance.now() - started);
        }
        return ms.sort((a, b) => a - b);
      };
      // Interleaved, so neither gets the warmer machine.
      const byKey: number[] = [];
      const byCookie: number[] = [];
      for (let round = 0; round < 3; round++) {
        byKey.push(...(await reads({ authorization: `Bearer ${apiKey}` })));
        byCookie.push(...(await reads({ cookie: `verbatim_session=${member.secret}` })));
      }
      byKey.sort((a, b) => a - b);
      byCookie.sort((a, b) => a - b);
      people = {
        visible,
        memberP50Ms: percentile(memberTimes, 0.5),
        memberP95Ms: percentile(memberTimes, 0.95),
        keyP50Ms: percentile(keyTimes, 0.5),
        keyP95Ms: percentile(keyTimes, 0.95),
        readKeyP50Ms: percentile(byKey, 0.5),
        readKeyP95Ms: percentile(byKey, 0.95),
        readCookieP50Ms: percentile(byCookie, 0.5),
        readCookieP95Ms: percentile(byCookie, 0.95),
      };
    }
    const scans: number[] = [];
    for (let i = 0; i < 10; i++) {
      const w = word(200, 3000);
      const started = performance.now();
      await sql`select meeting_id, count(*) from segments where workspace_id = ${workspaceId}
        and text ilike ${`%${w}%`} group by meeting_id order by count(*) desc limit 20`.execute(database);
      scans.push(performance.now() - started);
    }
    scans.sort((a, b) => a - b);
    return {
      ...(people ? { people } : {}),
      scanP50Ms: percentile(scans, 0.5),
      meetings,
      segments,
      seedS,
      indexS,
      segmentsPerS: segments / indexS,
      meetingsPerMinute: (meetings / indexS) * 60,
      queries,
      p50Ms: percentile(times, 0.5),
      p95Ms: percentile(times, 0.95),
      byKind: [...perKind].map(([kind, e]) => {
        const sorted = [...e.ms].sort((a, b) => a - b);
        return {
          kind,
          p50Ms: percentile(sorted, 0.5),
          p95Ms: percentile(sorted, 0.95),
          meanHits: e.hits.reduce((a, b) => a + b, 0) / e.hits.length,
        };
      }),
    };
  } finally {
    await api.close();
    await app.close();
    // BENCH_SEARCH_KEEP=1 keeps the corpus's database for EXPLAIN (its URL is printed).
    if (process.env.BENCH_SEARCH_KEEP === '1' || reuse) process.stdout.write(`    corpus kept: ${db.url}\n`);
    else await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
