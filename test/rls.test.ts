import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  BinaryOperationNode,
  ColumnNode,
  OperationNodeTransformer,
  ReferenceNode,
  sql,
  ValueNode,
  type KyselyPlugin,
} from 'kysely';
import { openDatabase, type DatabaseHandle } from '../src/db/connect.ts';
import type { Executor } from '../src/db/schema.ts';
import { asSystem, runAsTenant, withTenant } from '../src/db/tenant.ts';
import { PgMeetingStore } from '../src/meetings/pg-meeting-store.ts';
import { createLogger } from '../src/log.ts';
import { createTestDatabase, type TestDatabase } from './support/db.ts';
import { speechWav, startHarness, type Harness } from './support/harness.ts';
import { startCloseOutIfSettled } from '../src/meetings/close-out-start.ts';

/**
 * Rewrites every `workspace_id = x` in a query to `1 = 1`: the store's own query, exactly as it is
 * built, with its workspace filter forgotten.
 */
class ForgetWorkspaceFilter extends OperationNodeTransformer {
  protected override transformBinaryOperation(node: BinaryOperationNode): BinaryOperationNode {
    const left = node.leftOperand;
    if (ReferenceNode.is(left) && ColumnNode.is(left.column) && left.column.column.name === 'workspace_id') {
      return BinaryOperationNode.create(
        ValueNode.createImmediate(1),
        node.operator,
        ValueNode.createImmediate(1),
      );
    }
    return super.transformBinaryOperation(node);
  }
}

const forgetWorkspaceFilter: KyselyPlugin = {
  transformQuery: (args) => new ForgetWorkspaceFilter().transformNode(args.node),
  transformResult: (args) => Promise.resolve(args.result),
};

const forgetful = (db: Executor) => db.withPlugin(forgetWorkspaceFilter);

