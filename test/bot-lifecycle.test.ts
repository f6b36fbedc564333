import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { moveBotRecording } from '../src/bots/bot-recording-store.ts';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import {
  BotRecordingStatus,
  BotRecordingTransitions,
  botTransitionTo,
  type BotRecordingStatus as Status,
} from '../src/domain/status.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';

const ALL = Object.values(BotRecordingStatus);

void describe('bot recording lifecycle', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  let workspaceId: string;

  before(async () => {
    tdb = await createTestDatabase();
    handle = openDatabase(tdb.url, createLogger('silent'));
    workspaceId = randomUUID();
    await handle.db.insertInto('workspaces').values({ id: workspaceId, name: 't' }).execute();
  });
  after(async () => {
    await handle?.close();
    await tdb?.drop();
  });

  /** A recording sitting in `status` (set directly: this is the test's starting point). */
  async function recordingIn(status: Status): Promise<string> {
    const id = randomUUID();
    await handle.db
      .insertInto('bot_recordings')
      .values({
        id,
        workspace_id: workspaceId,
        meeting_url: `https://meet.example.com/${id}`,
        join_at: new Date(),
        ends_at: new Date(Date.now() + 3_600_000),
        status,
      })
      .execute();
    return id;
  }

  const trail = (id: string) =>
    handle.db.selectFrom('audit_events').selectAll().where('subject_id', '=', id).orderBy('id').execute();

  void it('R7/R9: every legal move is made, with its audit row and the time the recording entered its new status', async () => {
    let walked = 0;
    for (const t of Object.values(BotRecordingTransitions)) {
      for (const from of t.from) {
        const id = await recordingIn(from);
        const moved = await handle.db
          .transaction()
          .execute((trx) =>
            moveBotRecording(trx, id, t.to, { actor: 'test', reason: `walk ${from} → ${t.to}`, set: {} }),
          );
        assert.equal(moved?.status, t.to, `${from} → ${t.to} is made`);
        assert.ok(moved.state_times[t.to], `${from} → ${t.to}: the time it entered ${t.to}`);
        const rows = await trail(id);
        assert.equal(rows.length, 1, `${from} → ${t.to}: one audit row`);
        assert.deepEqual(
          [rows[0]!.subject_type, rows[0]!.from_status, rows[0]!.to_status, rows[0]!.actor, rows[0]!.reason],
          ['bot_recording', from, t.to, 'test', `walk ${from} → ${t.to}`],
        );
        walked++;
      }
    }
    assert.ok(walked >= 20, `walked ${walked} legal moves`);
  });

  void it('R7/R9: every move the lifecycle does not list is refused, leaves the row as it was and is audited as refused', async () => {
    let refused = 0;
    for (const from of ALL) {
      for (const to of ALL) {
        if ((botTransitionTo(to).from as readonly string[]).includes(from)) continue;
        const id = await recordingIn(from);
        const moved = await handle.db.transaction().execute((trx) =>
          moveBotRecording(trx, id, to, {
            actor: 'test',
            reason: 'an illegal ask',
            set: { failure_code: 'should.not.stick' },
          }),
        );
        assert.equal(moved, null, `${from} → ${to} is refused`);
        const row = await handle.db
          .selectFrom('bot_recordings')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.equal(row.status, from, `${from} → ${to}: the status is unchanged`);
        assert.equal(row.failure_code, null, `${from} → ${to}: nothing else was written`);
        assert.equal(row.state_times[to], undefined);
        const rows = await trail(id);
        assert.equal(rows.length, 1, `${from} → ${to}: one audit row`);
        assert.equal(rows[0]!.from_status, from);
        assert.equal(rows[0]!.to_status, to);
        assert.match(rows[0]!.reason ?? '', /^refused: .*an illegal ask/);
        assert.deepEqual(rows[0]!.details, { refused: true });
        refused++;
      }
    }
    // Ten statuses: a hundred pairs, of which the lifecycle lists a few.
    assert.ok(refused > 60, `refused ${refused} illegal moves`);
  });

  void it('R9: a move whose caller condition no longer holds (another writer got there first) is not made and not recorded', async () => {
    const id = await recordingIn(BotRecordingStatus.pending);
    await sql`update bot_recordings set bot_id = 'bot-1' where id = ${id}::uuid`.execute(handle.db);
    const moved = await handle.db.transaction().execute((trx) =>
      moveBotRecording(trx, id, BotRecordingStatus.scheduled, {
        actor: 'test',
        reason: 'attach bot-2',
        when: (r) => r.bot_id === null,
        set: { bot_id: 'bot-2' },
      }),
    );
    assert.equal(moved, null);
    const row = await handle.db
      .selectFrom('bot_recordings')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual([row.status, row.bot_id], [BotRecordingStatus.pending, 'bot-1']);
    assert.equal((await trail(id)).length, 0);
  });

  void it('R7: a recording walked from pending to complete keeps the time it entered each status, in order', async () => {
    const id = await recordingIn(BotRecordingStatus.pending);
    const path: Status[] = [
      BotRecordingStatus.scheduled,
      BotRecordingStatus.joining,
      BotRecordingStatus.inCall,
      BotRecordingStatus.recording,
      BotRecordingStatus.processing,
      BotRecordingStatus.complete,
    ];
    for (const to of path) {
      await handle.db
        .transaction()
        .execute((trx) => moveBotRecording(trx, id, to, { actor: 'test', reason: 'walk' }));
    }
    const row = await handle.db
      .selectFrom('bot_recordings')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    const entered = path.map((s) => Date.parse(row.state_times[s]!));
    assert.ok(
      entered.every((t, i) => i === 0 || t >= entered[i - 1]!),
      'entered in order',
    );
    assert.deepEqual(
      (await trail(id)).map((a) => a.to_status),
      path,
    );
  });
});
