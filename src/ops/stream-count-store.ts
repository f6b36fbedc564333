import { sql } from 'kysely';
import type { Db } from '../db/schema.ts';

/** F7: how long an api process's counts are believed without a refresh (a process gone longer is dead). */
export const STREAM_COUNTS_FRESH_SECONDS = 60;

/**
 * F7: an api process's open event streams per workspace, as they are now: a row per workspace
 * with streams open, the process's other rows removed, and rows no process has refreshed for an
 * hour (processes that died) cleared, in one statement.
 */
export async function saveStreamCounts(
  db: Db,
  processId: string,
  open: ReadonlyMap<string, number>,
): Promise<void> {
  const workspaces = [...open.keys()];
  const counts = workspaces.map((w) => open.get(w) ?? 0);
  await sql`with now_open as (
      select * from unnest(${workspaces}::uuid[], ${counts}::int[]) as t(workspace_id, open)
    ), saved as (
      insert into stream_counts (workspace_id, process_id, open, updated_at)
      select n.workspace_id, ${processId}, n.open, now() from now_open n
        where n.open > 0 and exists (select 1 from workspaces w where w.id = n.workspace_id)
      on conflict (workspace_id, process_id) do update set open = excluded.open, updated_at = now()
    )
    delete from stream_counts s
     where (s.process_id = ${processId} and s.workspace_id <> all(${workspaces}::uuid[]))
        or (s.process_id <> ${processId} and s.updated_at < now() - interval '1 hour')`.execute(db);
}

/** F7: a stopping api process's rows. */
export async function forgetStreamCounts(db: Db, processId: string): Promise<void> {
  await db.deleteFrom('stream_counts').where('process_id', '=', processId).execute();
}