void describe('row-level security', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  let store: PgMeetingStore;
  const a = randomUUID();
  const b = randomUUID();
  let meetingA: string;
  let meetingB: string;

  before(async () => {
    tdb = await createTestDatabase();
    // One connection: a tenant transaction and the system reads after it share it, so a setting
    // that leaked past its transaction would show.
    handle = openDatabase(tdb.url, createLogger('silent'), 1);
    store = new PgMeetingStore(handle.db);
    await handle.db
      .insertInto('workspaces')
      .values([
        { id: a, name: 'a' },
        { id: b, name: 'b' },
      ])
      .execute();
    const meeting = { source: 'upload' as const, language: null, windowMs: 60_000 };
    meetingA = (await store.create(a, { ...meeting, title: 'of A' })).id;
    meetingB = (await store.create(b, { ...meeting, title: 'of B' })).id;
    for (const [ws, m] of [
      [a, meetingA],
      [b, meetingB],
    ] as const) {
      const window = randomUUID();
      await handle.db
        .insertInto('windows')
        .values({
          id: window,
          workspace_id: ws,
          meeting_id: m,
          index: 0,
          start_ms: 0,
          end_ms: 1000,
          status: 'pending',
        })
        .execute();
      await handle.db
        .insertInto('segments')
        .values({
          workspace_id: ws,
          meeting_id: m,
          window_id: window,
          seq: 0,
          start_ms: 0,
          end_ms: 900,
          text: `words of ${ws}`,
        })
        .execute();
      await handle.db
        .insertInto('bot_recordings')
        .values({
          id: randomUUID(),
          workspace_id: ws,
          meeting_url: 'https://meet.google.com/abc-defg-hij',
          join_at: new Date(),
          ends_at: new Date(Date.now() + 3_600_000),
          status: 'pending',
        })
        .execute();
    }
  });
  after(async () => {
    await handle?.close();
    await tdb?.drop();
  });

  void it('S10: a store query with its workspace filter removed returns no rows of another workspace', async () => {
    // The filter really is removed: on the system path the same call sees both workspaces.
    const everyone = await store.list(a, { limit: 50 }, forgetful(handle.db));
    assert.deepEqual(new Set(everyone.map((m) => m.id)), new Set([meetingA, meetingB]));

    await withTenant(handle.db, a, async (trx) => {
      const listed = await store.list(a, { limit: 50 }, forgetful(trx));
      assert.deepEqual(
        listed.map((m) => m.id),
        [meetingA],
      );
      // Asking for B's meetings by B's id, with the filter gone, still finds only A's.
      const asB = await store.list(b, { limit: 50 }, forgetful(trx));
      assert.deepEqual(
        asB.map((m) => m.id),
        [meetingA],
      );
      await assert.rejects(store.get(a, meetingB, forgetful(trx)), { code: 'meeting.not_found' });

      const raw = await sql<{ id: string; workspace_id: string }>`select * from meetings`.execute(trx);
      assert.deepEqual(
        raw.rows.map((r) => r.workspace_id),
        [a],
      );
      // Child reads keyed by meeting id alone (no workspace column in the query at all).
      assert.deepEqual(await store.segments(meetingB, trx), []);
      assert.equal((await store.windowCounts(meetingB, trx)).total, 0);
      assert.equal((await store.segments(meetingA, trx)).length, 1);
      const tallies = await sql<{ meeting_id: string }>`select meeting_id from window_tallies`.execute(trx);
      assert.deepEqual(
        tallies.rows.map((r) => r.meeting_id),
        [meetingA],
      );
      const recordings = await sql<{ workspace_id: string }>`select workspace_id from bot_recordings`.execute(
        trx,
      );
      assert.deepEqual(
        recordings.rows.map((r) => r.workspace_id),
        [a],
      );
      const workspaces = await sql<{ id: string }>`select id from workspaces`.execute(trx);
      assert.deepEqual(
        workspaces.rows.map((r) => r.id),
        [a],
      );
    });
  });

  void it('S10: a row claiming another workspace cannot be written under a tenant context', async () => {
    await assert.rejects(
      withTenant(handle.db, a, (trx) =>
        trx
          .insertInto('meetings')
          .values({
            id: randomUUID(),
            workspace_id: b,
            source: 'upload',
            title: 'planted',
            status: 'created',
            window_ms: 60_000,
          })
          .execute(),
      ),
      /row-level security/,
    );
    await assert.rejects(
      withTenant(handle.db, a, (trx) =>
        trx.updateTable('meetings').set({ workspace_id: b }).where('id', '=', meetingA).execute(),
      ),
      /row-level security/,
    );
    // Another workspace's rows cannot be touched: the update finds nothing to change.
    const updated = await withTenant(handle.db, a, (trx) =>
      trx.updateTable('meetings').set({ title: 'taken over' }).where('id', '=', meetingB).executeTakeFirst(),
    );
    assert.equal(updated.numUpdatedRows, 0n);
    const deleted = await withTenant(handle.db, a, (trx) =>
      trx.deleteFrom('segments').where('meeting_id', '=', meetingB).executeTakeFirst(),
    );
    assert.equal(deleted.numDeletedRows, 0n);
    const b1 = await store.get(b, meetingB);
    assert.equal(b1.title, 'of B');
    assert.equal((await store.segments(meetingB)).length, 1);
  });

  void it('S10: the system path (workers, sweeps) still sees every workspace, and a tenant context ends with its transaction', async () => {
    await withTenant(handle.db, a, async (trx) => {
      const who = await sql<{ role: string }>`select current_user as role`.execute(trx);
      assert.equal(who.rows[0]!.role, 'verbatim_tenant');
    });
    // The same (only) pooled connection, after the tenant transaction: back to the system role.
    const after = await sql<{ role: string; ws: string | null; n: number }>`
      select current_user as role, nullif(current_setting('verbatim.workspace_id', true), '') as ws,
             (select count(*)::int from meetings) as n`.execute(handle.db);
    assert.notEqual(after.rows[0]!.role, 'verbatim_tenant');
    assert.equal(after.rows[0]!.ws, null);
    assert.equal(after.rows[0]!.n, 2);
    const everyone = await store.list(a, { limit: 50 }, forgetful(handle.db));
    assert.equal(everyone.length, 2);
  });

  void it('S10: the tenant role with no workspace set sees nothing', async () => {
    await handle.db.transaction().execute(async (trx) => {
      await sql`set local role verbatim_tenant`.execute(trx);
      const n = await sql<{ n: number }>`select count(*)::int as n from meetings`.execute(trx);
      assert.equal(n.rows[0]!.n, 0);
    });
    await assert.rejects(
      withTenant(handle.db, '', () => Promise.resolve()),
      /not a workspace id/,
    );
  });

  void it('S10: every workspace-owned table has row-level security and a tenant policy', async () => {
    const tables = await sql<{ table: string; rls: boolean; policy: boolean }>`
      select c.relname as table, c.relrowsecurity as rls,
             exists (select 1 from pg_policy p where p.polrelid = c.oid and p.polname = 'tenant_isolation') as policy
        from pg_class c
       where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
         and exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'workspace_id'
                       and not a.attisdropped)`.execute(handle.db);
    assert.ok(tables.rows.length > 10);
    const unguarded = tables.rows.filter((t) => !t.rls || !t.policy).map((t) => t.table);
    assert.deepEqual(
      unguarded,
      [],
      'a table with workspace_id needs a tenant_isolation policy (see migration 0018)',
    );
    const role = await sql<{ rolsuper: boolean; rolbypassrls: boolean; rolcanlogin: boolean }>`
      select rolsuper, rolbypassrls, rolcanlogin from pg_roles where rolname = 'verbatim_tenant'`.execute(
      handle.db,
    );
    assert.deepEqual(role.rows[0], { rolsuper: false, rolbypassrls: false, rolcanlogin: false });
  });
});

