// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- O3: customer webhook endpoints. The secret signs deliveries; it is shown once, at creation.
create table webhook_endpoints (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  url text not null,
  secret text not null,
  events text[] not null default '{}',
  created_at timestamptz not null default now(),
  disabled_at timestamptz
);
create index webhook_endpoints_workspace on webhook_endpoints (workspace_id) where disabled_at is null;

-- One event for one endpoint; its body is fixed when it is created, so every retry sends the same
-- bytes under the same id. Retried with backoff up to a bound, then failed for an operator.
create table webhook_deliveries (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  endpoint_id uuid not null references webhook_endpoints(id),
  event_id uuid not null,
  event_type text not null,
  body text not null,
  status text not null check (status in ('pending', 'delivered', 'failed')),
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  lease_owner text,
  lease_expires_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  delivered_at timestamptz,
  failed_at timestamptz,
  unique (endpoint_id, event_id)
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending';

-- The delivery log: every request made, with what came back.
create table webhook_attempts (
  id bigserial primary key,
  delivery_id uuid not null references webhook_deliveries(id),
  attempt integer not null,
  status_code integer,
  error text,
  duration_ms integer not null,
  created_at timestamptz not null default now()
);
create index webhook_attempts_delivery on webhook_attempts (delivery_id, id);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table webhook_attempts, webhook_deliveries, webhook_endpoints;`.execute(db);
}
