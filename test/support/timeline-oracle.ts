import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { Db } from '../../src/db/schema.ts';

/**
 * Invariants of a live meeting's timeline that hold whatever order its chunks came in
 * (docs/live-meetings.md): live windows tile [0, cut) without hole or overlap; placed chunks and
 * reserved gaps tile [0, placed); segments lie inside their windows; the tallies match the rows.
 * With `settled`, nothing is left to place or repair and the cut reached the end.
 */
export async function assertTimeline(db: Db, meetingId: string, opts: { settled: boolean }): Promise<void> {
  const meeting = await db
    .selectFrom('meetings')
    .selectAll()
    .where('id', '=', meetingId)
    .executeTakeFirstOrThrow();
  const windows = await db
    .selectFrom('windows')
    .select(['id', 'start_samples', 'end_samples', 'start_ms', 'end_ms', 'status'])
    .where('meeting_id', '=', meetingId)
    .where('status', '<>', 'superseded')
    .orderBy('start_samples')
    .execute();
  let at = 0;
  for (const w of windows) {
    assert.equal(Number(w.start_samples), at, `window ${w.id} starts where the one before ends`);
    assert.ok(Number(w.end_samples) > at, `window ${w.id} is not empty`);
    at = Number(w.end_samples);
  }
  assert.equal(at, Number(meeting.cut_samples), 'the windows end at the cut');

  const chunks = await db
    .selectFrom('chunks')
    .select(['seq', 'start_samples', 'samples'])
    .where('meeting_id', '=', meetingId)
    .where('start_samples', 'is not', null)
    .execute();
  const gaps = await db.selectFrom('timeline_gaps').selectAll().where('meeting_id', '=', meetingId).execute();
  const pieces = [
    ...chunks.map((c) => ({
      seq: c.seq,
      end: c.seq + 1,
      start: Number(c.start_samples),
      length: c.samples ?? 0,
    })),
    ...gaps.map((g) => ({
      seq: g.first_seq,
      end: g.end_seq,
      start: Number(g.start_samples),
      length: Number(g.samples),
    })),
  ].sort((a, b) => a.seq - b.seq);
  let pos = 0;
  let seq = 0;
  for (const p of pieces) {
    assert.equal(p.seq, seq, `sequence number ${seq} is placed exactly once`);
    assert.equal(p.start, pos, `seq ${p.seq} starts where the one before it ends`);
    pos += p.length;
    seq = p.end;
  }
  assert.equal(seq, meeting.next_seq, 'everything below the frontier is placed');
  assert.equal(
    meeting.missing_count,
    gaps.filter((g) => g.arrived_at === null).reduce((n, g) => n + g.end_seq - g.first_seq, 0),
    'the missing count matches the runs not arrived',
  );
  assert.equal(pos, Number(meeting.placed_samples), 'the placed chunks end at placed_samples');

  const outside = await sql<{ n: number }>`
    select count(*)::int as n from segments s join windows w on w.id = s.window_id
     where s.meeting_id = ${meetingId}::uuid
       and (w.status = 'superseded' or s.start_ms < w.start_ms or s.end_ms > w.end_ms or s.end_ms < s.start_ms)`.execute(
    db,
  );
  assert.equal(outside.rows[0]!.n, 0, 'every segment lies inside a live window');

  const tally = await db
    .selectFrom('window_tallies')
    .selectAll()
    .where('meeting_id', '=', meetingId)
    .executeTakeFirst();
  const count = (status: string) => windows.filter((w) => w.status === status).length;
  assert.deepEqual(
    { total: tally?.total ?? 0, transcribed: tally?.transcribed ?? 0, missing: tally?.missing ?? 0 },
    { total: windows.length, transcribed: count('transcribed'), missing: count('missing') },
    'the window tallies match the windows',
  );

  if (opts.settled) {
    assert.equal(Number(meeting.cut_samples), Number(meeting.placed_samples), 'the cut reached the end');
    assert.ok(!gaps.some((g) => g.arrived_at !== null), 'no arrived chunk is left unplaced');
    const unplaced = await db
      .selectFrom('chunks')
      .select('seq')
      .where('meeting_id', '=', meetingId)
      .where('start_samples', 'is', null)
      .execute();
    assert.deepEqual(unplaced, [], 'every stored chunk is on the timeline');
  }
}

/** A meeting's first reserved gap (if any) and its cut, read together for tests that wait on them. */
export async function firstGapAndCut(db: Db, meetingId: string) {
  const gap = await db
    .selectFrom('timeline_gaps')
    .selectAll()
    .where('meeting_id', '=', meetingId)
    .orderBy('first_seq')
    .executeTakeFirst();
  const m = await db
    .selectFrom('meetings')
    .select('cut_samples')
    .where('id', '=', meetingId)
    .executeTakeFirstOrThrow();
  return { gap, cut: Number(m.cut_samples) };
}
