// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F6). Webhook deliveries leave the recovery sweep for a loop of their own, fair across
// workspaces; an endpoint that has failed for days with no success is disabled by the system.
// - webhook_endpoints.failing_since: the first failed attempt since the last success (null while
//   it succeeds);
// - webhook_endpoints.disabled_reason: why the system disabled it (null when a person did).
// - an index for the leasing query's per-workspace count of deliveries in flight.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table webhook_endpoints add column failing_since timestamptz,
                              add column disabled_reason text;
create index webhook_deliveries_in_flight on webhook_deliveries (workspace_id, lease_expires_at)
  where status = 'pending' and lease_expires_at is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index webhook_deliveries_in_flight;
alter table webhook_endpoints drop column disabled_reason, drop column failing_since;
`.execute(db);
}
