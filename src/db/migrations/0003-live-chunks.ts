// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- L1: each live chunk is stored on arrival, once per (meeting, seq).
create table chunks (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  meeting_id uuid not null references meetings(id),
  seq integer not null check (seq >= 0),
  blob_id uuid not null references blobs(id),
  sha256 text not null,
  samples integer not null check (samples >= 0),
  created_at timestamptz not null default now(),
  unique (meeting_id, seq)
);

-- L18: where the meeting's timeline has been cut into windows so far (in samples at 16 kHz), so
-- the next window starts exactly where the last one ended.
alter table meetings add column cut_samples bigint not null default 0;
-- Chunk sequence numbers that never arrived, reported when the meeting is closed out.
alter table meetings add column missing_chunks integer[] not null default '{}';
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings drop column missing_chunks, drop column cut_samples;
drop table chunks;
`.execute(db);
}
