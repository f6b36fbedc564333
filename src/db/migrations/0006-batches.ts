// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- J14: an upload of several files is one batch, canceled as one.
create table batches (
  id uuid primary key,
  workspace_id uuid not null references workspaces(id),
  title text not null,
  created_at timestamptz not null default now(),
  canceled_at timestamptz
);
alter table meetings add column batch_id uuid references batches(id);
create index meetings_batch on meetings (batch_id) where batch_id is not null;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings drop column batch_id;
drop table batches;
`.execute(db);
}
