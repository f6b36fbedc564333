import assert from 'node:assert/strict';
import { it } from 'node:test';
import pg from 'pg';
import { createTestDatabase } from './support/db.ts';

const WORDS = [
  'budget',
  'review',
  'vendor',
  'migration',
  'database',
  'quarter',
  'plan',
  'next',
  'week',
  'launch',
  'well-known',
  "o'brien",
  "budget's",
  'co-op',
  'e-mail',
  'reviewing',
  'reviews',
  'planned',
  'r&d',
];
const FILLER = ['the', 'of', 'and', 'to', 'a', 'we', 'will', 'is'];
const ODD = ["it's a back\\slash", "quote ' inside", 'colon: here', 'ünïcödé wörds', 'x y z'];

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * O4 (issue 18): the pair lexemes that make quoted phrases fast (migration 0032) change no answer.
 * For hundreds of generated queries — phrases taken from the passages, phrases that are not in
 * them, stop words inside, hyphens, apostrophes, negations, `or` — the passages the index's
 * query matches are exactly those that the plain `websearch_to_tsquery` over the text matches,
 * in both configurations.
 */
void it('O4: a quoted phrase finds exactly the passages that say it, with or without the pair index', async () => {
  const tdb = await createTestDatabase();
  const c = new pg.Client({ connectionString: tdb.url });
  await c.connect();
  try {
    const r = rng(7);
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
    const ws = (
      await c.query<{ id: string }>(
        `insert into workspaces (id, name) values (gen_random_uuid(), 'w') returning id`,
      )
    ).rows[0]!.id;
    const texts: string[] = [];
    for (let i = 0; i < 300; i++) {
      const words: string[] = [];
      const n = 4 + Math.floor(r() * 14);
      for (let w = 0; w < n; w++) words.push(r() < 0.3 ? pick(FILLER) : pick(WORDS));
      if (r() < 0.1) words.push(pick(ODD));
      texts.push(words.join(' '));
    }
    // One meeting per passage, so the meetings the search function returns are the passages it matched.
    for (const [i, text] of texts.entries()) {
      await c.query(
        `with m as (
           insert into meetings (id, workspace_id, source, title, status, window_ms, language)
           values (gen_random_uuid(), $1, 'upload', $2, 'complete', 60000, 'en') returning id
         )
         insert into search_passages (workspace_id, meeting_id, kind, start_ms, end_ms, text, lang)
         select $1, id, 'transcript', 0, 1000, $3, $4 from m`,
        [ws, `m${i}`, text, i % 4 === 0 ? 'simple' : 'english'],
      );
    }
    await c.query(`select set_config('verbatim.workspace_id', $1, false)`, [ws]);

    const queries: string[] = [];
    for (let i = 0; i < 150; i++) {
      const words = pick(texts).split(' ');
      const from = Math.floor(r() * words.length);
      const phrase = words.slice(from, from + 2 + Math.floor(r() * 3)).join(' ');
      const other = `${pick(WORDS)} ${pick(FILLER)} ${pick(WORDS)}`;
      queries.push(
        `"${phrase}"`,
        `"${other}"`,
        `"${phrase}" -${pick(WORDS)}`,
        `"${phrase}" or ${pick(WORDS)}`,
      );
      queries.push(`-"${phrase}" ${pick(WORDS)}`, `${pick(WORDS)} "${phrase}" "${other}"`);
    }
    queries.push(`"it's a back\\slash"`, `"quote ' inside"`, `"ünïcödé wörds"`, `"x y z"`, `"colon: here"`);

    let withPairs = 0;
    let matchedWithPairs = 0;
    for (const q of queries) {
      const res = await c.query<{ plain: string[] | null; found: string[] | null; pairs: boolean }>(
        `select (select array_agg(m.title order by m.title) from search_passages p join meetings m on m.id = p.meeting_id
                  where to_tsvector(p.lang, p.text) @@ websearch_to_tsquery(p.lang, $1)) as plain,
                (select array_agg(title order by title)
                   from verbatim_search_meetings($1, null, null, null, null, 0, 1000, 100000)) as found,
                verbatim_phrase_pairs(websearch_to_tsquery('english', $1)) is not null
                  and verbatim_phrase_pairs(websearch_to_tsquery('simple', $1)) is not null as pairs`,
        [q],
      );
      const row = res.rows[0]!;
      assert.deepEqual(row.found ?? [], row.plain ?? [], `query ${q}`);
      if (row.pairs) {
        withPairs++;
        if ((row.plain ?? []).length > 0) matchedWithPairs++;
      }
    }
    // The pairs were in play: most phrase queries carry them, and many of those match passages.
    assert.ok(withPairs > queries.length / 4, `queries with pairs: ${withPairs} of ${queries.length}`);
    assert.ok(matchedWithPairs > 50, `queries with pairs that matched: ${matchedWithPairs}`);

    // Two long adjacent words (unspaced Japanese, or a recogniser's repetition loop), each under
    // Postgres's 2047-byte lexeme limit but not together: the passage is indexed all the same, and
    // found by each word and by a phrase of its neighbours.
    const long = `${'ありがとう'.repeat(70)} ${'ございます'.repeat(70)} next week`;
    const longMeeting = await c.query<{ id: string }>(
      `with m as (
         insert into meetings (id, workspace_id, source, title, status, window_ms, language)
         values (gen_random_uuid(), $1, 'upload', 'long words', 'complete', 60000, 'ja') returning id
       )
       insert into search_passages (workspace_id, meeting_id, kind, start_ms, end_ms, text, lang)
       select $1, id, 'transcript', 0, 1000, $2, 'simple' from m returning meeting_id as id`,
      [ws, long],
    );
    assert.equal(longMeeting.rows.length, 1);
    for (const q of ['ございます'.repeat(70), `"${'ございます'.repeat(70)} next"`, '"next week"']) {
      const found = await c.query<{ title: string }>(
        `select title from verbatim_search($1, null, null, null, null, 0, 1000, 100000, 1)`,
        [q],
      );
      assert.ok(
        found.rows.some((r) => r.title === 'long words'),
        `the long-word passage is found by ${q.slice(0, 20)}…`,
      );
    }

    // And the index answers the pair itself: a phrase's pair is a lexeme of the passage's tsvector.
    const lexemes = await c.query<{ has: boolean }>(
      `select pp.pairs @@ '''budget review'''::tsquery as has
         from search_passages p join search_phrase_pairs pp on pp.passage_id = p.id
        where p.lang = 'english'::regconfig and p.tsv @@ phraseto_tsquery('english', 'budget review') limit 1`,
    );
    assert.equal(lexemes.rows[0]?.has, true);
  } finally {
    await c.end();
    await tdb.drop();
  }
});
