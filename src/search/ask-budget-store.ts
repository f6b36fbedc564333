import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { withTenant } from '../db/tenant.ts';

/**
 * F4: takes one ask call from the workspace's bucket of `perMinute` calls a minute, refilled evenly
 * by the database's clock; the row is locked while it is taken, so the limit holds across keys and
 * api processes. Null when the call may go on; else the whole seconds until one is refilled.
 */
export async function takeAskCall(db: Db, workspaceId: string, perMinute: number): Promise<number | null> {
  const held = await withTenant(db, workspaceId, async (trx) => {
    await sql`insert into ask_budget (workspace_id, tokens) values (${workspaceId}::uuid, ${perMinute}::float8)
              on conflict (workspace_id) do nothing`.execute(trx);
    const row = await sql<{ tokens: number }>`
      select least(${perMinute}::float8, tokens + extract(epoch from now() - at) * ${perMinute}::float8 / 60) as tokens
        from ask_budget where workspace_id = ${workspaceId}::uuid for update`.execute(trx);
    const tokens = Number(row.rows[0]!.tokens);
    const left = tokens >= 1 ? tokens - 1 : tokens;
    await sql`update ask_budget set tokens = ${left}::float8, at = now() where workspace_id = ${workspaceId}::uuid`.execute(
      trx,
    );
    return tokens;
  });
  if (held >= 1) return null;
  return Math.max(1, Math.ceil(((1 - held) * 60) / perMinute));
}
