// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 34 (bench (b)). The window hot path's statement also says whether its window was marked
// pending at its transcript's publication (L19), read after the commit, so the worker no longer
// reads the window again in a statement of its own after every commit. The facts only gain a key
// (`lateWindow`), so a previous release's worker, which ignores it, keeps working during a
// rolling upgrade; `down` restores the body of migration 0035.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create or replace function verbatim_complete_window_attempt(
  p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb
) returns jsonb
language plpgsql as $$
-- verbatim_complete_window_attempt(p_job, p_attempt, p_token, p_actor, p_segments) returns jsonb
--
-- J5, the window hot path (docs/hot-path.md): a transcribe-window attempt's fence, its window's
-- transcript, the attempt's and the job's completion, then the facts of its meeting's close-out
-- gate, for the caller to decide on, and whether the window is one its transcript's publication
-- marked (L19), for the caller to publish.
--
-- Input:
--   p_job, p_attempt, p_token  the attempt, as verbatim_fence takes it
--   p_actor                    the actor of the audit rows
--   p_segments                 the window's segments, as verbatim_commit_window takes them
-- Effects, in this order:
--   verbatim_fence; verbatim_commit_window on the payload's windowId (a window no longer pending
--   keeps what it has, and the job completes all the same); verbatim_complete_attempt; the
--   window's pending_at_publication read (after the commit: a publication marks pending windows
--   only, under the window's row lock, so a mark is either seen here or never made);
--   verbatim_close_out_gate on the payload's meetingId (last: the meeting's lock is held only
--   for the decision and the commit)
-- Output:
--   verbatim_close_out_gate's facts with lateWindow (true: the window was marked), or null when
--   the meeting is gone
-- Raises:
--   VB001  the attempt no longer holds the job (nothing written)
declare
  j jobs;
  v_late boolean;
  v_facts jsonb;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  select w.pending_at_publication into v_late from windows w where w.id = (j.payload->>'windowId')::uuid;
  v_facts := verbatim_close_out_gate((j.payload->>'meetingId')::uuid);
  if v_facts is null then
    return null;
  end if;
  return v_facts || jsonb_build_object('lateWindow', coalesce(v_late, false));
end $$;
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
create or replace function verbatim_complete_window_attempt(
  p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb
) returns jsonb
language plpgsql as $$
-- verbatim_complete_window_attempt(p_job, p_attempt, p_token, p_actor, p_segments) returns jsonb
--
-- J5, the window hot path (docs/hot-path.md): a transcribe-window attempt's fence, its window's
-- transcript, the attempt's and the job's completion, then the facts of its meeting's close-out
-- gate, for the caller to decide on in the same transaction.
--
-- Input:
--   p_job, p_attempt, p_token  the attempt, as verbatim_fence takes it
--   p_actor                    the actor of the audit rows
--   p_segments                 the window's segments, as verbatim_commit_window takes them
-- Effects, in this order:
--   verbatim_fence; verbatim_commit_window on the payload's windowId (a window no longer pending
--   keeps what it has, and the job completes all the same); verbatim_complete_attempt;
--   verbatim_close_out_gate on the payload's meetingId (last: the meeting's lock is held only
--   for the decision and the commit)
-- Output:
--   verbatim_close_out_gate's facts
-- Raises:
--   VB001  the attempt no longer holds the job (nothing written)
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  return verbatim_close_out_gate((j.payload->>'meetingId')::uuid);
end $$;
`.execute(db);
}
