import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from '../src/db/schema.ts';
import { liveState } from '../src/meetings/live-state.ts';
import { storeChunk } from '../src/meetings/live.ts';
import { PgMeetingStore } from '../src/meetings/pg-meeting-store.ts';
import { markedChunk } from './support/chunk-recognizer.ts';
import { startHarness } from './support/harness.ts';

/**
 * L21: what storing one chunk costs the database, counted by Postgres itself (rows read through
 * scans and index fetches, rows written) and by statements sent, over a run of chunks early in a
 * meeting and the same run 5,000 chunks later. Everything runs on one connection, so the counters
 * flushed by that backend are exactly this path's (the staging pool's two tables are left out).
 */
void it('L21: storing chunk k costs the same for k = 10 and k = 5,000 (rows read, rows written, statements)', async () => {
  const h = await startHarness({
    env: {
      VERBATIM_WINDOW_SECONDS: '10',
      VERBATIM_CHUNK_SECONDS: '0.1',
      VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
    },
  });
  // Without sequential scans where an index can serve: a table still tiny at k = 10 would be
  // scanned whole (the cheapest plan for ten rows), which says nothing about the access pattern.
  const pool = new pg.Pool({ connectionString: h.db.url, max: 1, options: '-c enable_seqscan=off' });
  let statements = 0;
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (event.level === 'query') statements++;
    },
  });
  try {
    const deps = { ...h.app.deps, db, meetings: new PgMeetingStore(db) };
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'a long one' });
    const id = created.json.id as string;
    // A chunk of 0.1 s: 100 chunks fill one 10 s window, so each measured run cuts one window.
    const RUN = 100;
    const store = async (k: number) => {
      const stored = await storeChunk(deps, h.workspaceId, id, String(k), markedChunk(k % 400, 1600), 'wav');
      // What the route reads to answer: the meeting's counts and its late-audio state.
      await deps.meetings.windowCounts(id);
      await liveState(db, stored.meeting);
    };
    const counters = async () => {
      await sql`select pg_stat_force_next_flush()`.execute(db);
      const row = await sql<{ read: string; written: string }>`
        select coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) as read,
               coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) as written
          from pg_stat_user_tables where relname not in ('object_cleanups', 'storage_guards')`.execute(db);
      return { read: Number(row.rows[0]!.read), written: Number(row.rows[0]!.written), statements };
    };
    // No worker runs here (its counters would mix in): windows cut so far are settled as a worker
    // would settle them, so that both runs start with no backlog of windows in flight.
    const transcribeCut = async () => {
      await db
        .updateTable('jobs')
        .set({ status: 'completed' })
        .where('meeting_id', '=', id)
        .where('status', '=', 'pending')
        .execute();
      await db
        .updateTable('windows')
        .set({ status: 'transcribed' })
        .where('meeting_id', '=', id)
        .where('status', '=', 'pending')
        .execute();
    };
    const measure = async (from: number) => {
      await transcribeCut();
      const before = await counters();
      for (let k = from; k < from + RUN; k++) await store(k);
      const after = await counters();
      return {
        read: (after.read - before.read) / RUN,
        written: (after.written - before.written) / RUN,
        statements: (after.statements - before.statements - 3) / RUN,
      };
    };
    for (let k = 0; k < 10; k++) await store(k);
    const early = await measure(10);
    for (let k = 10 + RUN; k < 5_000; k++) await store(k);
    const late = await measure(5_000);
    console.log(`per chunk at k=10: ${JSON.stringify(early)}; at k=5000: ${JSON.stringify(late)}`);
    const windows = await db.selectFrom('windows').select('id').where('meeting_id', '=', id).execute();
    assert.ok(windows.length >= 25, `${windows.length} windows were cut on the way`);
    for (const key of ['read', 'written', 'statements'] as const) {
      assert.ok(
        late[key] <= early[key] * 2,
        `${key}: ${late[key]} per chunk at 5,000 vs ${early[key]} at 10`,
      );
    }
  } finally {
    await db.destroy();
    await h.close();
  }
});
