import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';
import { withTenant } from '../db/tenant.ts';

/**
 * F2: takes up to `want` tokens from the workspace's bucket `name` of `capacity` tokens a window
 * of `windowMs`, refilled evenly by the database's clock; the row is locked while they are taken,
 * so the budget holds across keys, people and api processes. Returns how many were granted (0 to
 * `want`) and, when none was, the whole seconds until one is refilled.
 */
export async function takeWorkspaceTokens(
  db: Db,
  workspaceId: string,
  name: string,
  capacity: number,
  windowMs: number,
  want: number,
): Promise<{ granted: number; retryAfterSeconds: number }> {
  const perSecond = capacity / (windowMs / 1000);
  const tokens = await withTenant(db, workspaceId, async (trx) => {
    await sql`insert into workspace_budgets (workspace_id, name, tokens)
              values (${workspaceId}::uuid, ${name}, ${capacity}::float8)
              on conflict (workspace_id, name) do nothing`.execute(trx);
    const row = await sql<{ tokens: number }>`
      select least(${capacity}::float8, tokens + extract(epoch from now() - at) * ${perSecond}::float8) as tokens
        from workspace_budgets where workspace_id = ${workspaceId}::uuid and name = ${name}
         for update`.execute(trx);
    const now = Number(row.rows[0]!.tokens);
    const granted = Math.max(0, Math.min(want, Math.floor(now)));
    await sql`update workspace_budgets set tokens = ${now - granted}::float8, at = now()
               where workspace_id = ${workspaceId}::uuid and name = ${name}`.execute(trx);
    return { now, granted };
  });
  return {
    granted: tokens.granted,
    retryAfterSeconds: tokens.granted > 0 ? 0 : Math.max(1, Math.ceil((1 - tokens.now) / perSecond)),
  };
}