void describe('row-level security for a tenant flow', () => {
  let tdb: TestDatabase;
  let handle: DatabaseHandle;
  const a = randomUUID();
  const b = randomUUID();

  before(async () => {
    tdb = await createTestDatabase();
    // One connection, so the tenant flow and the system reads after it share it.
    handle = openDatabase(tdb.url, createLogger('silent'), 1);
    await handle.db
      .insertInto('workspaces')
      .values([
        { id: a, name: 'a' },
        { id: b, name: 'b' },
      ])
      .execute();
    const store = new PgMeetingStore(handle.db);
    for (const ws of [a, b])
      await store.create(ws, { source: 'upload', language: null, windowMs: 60_000, title: 'untouched' });
  });
  after(async () => {
    await handle?.close();
    await tdb?.drop();
  });

  void it('S10: in a tenant flow, a write that forgets its workspace filter changes no row of another workspace; the connection returns as the system role', async () => {
    const titles = async () =>
      Object.fromEntries(
        (await handle.db.selectFrom('meetings').select(['workspace_id', 'title']).execute()).map((r) => [
          r.workspace_id,
          r.title,
        ]),
      );
    // The update below names workspace B and then forgets even that: as A's tenant it reaches A only.
    const updated = await runAsTenant(a, () =>
      forgetful(handle.db)
        .updateTable('meetings')
        .set({ title: 'overwritten' })
        .where('workspace_id', '=', b)
        .executeTakeFirst(),
    );
    assert.equal(Number(updated.numUpdatedRows), 1);
    assert.deepEqual(await titles(), { [a]: 'overwritten', [b]: 'untouched' });

    // A row of another workspace cannot be written into, either.
    await assert.rejects(
      runAsTenant(a, () =>
        handle.db
          .insertInto('meetings')
          .values({
            id: randomUUID(),
            workspace_id: b,
            source: 'upload',
            status: 'created',
            title: 'planted',
            window_ms: 60_000,
          })
          .execute(),
      ),
      /row-level security/,
    );

    // Who runs the queries: the tenant inside the flow, the system role after it (same connection).
    const who = async () =>
      (
        await sql<{ role: string; ws: string }>`select current_user as role,
          coalesce(current_setting('verbatim.workspace_id', true), '') as ws`.execute(handle.db)
      ).rows[0];
    assert.deepEqual(await runAsTenant(a, who), { role: 'verbatim_tenant', ws: a });
    assert.deepEqual(await who(), { role: 'verbatim_all_workspaces', ws: '' });
    // asSystem is the named way back to every workspace, for whole-installation figures.
    assert.deepEqual(await runAsTenant(a, () => asSystem(who)), { role: 'verbatim_all_workspaces', ws: '' });
  });
});

