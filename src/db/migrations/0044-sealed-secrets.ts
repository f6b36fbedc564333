// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 36 (U7): webhook signing secrets are sealed with the installation's secret key
// (src/secrets/secret-box.ts); the database keeps a check of that key (an HMAC, never the key), so
// a process holding another key refuses to start rather than sign with secrets it cannot read. A
// secret can be rotated: the one before it stays valid (deliveries carry both signatures) until
// previous_secret_until.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create table secret_key_checks (
  id boolean primary key default true check (id),
  key_check text not null,
  created_at timestamptz not null default now()
);

alter table webhook_endpoints
  add column previous_secret text,
  add column previous_secret_until timestamptz;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table webhook_endpoints drop column previous_secret_until, drop column previous_secret;
drop table secret_key_checks;
`.execute(db);
}
