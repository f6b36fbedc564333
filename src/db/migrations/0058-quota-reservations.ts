// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F1). A recording whose length its head says reserves the bytes of its windows when it
// is accepted: other uploads are admitted against that reservation, the split spends it window by
// window, and it ends with the split (or the meeting). Only a meeting being processed holds one.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table meetings add column quota_reserved_bytes bigint not null default 0
  check (quota_reserved_bytes >= 0);
create index meetings_quota_reserved on meetings (workspace_id) where quota_reserved_bytes > 0;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index meetings_quota_reserved;
alter table meetings drop column quota_reserved_bytes;
`.execute(db);
}
