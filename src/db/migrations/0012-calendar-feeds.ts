// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R1: ICS feed subscriptions per workspace, polled; each event occurrence seen is remembered so a
-- moved, canceled or deleted one is reconciled with its recording.
create table calendar_feeds (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  url text not null,
  next_poll_at timestamptz not null default now(),
  lease_expires_at timestamptz,
  last_polled_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  unique (workspace_id, url)
);
create table calendar_events (
  feed_id uuid not null references calendar_feeds(id),
  uid text not null,
  recording_id uuid references bot_recordings(id),
  start_at timestamptz not null,
  end_at timestamptz not null,
  meeting_url text,
  seen_at timestamptz not null default now(),
  primary key (feed_id, uid)
);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table calendar_events, calendar_feeds;`.execute(db);
}
