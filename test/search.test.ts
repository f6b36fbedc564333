import type { CheckpointName } from '../src/checkpoints.ts';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { EventType } from '../src/domain/status.ts';
import { emitEvent } from '../src/events/outbox-store.ts';
import { healthFigures } from '../src/ops/queue-stats-store.ts';
import { indexMeetingForSearch, redriveSearchIndex } from '../src/search/indexer.ts';
import { segmentHit } from '../src/domain/search.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  METRICS_AUTH,
  type Harness,
} from './support/harness.ts';
import { startFakeChat } from './support/fake-openai.ts';
import { seedMeeting } from './support/search.ts';

interface SearchJson {
  results: Array<{
    meeting: { id: string; title: string; createdAt: string };
    hits: Array<{
      kind: string;
      startMs: number | null;
      endMs: number | null;
      snippet: string;
      highlights: Array<{ start: number; end: number }>;
      snippetHtml: string;
    }>;
  }>;
  nextCursor: string | null;
  error?: { code: string };
}

interface Passage {
  n: number;
  meetingId: string;
  startMs: number | null;
  text: string;
}

interface AskJson {
  mode: string;
  answer: string | null;
  note: string | null;
  citations: Passage[];
  passages: Passage[];
  error?: { code: string };
}

async function search(h: Harness, q: string, extra = '', key = h.apiKey) {
  const res = await h.request('GET', `/v1/search?q=${encodeURIComponent(q)}${extra}`, undefined, {
    authorization: `Bearer ${key}`,
  });
  return { status: res.status, json: res.json as SearchJson };
}

async function askOf(h: Harness, question: string) {
  const res = await h.request('POST', '/v1/ask', { question });
  return { status: res.status, json: res.json as AskJson };
}

const titlesOf = (res: { json: SearchJson }) => res.json.results.map((r) => r.meeting.title).sort();

/** How many transcript segments the index's stretches hold. */
function segmentsIn(rows: Array<{ segments: unknown }>): number {
  return rows.reduce((n, r) => n + (Array.isArray(r.segments) ? r.segments.length : 0), 0);
}

async function passagesOf(h: Harness, meetingId: string) {
  return h.app.database.db
    .selectFrom('search_passages')
    .select(['kind', 'start_ms', 'text', 'segments'])
    .where('meeting_id', '=', meetingId)
    .orderBy('kind')
    .orderBy('start_ms')
    .execute();
}