void describe('row-level security in the API', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  void it("S10: the API's meeting and bot-recording reads run as the tenant role", async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'walled' });
    assert.equal(created.status, 201);
    const id = created.json.id as string;
    const recording = randomUUID();
    await h.app.deps.db
      .insertInto('bot_recordings')
      .values({
        id: recording,
        workspace_id: h.workspaceId,
        meeting_url: 'https://meet.google.com/abc-defg-hij',
        join_at: new Date(),
        ends_at: new Date(Date.now() + 3_600_000),
        status: 'pending',
      })
      .execute();
    const reads = async () => ({
      meeting: (await h.request('GET', `/v1/meetings/${id}`)).status,
      transcript: (await h.request('GET', `/v1/meetings/${id}/transcript`)).status,
      list: ((await h.request('GET', '/v1/meetings')).json.meetings as unknown[]).length,
      recording: (await h.request('GET', `/v1/bot-recordings/${recording}`)).status,
      recordings: ((await h.request('GET', '/v1/bot-recordings')).json.recordings as unknown[]).length,
    });
    assert.deepEqual(await reads(), {
      meeting: 200,
      transcript: 200,
      list: 1,
      recording: 200,
      recordings: 1,
    });

    // Narrow the tenant role's policies to nothing: reads that run as the tenant now find nothing,
    // while the system role (the harness's own reads) is unaffected.
    for (const table of ['meetings', 'bot_recordings']) {
      await sql`alter policy tenant_isolation on ${sql.table(table)} using (false)`.execute(h.db.owner());
    }
    try {
      assert.deepEqual(await reads(), {
        meeting: 404,
        transcript: 404,
        list: 0,
        recording: 404,
        recordings: 0,
      });
      const system = await h.app.deps.db.selectFrom('meetings').select('id').where('id', '=', id).execute();
      assert.equal(system.length, 1);
    } finally {
      const ws = sql.raw(`nullif(current_setting('verbatim.workspace_id', true), '')::uuid`);
      for (const table of ['meetings', 'bot_recordings']) {
        await sql`alter policy tenant_isolation on ${sql.table(table)} using (workspace_id = ${ws})`.execute(
          h.db.owner(),
        );
      }
    }
  });
  void it('S10: every authenticated request runs as its tenant, writes included: each row it inserts or updates is written by verbatim_tenant with its workspace set', async () => {
    // A test-only trigger records who wrote each row, on the tables a request writes.
    const db = h.db.owner();
    await sql`create table s10_writers (tbl text, op text, role text, ws text)`.execute(db);
    await sql`grant insert on s10_writers to verbatim_tenant, verbatim_all_workspaces`.execute(db);
    await sql`create function s10_record() returns trigger language plpgsql as $$
      begin
        insert into s10_writers values (tg_table_name, tg_op, current_user,
          coalesce(current_setting('verbatim.workspace_id', true), ''));
        return null;
      end $$`.execute(db);
    const tables = [
      'meetings',
      'blobs',
      'object_cleanups',
      'jobs',
      'webhook_endpoints',
      'api_keys',
      'outbox',
    ];
    for (const t of tables)
      await sql`create trigger s10_record after insert or update on ${sql.table(t)}
        for each row execute function s10_record()`.execute(db);
    try {
      const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'written' });
      assert.equal(created.status, 201, created.text);
      const upload = await h.request(
        'PUT',
        `/v1/meetings/${created.json.id}/recording`,
        speechWav('one two three'),
        {
          'content-type': 'audio/wav',
        },
      );
      assert.equal(upload.status, 202, upload.text);
      const hook = await h.request('POST', '/v1/webhooks', { url: 'https://example.com/hook' });
      assert.equal(hook.status, 201, hook.text);
      const key = await h.request('POST', '/v1/api-keys', { name: 'second' });
      assert.equal(key.status, 201, key.text);

      const rows = (
        await sql<{ tbl: string; op: string; role: string; ws: string }>`select * from s10_writers`.execute(
          db,
        )
      ).rows;
      const byRequests = rows.filter((r) => r.role === 'verbatim_tenant');
      // Each table the requests write was written by the tenant, with the caller's workspace.
      for (const t of ['meetings', 'blobs', 'object_cleanups', 'jobs', 'webhook_endpoints', 'api_keys'])
        assert.ok(
          byRequests.some((r) => r.tbl === t),
          `a request wrote ${t} as the tenant: ${JSON.stringify(rows)}`,
        );
      assert.deepEqual([...new Set(byRequests.map((r) => r.ws))], [h.workspaceId]);
      // What else wrote these tables is the worker (the upload's processing), as the system role:
      // verbatim_all_workspaces, never the owner.
      // (There may be none: a key's last use is written at most once a minute, F3.)
      const others = rows.filter((r) => r.role !== 'verbatim_tenant');
      assert.ok(
        others.every((r) => r.ws === '' && r.role === 'verbatim_all_workspaces'),
        JSON.stringify(others),
      );
    } finally {
      for (const t of tables) await sql`drop trigger s10_record on ${sql.table(t)}`.execute(db);
      await sql`drop function s10_record()`.execute(db);
      await sql`drop table s10_writers`.execute(db);
    }
  });
});

