import { sql } from 'kysely';
import type { Db, Tx } from './schema.ts';

/** The role tenant transactions run as (migration 0018): no BYPASSRLS, rows of one workspace only. */
export const TENANT_ROLE = 'verbatim_tenant';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Runs `fn` in a transaction that can see and write only `workspaceId`'s rows (S10): the role is
 * switched to verbatim_tenant and `verbatim.workspace_id` set, both for this transaction only, so
 * a query that forgets its `where workspace_id` returns nothing of another workspace. Queries keep
 * their own workspace filter; this is the second wall. `db` is the system connection (the table
 * owner, which RLS does not apply to): everything not run through here is the system path, which
 * sees every workspace on purpose (workers, sweeps, auth). See docs/security.md.
 */
export async function withTenant<T>(db: Db, workspaceId: string, fn: (trx: Tx) => Promise<T>): Promise<T> {
  // An empty or malformed id would be a bug upstream; the policy would also refuse it.
  if (!UUID.test(workspaceId))
    throw new Error(`withTenant: not a workspace id: ${JSON.stringify(workspaceId)}`);
  return db.transaction().execute(async (trx) => {
    // set_config(..., true) is SET LOCAL: undone at commit or rollback, so a pooled connection goes
    // back to the pool as the system role with no workspace set. One round trip for both.
    await sql`select set_config('role', ${TENANT_ROLE}, true),
                     set_config('verbatim.workspace_id', ${workspaceId}, true)`.execute(trx);
    return fn(trx);
  });
}