void describe('search over meetings (issue 18)', () => {
  let h: Harness;
  let vendor: string;
  let contracts: string;
  let hiring: string;
  before(async () => {
    h = await startHarness();
    vendor = await seedMeeting(h, {
      title: 'vendor review',
      createdAt: new Date('2026-10-01T09:00:00Z'),
      lines: [
        'good morning everyone',
        'we need to renew the vendor contract before march',
        'the legal team reads it this week',
      ],
    });
    contracts = await seedMeeting(h, {
      title: 'legal sync',
      createdAt: new Date('2026-11-01T09:00:00Z'),
      source: 'live',
      lines: ['the contracts with the vendor were signed in june', 'nothing else to report'],
    });
    hiring = await seedMeeting(h, {
      title: 'hiring plan',
      createdAt: new Date('2026-11-20T09:00:00Z'),
      lines: ['we decided to hire two engineers', 'the contract for the recruiter is a separate matter'],
    });
    await seedMeeting(h, {
      title: 'german standup',
      language: 'de',
      lines: ['wir haben den vertrag mit dem lieferanten verlängert'],
    });
    for (const id of [vendor, contracts, hiring])
      assert.equal(await indexMeetingForSearch(h.app.deps, id), 'indexed');
    await redriveSearchIndex(h.app.deps);
  });
  after(async () => {
    await h?.close();
  });

  void it('O4: stemming ("contracts" finds "contract"), quoted phrases, negation and or, in websearch syntax', async () => {
    assert.deepEqual(titlesOf(await search(h, 'contracts')), ['hiring plan', 'legal sync', 'vendor review']);
    assert.deepEqual(
      titlesOf(await search(h, '"vendor contract"')),
      ['vendor review'],
      'a phrase is words in order',
    );
    assert.deepEqual(titlesOf(await search(h, 'contract -vendor')), ['hiring plan']);
    assert.deepEqual(titlesOf(await search(h, 'engineers or legal')), ['hiring plan', 'vendor review']);
    assert.deepEqual(
      titlesOf(await search(h, 'vertrag')),
      ['german standup'],
      'other languages: word for word',
    );
    assert.deepEqual(titlesOf(await search(h, 'lieferanten')), ['german standup']);
    assert.deepEqual((await search(h, 'submarine')).json.results, []);
  });

  void it("O4: a hit names its meeting, title and date, starts at its segment's time, and highlights the matched words", async () => {
    const res = await search(h, 'renew contract');
    assert.equal(res.status, 200);
    const result = res.json.results.find((r: { meeting: { id: string } }) => r.meeting.id === vendor);
    assert.ok(result, 'the vendor meeting is found');
    assert.equal(result.meeting.title, 'vendor review');
    assert.equal(result.meeting.createdAt, '2026-10-01T09:00:00.000Z');
    const hit = result.hits[0]!;
    assert.equal(hit.kind, 'segment');
    const segment = await h.app.database.db
      .selectFrom('segments')
      .select(['start_ms', 'end_ms', 'text'])
      .where('meeting_id', '=', vendor)
      .where('text', 'like', '%renew%')
      .executeTakeFirstOrThrow();
    // E2: the snippet is the line as the transcript reads it, formatted from the recogniser's words.
    assert.deepEqual(
      [hit.startMs, hit.endMs, hit.snippet],
      [segment.start_ms, segment.end_ms, 'We need to renew the vendor contract before march.'],
    );
    assert.equal(segment.text, 'we need to renew the vendor contract before march');
    const marked = hit.highlights.map((m: { start: number; end: number }) =>
      hit.snippet.slice(m.start, m.end),
    );
    assert.deepEqual(marked, ['renew', 'contract']);
    assert.equal(
      hit.snippetHtml,
      'We need to <mark>renew</mark> the vendor <mark>contract</mark> before march.',
    );
  });

  void it('O4: filters by date, source and status; cursor pagination; bad input is a 400 naming the parameter', async () => {
    assert.deepEqual(titlesOf(await search(h, 'contract', '&from=2026-10-15')), [
      'hiring plan',
      'legal sync',
    ]);
    assert.deepEqual(titlesOf(await search(h, 'contract', '&to=2026-10-15')), ['vendor review']);
    assert.deepEqual(titlesOf(await search(h, 'contract', '&source=live')), ['legal sync']);
    assert.deepEqual(titlesOf(await search(h, 'contract', '&status=failed')), []);
    const seen: string[] = [];
    let cursor = '';
    for (let page = 0; page < 5; page++) {
      const res = await search(h, 'contract', `&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      seen.push(...res.json.results.map((r: { meeting: { title: string } }) => r.meeting.title));
      if (!res.json.nextCursor) break;
      cursor = res.json.nextCursor;
    }
    assert.deepEqual(
      seen.sort(),
      ['hiring plan', 'legal sync', 'vendor review'],
      'every meeting once, page by page',
    );
    for (const [extra, code] of [
      ['', 'search.query'],
      ['&limit=0', 'search.limit'],
      ['&cursor=nonsense', 'search.cursor'],
      ['&from=yesterday', 'search.from'],
      ['&source=fax', 'search.source'],
    ] as const) {
      const res = await search(h, extra === '' ? '' : 'contract', extra);
      assert.equal(res.status, 400, `${extra || 'no q'} is refused`);
      assert.equal(res.json.error?.code, code);
    }
  });

  void it("O2/O4: two workspaces never see each other's hits", async () => {
    const other = await h.app.workspaces.createWorkspace('other');
    const { apiKey } = await h.app.workspaces.createApiKey(other, 'other');
    const theirs = await seedMeeting(h, {
      workspaceId: other,
      title: 'their vendor contract',
      lines: ['the vendor contract is theirs alone'],
    });
    await indexMeetingForSearch(h.app.deps, theirs);
    const seenByThem = await search(h, 'contract', '', apiKey);
    assert.deepEqual(titlesOf(seenByThem), ['their vendor contract']);
    assert.ok(!titlesOf(await search(h, 'contract')).includes('their vendor contract'));
    // Below the API too: the tenant's role sees no passage of another workspace.
    const rows = await h.app.database.db.transaction().execute(async (trx) => {
      await sql`select set_config('role', 'verbatim_tenant', true), set_config('verbatim.workspace_id', ${other}, true)`.execute(
        trx,
      );
      return trx.selectFrom('search_passages').select('workspace_id').distinct().execute();
    });
    assert.deepEqual(
      rows.map((r) => r.workspace_id),
      [other],
    );
  });

  void it('O2: indexing is idempotent on (meeting, revision); a repaired transcript replaces its rows; minutes are indexed', async () => {
    const db = h.app.database.db;
    const before = await passagesOf(h, hiring);
    assert.equal(await indexMeetingForSearch(h.app.deps, hiring), 'current');
    assert.deepEqual(await passagesOf(h, hiring), before, 'a second delivery changes nothing');
    // A repair: the transcript's text changes and its revision moves on.
    await db.transaction().execute(async (trx) => {
      await trx
        .updateTable('segments')
        .set({ text: 'we decided to hire three designers' })
        .where('meeting_id', '=', hiring)
        .where('seq', '=', 0)
        .execute();
      await trx
        .updateTable('meetings')
        .set({
          transcript_revision: 1,
          minutes: JSON.stringify({
            writer: 'extractive',
            model: null,
            summary: 'Hiring was discussed. The budget allows a designer.',
            decisions: ['Hire three designers'],
            actionItems: [],
            note: null,
          }),
          minutes_written_at: new Date(),
        })
        .where('id', '=', hiring)
        .execute();
    });
    assert.equal((await healthFigures(db)).searchLedgerMeetings, 1, 'the revised meeting is in the ledger');
    assert.equal(await redriveSearchIndex(h.app.deps), 1);
    assert.equal((await healthFigures(db)).searchLedgerMeetings, 0);
    const after = await passagesOf(h, hiring);
    const stretches = (rows: typeof after) => rows.filter((p) => p.kind === 'transcript');
    assert.equal(stretches(after).length, stretches(before).length, 'rows replaced, not added');
    assert.equal(segmentsIn(stretches(after)), 2, 'each of the two segments once');
    assert.deepEqual(titlesOf(await search(h, 'engineers')), [], 'the old words are gone');
    assert.deepEqual(titlesOf(await search(h, 'designers')), ['hiring plan']);
    const minutesHit = (await search(h, 'budget designer')).json.results[0]!.hits.find(
      (x: { kind: string }) => x.kind === 'minutes',
    );
    assert.ok(minutesHit, 'the minutes are searchable');
    assert.equal(minutesHit.startMs, null);
    const state = await db
      .selectFrom('search_index_state')
      .selectAll()
      .where('meeting_id', '=', hiring)
      .executeTakeFirstOrThrow();
    assert.equal(state.transcript_revision, 1);
    // An event of the older revision delivered late: the index stays at the newer one.
    assert.equal(await indexMeetingForSearch(h.app.deps, hiring), 'current');
    assert.deepEqual(titlesOf(await search(h, 'designers')), ['hiring plan']);
  });

  void it('O2: deleting a meeting removes its index rows in the same transaction', async () => {
    const id = await seedMeeting(h, { title: 'to delete', lines: ['the zeppelin budget'] });
    await indexMeetingForSearch(h.app.deps, id);
    assert.deepEqual(titlesOf(await search(h, 'zeppelin')), ['to delete']);
    assert.equal((await h.request('DELETE', `/v1/meetings/${id}`)).status, 204);
    assert.deepEqual(await passagesOf(h, id), []);
    const state = await h.app.database.db
      .selectFrom('search_index_state')
      .select('meeting_id')
      .where('meeting_id', '=', id)
      .execute();
    assert.deepEqual(state, []);
    assert.deepEqual(titlesOf(await search(h, 'zeppelin')), []);
  });

  void it('O2: a meeting that cannot be indexed does not hold up the ledger entries behind it, and stays in the ledger', async () => {
    const db = h.app.database.db;
    const stuck = await seedMeeting(h, {
      title: 'cannot index',
      lines: ['the walrus budget'],
      createdAt: new Date(Date.now() - 3_600_000),
    });
    await seedMeeting(h, { title: 'indexes fine', lines: ['the narwhal budget'] });
    assert.equal((await healthFigures(db)).searchLedgerMeetings, 2, 'both are in the ledger');
    // Indexing the older one fails (as a passage the database refuses would), every time.
    const failing = {
      ...h.app.deps,
      checkpoints: {
        hit: async (name: CheckpointName, ctx: Record<string, unknown>) => {
          if (name === 'search-index.before-commit' && ctx.meetingId === stuck) {
            throw new Error('this meeting cannot be indexed');
          }
          await h.app.deps.checkpoints.hit(name, ctx as never);
        },
      } as unknown as typeof h.app.deps.checkpoints,
    };
    assert.equal(await redriveSearchIndex(failing), 1, 'the one behind it is indexed');
    assert.deepEqual(titlesOf(await search(h, 'narwhal')), ['indexes fine']);
    assert.deepEqual(titlesOf(await search(h, 'walrus')), []);
    const figures = await healthFigures(db);
    assert.equal(
      figures.searchLedgerMeetings,
      1,
      'the one that failed stays in the ledger, for an operator to see',
    );
    assert.equal(await redriveSearchIndex(h.app.deps), 1, 'and is indexed once it can be');
    assert.deepEqual(titlesOf(await search(h, 'walrus')), ['cannot index']);
    assert.equal((await healthFigures(db)).searchLedgerMeetings, 0);
  });

  void it('O5: ask answers offline with the passages themselves, labelled as such; a question is required', async () => {
    const res = await askOf(h, 'what about the vendor contract?');
    assert.equal(res.status, 200);
    assert.equal(res.json.mode, 'passages');
    assert.equal(res.json.answer, null);
    assert.match(res.json.note ?? '', /No language model is configured/);
    assert.ok(res.json.passages.length >= 1);
    assert.ok(res.json.passages.some((p: { text: string }) => /vendor contract/.test(p.text)));
    const texts = res.json.passages.map((p: { text: string }) => p.text);
    assert.equal(new Set(texts).size, texts.length, 'no passage twice');
    const bad = await askOf(h, '  ');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error?.code, 'ask.question');
  });
});

void describe('search index consumer and ask with a model (issue 18)', () => {
  void it('O2/O4: a transcribed upload is indexed by the consumer; the consumer SIGKILLed mid-index and the event lost are both re-driven, rows not doubled; /metrics and status show the ledger', async () => {
    const h = await startHarness();
    try {
      const db = h.app.database.db;
      // The first worker kills itself just before its index transaction commits.
      const dying = h.spawnWorker({
        VERBATIM_FAULTS: JSON.stringify([{ at: 'search-index.before-commit', action: 'kill', times: 1 }]),
      });
      const id = await uploadMeeting(h, speechWav(SPEECH), 'budget meeting');
      const code = await dying.exited;
      assert.equal(code, null, 'the worker was killed mid-index');
      assert.deepEqual(await passagesOf(h, id), [], 'nothing of the killed index transaction is left');
      assert.equal((await healthFigures(db)).searchLedgerMeetings, 1, 'the meeting waits in the ledger');
      h.spawnWorker();
      await waitFor(
        'the meeting to be indexed',
        async () =>
          await db
            .selectFrom('search_index_state')
            .select('passages')
            .where('meeting_id', '=', id)
            .executeTakeFirst(),
      );
      const segments = await db.selectFrom('segments').select('text').where('meeting_id', '=', id).execute();
      const indexed = (await passagesOf(h, id)).filter((p) => p.kind === 'transcript');
      assert.equal(
        segmentsIn(indexed),
        segments.filter((s) => /\w/.test(s.text)).length,
        'each segment once',
      );
      // Stemming on real recognised speech: "engineer" finds "engineers".
      const res = await search(h, 'engineer');
      assert.deepEqual(
        res.json.results.map((r: { meeting: { id: string } }) => r.meeting.id),
        [id],
      );
      const hit = res.json.results[0]!.hits[0]!;
      const segment = await db
        .selectFrom('segments')
        .select(['start_ms', 'text'])
        .where('meeting_id', '=', id)
        .where('text', 'like', '%engineer%')
        .executeTakeFirstOrThrow();
      assert.equal(hit.startMs, segment.start_ms, 'the hit starts at its segment');

      // An event lost before the dispatcher: the search consumer's outbox row never existed.
      const lost = await seedMeeting(h, { title: 'lost event', lines: ['the quarterly zeppelin review'] });
      await db.transaction().execute(async (trx) => {
        await emitEvent(trx, {
          workspaceId: h.workspaceId,
          type: EventType.meetingTranscribed,
          subjectId: lost,
          payload: { revision: 0 },
        });
        await trx
          .deleteFrom('outbox')
          .where('subject_id', '=', lost)
          .where('consumer', '=', 'search')
          .execute();
      });
      await waitFor(
        'the re-drive to index the meeting whose event was lost',
        async () => (await search(h, 'zeppelin')).json.results.length === 1,
      );
      // Minutes are still being written (the lost meeting's consumer made a job too): each one
      // written puts its meeting behind again until minutes.ready (or the re-drive) indexes them.
      // So the ledger is read once nothing is left to run: no active job, no pending event.
      await waitFor('every job and event settled and the ledger empty', async () => {
        const active = await db
          .selectFrom('jobs')
          .select('id')
          .where('status', 'in', ['pending', 'running'])
          .executeTakeFirst();
        const figures = await healthFigures(db);
        return active === undefined && figures.outboxPending === 0 && figures.searchLedgerMeetings === 0;
      });
      const metrics = await h.api.inject({ method: 'GET', url: '/metrics', headers: METRICS_AUTH });
      assert.equal(metrics.statusCode, 200);
      assert.match(metrics.body, /^verbatim_search_ledger_meetings 0$/m);
      assert.match(metrics.body, /^verbatim_search_ledger_oldest_seconds 0$/m);
    } finally {
      await h.close();
    }
  });

  void it('O5: with the chat model, citations map to the passages it was given (an invented one is dropped); with the model down, the answer is the passages, labelled', async () => {
    let down = false;
    const chat = await startFakeChat(() => (down ? '503' : 'ok'));
    const h = await startHarness({
      env: { VERBATIM_MINUTES: 'openai', VERBATIM_LLM_URL: chat.url, VERBATIM_LLM_API_KEY: 'sk-test-secret' },
    });
    try {
      const a = await seedMeeting(h, {
        title: 'vendor review',
        lines: ['hello', 'we agreed to renew the vendor contract in march', 'thanks all'],
      });
      const b = await seedMeeting(h, {
        title: 'legal sync',
        lines: ['the vendor contract needs a new clause'],
      });
      await redriveSearchIndex(h.app.deps);
      const res = await askOf(h, 'what did we decide about the vendor contract?');
      assert.equal(res.status, 200);
      assert.equal(res.json.mode, 'model', String(res.json.note));
      assert.equal(res.json.note, null);
      const given = res.json.passages as Array<{
        n: number;
        meetingId: string;
        startMs: number;
        text: string;
      }>;
      assert.ok(given.length >= 2);
      assert.ok(res.json.citations.length >= 2, 'the answer cites the passages');
      for (const c of res.json.citations) {
        const passage = given.find((p) => p.n === c.n);
        assert.ok(passage, `citation [${c.n}] is a passage the model was given`);
        assert.deepEqual(c, passage);
        assert.ok([a, b].includes(c.meetingId));
      }
      const invented = given.length + 5;
      assert.ok(chat.prompts.at(-1)!.includes('"n": 1'), 'the model was given numbered passages');
      assert.ok(
        !(res.json.answer ?? '').includes(`[${invented}]`),
        'the invented citation is taken out of the answer',
      );
      const cite = res.json.citations.find((c: { meetingId: string }) => c.meetingId === a);
      assert.equal(cite?.startMs, 0, 'the passage around the hit starts with the segment before it');
      assert.match(cite?.text ?? '', /renew the vendor contract/);
      assert.ok(!JSON.stringify(res.json).includes('sk-test-secret'));

      down = true;
      const offline = await askOf(h, 'what did we decide about the vendor contract?');
      assert.equal(offline.status, 200);
      assert.equal(offline.json.mode, 'passages');
      assert.equal(offline.json.answer, null);
      assert.match(offline.json.note ?? '', /not answering right now/);
      assert.ok(offline.json.passages.length >= 2);
    } finally {
      await h.close();
      await chat.close();
    }
  });
});

void it('O4: a matched stretch of transcript gives the hit of its first segment with a match: its time, its text, its matches', () => {
  const marks = { start: '\u0001', stop: '\u0002' };
  // Three segments joined by spaces; the match is in the second, after an emoji (two UTF-16 units).
  const marked = 'good morning 👋 all so we \u0001renew\u0002 the \u0001contract\u0002 now thanks';
  const hit = segmentHit(
    marked,
    [
      [0, 4000, 18],
      [5000, 9000, 28],
      [10000, 12000, 6],
    ],
    marks,
  );
  assert.deepEqual(
    [hit.kind, hit.startMs, hit.endMs, hit.text],
    ['segment', 5000, 9000, 'so we renew the contract now'],
  );
  assert.deepEqual(
    hit.highlights.map((h) => hit.text.slice(h.start, h.end)),
    ['renew', 'contract'],
  );
  const none = segmentHit('plain words only', [[0, 1000, 16]], marks);
  assert.deepEqual([none.startMs, none.text, none.highlights], [0, 'plain words only', []]);
});
