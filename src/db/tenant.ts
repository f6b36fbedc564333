import { AsyncLocalStorage } from 'node:async_hooks';
import { sql } from 'kysely';
import { isDatabaseConnectionLoss } from './connection-errors.ts';
import { ALL_WORKSPACES_ROLE } from './roles.ts';
import type { Db, Tx } from './schema.ts';

/** The role tenant work runs as (migration 0018): no BYPASSRLS, rows of one workspace only. */
export const TENANT_ROLE = 'verbatim_tenant';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function checkedWorkspace(workspaceId: string): string {
  // An empty or malformed id would be a bug upstream; the policy would also refuse it.
  if (!UUID.test(workspaceId)) throw new Error(`not a workspace id: ${JSON.stringify(workspaceId)}`);
  return workspaceId;
}

/**
 * S10: the workspace the current async flow acts for, or none (the system path). Set for the whole
 * of an authenticated API request (runAsTenant, src/api/server.ts); every database connection
 * checked out inside it is switched to the tenant role with that workspace (ValidatingPool.connect,
 * src/db/connect.ts), so every query of the request, read or write, sees only that workspace's rows.
 */
const scope = new AsyncLocalStorage<{ workspaceId: string | null; viewer?: Viewer }>();

/**
 * U4: the person a tenant flow reads for: `seeAll` false limits its meetings to those it may read
 * (verbatim_meeting_visible, migration 0041); no viewer, or seeAll, reads the whole workspace.
 */
export interface Viewer {
  userId: string | null;
  seeAll: boolean;
  /** U5: a share link's reader: this one meeting (and its tracks), nothing else. */
  onlyMeeting?: string;
}

/** The settings the meeting policy reads, for the current flow's viewer. */
function viewerSettings(): [string, string] {
  const viewer = scope.getStore()?.viewer;
  if (viewer?.onlyMeeting) return ['', `meeting:${viewer.onlyMeeting}`];
  return [viewer?.userId ?? '', viewer && !viewer.seeAll ? 'off' : 'on'];
}

/** The workspace the current flow acts for; null on the system path. */
export function currentTenant(): string | null {
  return scope.getStore()?.workspaceId ?? null;
}

/** Runs `fn` (and everything it starts) as `workspaceId`'s tenant: its connections see that workspace only. */
export function runAsTenant<T>(workspaceId: string, fn: () => T, viewer?: Viewer): T {
  return scope.run({ workspaceId: checkedWorkspace(workspaceId), ...(viewer ? { viewer } : {}) }, fn);
}

/**
 * Runs `fn` on the system path from inside a tenant flow: for the few reads that are about the whole
 * installation on purpose (the installation's storage quota, the operator's queue figures). Its
 * connections are checked out as the system role. Use it by name, never to get around a policy.
 */
export function asSystem<T>(fn: () => T): T {
  return scope.run({ workspaceId: null }, fn);
}

/**
 * The statement a checked-out connection runs first (it doubles as the liveness check): the role
 * and workspace of the current flow, session-wide until the next checkout sets them again.
 */
export function checkoutStatement(): { text: string; values: string[] } {
  const workspaceId = currentTenant();
  const [userId, seeAll] = workspaceId ? viewerSettings() : ['', 'on'];
  return {
    text:
      "select set_config('role', $1, false), set_config('verbatim.workspace_id', $2, false), " +
      "set_config('verbatim.user_id', $3, false), set_config('verbatim.see_all', $4, false)",
    values: workspaceId
      ? [TENANT_ROLE, workspaceId, userId, seeAll]
      : [ALL_WORKSPACES_ROLE, '', userId, seeAll],
  };
}

/**
 * Inside a transaction of a tenant flow, runs `fn` as the system role and switches back: for a
 * whole-installation read that must share the transaction (the installation quota under the
 * storage guards). On the system path it only runs `fn`.
 */
export async function systemInTx<T>(trx: Tx, fn: () => Promise<T>): Promise<T> {
  const workspaceId = currentTenant();
  if (!workspaceId) return fn();
  const restore = () => sql`select set_config('role', ${TENANT_ROLE}, true)`.execute(trx);
  await sql`select set_config('role', ${ALL_WORKSPACES_ROLE}, true)`.execute(trx);
  let result: T;
  try {
    result = await fn();
  } catch (err) {
    // A caller may catch this and go on (a savepoint): the rest must not run as the system role. In
    // an aborted transaction the restore fails, and the rollback (to the savepoint) restores it.
    await restore().catch(() => undefined);
    throw err;
  }
  await restore();
  return result;
}

/**
 * Runs `fn` in a transaction that can see and write only `workspaceId`'s rows (S10), whatever the
 * flow it is called from: the role and `verbatim.workspace_id` are set for this transaction only
 * (SET LOCAL), so a query that forgets its `where workspace_id` returns nothing of another
 * workspace. Queries keep their own workspace filter; this is the second wall.
 */
export async function withTenant<T>(db: Db, workspaceId: string, fn: (trx: Tx) => Promise<T>): Promise<T> {
  checkedWorkspace(workspaceId);
  return db.transaction().execute(async (trx) => {
    await setTenantLocal(trx, workspaceId);
    return fn(trx);
  });
}

/**
 * withTenant for a read made of several statements that must agree (a meeting and its counts): one
 * snapshot for all of them, so a commit landing between two statements cannot show, say, a
 * transcript's old revision beside the counts of its new one.
 */
export async function readAsTenant<T>(db: Db, workspaceId: string, fn: (trx: Tx) => Promise<T>): Promise<T> {
  checkedWorkspace(workspaceId);
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      await setTenantLocal(trx, workspaceId);
      return fn(trx);
    });
}

/** The tenant role, its workspace and (U4) its viewer, for this transaction only. */
async function setTenantLocal(trx: Tx, workspaceId: string): Promise<void> {
  const [userId, seeAll] = viewerSettings();
  await sql`select set_config('role', ${TENANT_ROLE}, true),
                   set_config('verbatim.workspace_id', ${workspaceId}, true),
                   set_config('verbatim.user_id', ${userId}, true),
                   set_config('verbatim.see_all', ${seeAll}, true)`.execute(trx);
}

/** Start-up check (S10): the connection user may switch to the tenant role; otherwise a clear error. */
export async function assertTenantRole(db: Db): Promise<void> {
  try {
    await db.transaction().execute(async (trx) => {
      await sql`select set_config('role', ${TENANT_ROLE}, true)`.execute(trx);
    });
  } catch (err) {
    if (isDatabaseConnectionLoss(err)) throw err;
    throw new Error(
      `the database user cannot switch to the role ${TENANT_ROLE} (${String(err)}); as an administrator run: ` +
        `grant ${TENANT_ROLE} to <the app's user> (on PostgreSQL 16 and later add: with set true)`,
      { cause: err },
    );
  }
}
