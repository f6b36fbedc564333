// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R1/R3: one recording per eligible calendar meeting; the bot that records it is scheduled at the
-- provider. The attempt marker and the idempotency key are stored before the create call (R3).
create table bot_recordings (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_url text not null,
  join_at timestamptz not null,
  ends_at timestamptz not null,
  title text not null default '',
  status text not null check (status in ('pending', 'scheduled', 'joining', 'in_call', 'recording',
    'processing', 'complete', 'failed', 'canceled', 'not_recorded')),
  bot_id text,
  schedule_attempted_at timestamptz,
  idempotency_key text,
  schedule_inputs_hash text,
  failure_code text,
  failure_message text,
  meeting_id uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- Two copies of one meeting (two attendees' calendars) are one recording.
  unique (workspace_id, meeting_url, join_at)
);
create index bot_recordings_pending on bot_recordings (workspace_id) where status = 'pending';
create unique index bot_recordings_bot on bot_recordings (bot_id) where bot_id is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table bot_recordings;`.execute(db);
}
