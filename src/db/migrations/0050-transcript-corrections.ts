// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 37 (E3). A person's correction of a transcript segment: the text the recogniser gave
// (original_text) over a stretch of the meeting's timeline, and the text the person wrote. Applied
// when the transcript is read (src/meetings/corrections.ts), never by rewriting a segment: a
// late-audio repair that re-cuts the segments keeps a correction whose original text it finds
// again over that stretch, and shows one it does not as needing a look.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table transcript_corrections (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id) on delete cascade,
  meeting_id uuid not null references meetings(id) on delete cascade,
  start_ms integer not null check (start_ms >= 0),
  end_ms integer not null check (end_ms > start_ms),
  original_text text not null,
  text text not null check (length(text) between 1 and 10000),
  author text not null,
  created_at timestamptz not null default now()
);
create index transcript_corrections_meeting on transcript_corrections (meeting_id, start_ms);

alter table transcript_corrections enable row level security;
create policy tenant_isolation on transcript_corrections to verbatim_tenant
  using (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid)
  with check (workspace_id = nullif(current_setting('verbatim.workspace_id', true), '')::uuid);
grant select, insert, update, delete on transcript_corrections to verbatim_tenant;
grant select, insert, update, delete on transcript_corrections to verbatim_all_workspaces;
create policy all_workspaces on transcript_corrections to verbatim_all_workspaces using (true) with check (true);
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table transcript_corrections`.execute(db);
}