void it("S10: the installation's storage quota counts every workspace's bytes, though the request runs as one tenant", async () => {
  const wav = speechWav('one two three four five six seven');
  // Room for one recording, not two.
  const h = await startHarness({
    // F1: a recording counts with the windows it becomes (as much again for a 16 kHz WAV).
    apiEnv: { VERBATIM_GLOBAL_QUOTA_BYTES: String(Math.floor(wav.length * 2.5)) },
  });
  try {
    const other = await h.app.workspaces.createWorkspace('other');
    const { apiKey: otherKey } = await h.app.workspaces.createApiKey(other, 'other');
    const asOther = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'of the other' },
      {
        authorization: `Bearer ${otherKey}`,
      },
    );
    assert.equal(asOther.status, 201, asOther.text);
    const stored = await h.request('PUT', `/v1/meetings/${asOther.json.id}/recording`, wav, {
      'content-type': 'audio/wav',
      authorization: `Bearer ${otherKey}`,
    });
    assert.equal(stored.status, 202, stored.text);
    // This workspace stores nothing yet: only the other workspace's bytes leave no room for it.
    const mine = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'mine' });
    const refused = await h.request('PUT', `/v1/meetings/${mine.json.id}/recording`, wav, {
      'content-type': 'audio/wav',
    });
    assert.equal(refused.status, 413, refused.text);
    assert.equal(refused.json.error.code, 'storage.quota_exceeded');
    assert.match(refused.json.error.message, /this installation/);
  } finally {
    await h.close();
  }
});

void it('S10: a close-out started inside a tenant request is enqueued, not left for the rescue sweep', async () => {
  const h = await startHarness();
  try {
    const db = h.app.deps.db;
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'closing' });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    // An upload whose split has cut its last window (J19), and nothing left to transcribe.
    await db
      .updateTable('meetings')
      .set({ status: 'processing', windows_cut_at: new Date() })
      .where('id', '=', id)
      .execute();
    const outcome = await runAsTenant(h.workspaceId, () =>
      db.transaction().execute((trx) => startCloseOutIfSettled(h.app.deps, trx, id, 'test')),
    );
    assert.equal(outcome, 'started');
    const job = await db
      .selectFrom('jobs')
      .select(['delivered_at', 'delivery_id'])
      .where('meeting_id', '=', id)
      .where('kind', '=', 'close-out-meeting')
      .executeTakeFirstOrThrow();
    assert.ok(job.delivered_at, 'delivered in the same transaction');
    const queued = await sql<{ n: number }>`select count(*)::int as n from graphile_worker.jobs
      where key = ${job.delivery_id}`.execute(db);
    assert.equal(queued.rows[0]!.n, 1);
  } finally {
    await h.close();
  }
});
