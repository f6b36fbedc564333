// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- R9: a verified webhook is kept with what it says, so one that arrives before its bot is attached
-- to our recording is applied when it is (outcome 'held' until then).
alter table provider_webhook_events add column code text;
alter table provider_webhook_events add column sub_code text;
alter table provider_webhook_events add column recording_id uuid;
alter table provider_webhook_events add column workspace_id uuid;
create index provider_webhook_events_held on provider_webhook_events (bot_id, received_at)
  where outcome = 'held';

-- R10: a calendar event posted through the API with its own id; the same id again with a new time
-- or link moves its recording instead of adding one.
create table api_calendar_events (
  workspace_id uuid not null references workspaces(id),
  event_id text not null,
  recording_id uuid not null,
  updated_at timestamptz not null default now(),
  primary key (workspace_id, event_id)
);

-- One naming scheme for failure codes: dotted, like the rest of the API.
update bot_recordings set failure_code = 'bot.never_scheduled' where failure_code = 'bot_never_scheduled';
update bot_recordings set failure_code = 'bot.schedule_outcome_unknown'
  where failure_code = 'bot_schedule_outcome_unknown';
update bot_recordings set failure_code = 'bot.canceled_by_user' where failure_code = 'canceled_by_user';

-- GET /v1/bot-recordings: a workspace's recordings by time.
create index bot_recordings_workspace_time on bot_recordings (workspace_id, join_at desc, id desc);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index bot_recordings_workspace_time;
drop table api_calendar_events;
drop index provider_webhook_events_held;
alter table provider_webhook_events drop column code, drop column sub_code, drop column recording_id,
  drop column workspace_id;
`.execute(db);
}
