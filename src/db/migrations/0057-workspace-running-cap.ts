// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 38 (F5). An optional cap on how many of a workspace's batch jobs (an upload's decode and
// split, its windows, repairs of late audio) run at once, set by an operator (`verbatim workspaces
// running-cap`). A claim past the cap is put off and the slot goes to another workspace; live
// windows, drafts, close-outs, minutes and bots are never capped, so a team's live meeting stays
// live. The index serves the count the claim takes under the workspace's lock.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table workspaces add column max_running_jobs integer
  check (max_running_jobs is null or max_running_jobs >= 1);
create index jobs_running_workspace on jobs (workspace_id, queue) where status = 'running';
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop index jobs_running_workspace;
alter table workspaces drop column max_running_jobs;
`.execute(db);
}
