// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 13 scope 8 (S10): every authenticated API request now runs as verbatim_tenant, writes
// included. A request's transactions also enqueue transport jobs and take the storage guards, which
// belong to no workspace:
// - graphile-worker's functions are reached through two SECURITY DEFINER wrappers, so the tenant
//   gets no privilege on the queue's tables themselves;
// - storage_guards (rows named by a workspace id or 'global', nothing else) may be locked and
//   created by the tenant.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create function verbatim_enqueue(p_identifier text, p_payload json, p_run_at timestamptz,
                                 p_max_attempts int, p_job_key text) returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $f$
begin
  perform graphile_worker.add_job(p_identifier, p_payload, run_at => p_run_at,
                                  max_attempts => p_max_attempts, job_key => p_job_key);
end $f$;

create function verbatim_unqueue(p_job_key text) returns void
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $f$
begin
  perform graphile_worker.remove_job(p_job_key);
end $f$;

revoke all on function verbatim_enqueue(text, json, timestamptz, int, text) from public;
revoke all on function verbatim_unqueue(text) from public;
grant execute on function verbatim_enqueue(text, json, timestamptz, int, text) to verbatim_tenant;
grant execute on function verbatim_unqueue(text) to verbatim_tenant;
grant select, insert, update on storage_guards to verbatim_tenant;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
revoke select, insert, update on storage_guards from verbatim_tenant;
drop function verbatim_unqueue(text);
drop function verbatim_enqueue(text, json, timestamptz, int, text);
`.execute(db);
}
