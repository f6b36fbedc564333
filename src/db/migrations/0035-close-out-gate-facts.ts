// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
//
// Issue 34 (scope 3): the decision whether a meeting may start its close-out moves out of SQL into
// one pure function (decideCloseOutStart, src/domain/close-out-gate.ts), and every path that starts
// a close-out goes through one use case (src/meetings/close-out-start.ts), which moves the meeting
// with the status transition and creates the job through the job catalog.
//
// 1. verbatim_close_out_gate(meeting) reads, under the meeting's lock, the facts that decision
//    needs, and decides nothing.
// 2. A five-argument verbatim_complete_window_attempt, the window hot path, returns those facts
//    instead of starting the close-out itself; the caller decides and applies in the same
//    transaction, which still holds the meeting's lock.
// The earlier signatures (verbatim_start_close_out, the six- and seven-argument
// verbatim_complete_window_attempt) stay, unchanged, for the previous release's workers during a
// rolling upgrade; this release calls none of them.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
create function verbatim_close_out_gate(p_meeting uuid) returns jsonb
language plpgsql as $$
-- verbatim_close_out_gate(p_meeting) returns jsonb
--
-- J19/J20: the facts decideCloseOutStart (src/domain/close-out-gate.ts) needs to decide whether
-- the meeting may leave processing for its close-out. Decides nothing itself.
--
-- Input:
--   p_meeting  the meeting
-- Effects:
--   when the meeting is processing: its row locked (for no key update) until the caller's
--   transaction ends, and the facts read after the lock, so that of two last windows committing
--   at once the second sees the first; otherwise nothing is locked
-- Output:
--   null when there is no such meeting; else {status}, and when it is processing also
--   source      the meeting's source
--   windowsCut  windows_cut_at is set (an upload's or a bot's split has cut its last window)
--   splitActive a split-recording job of the meeting is pending or running (read only while
--               windows_cut_at is null)
--   inFlight    a pending window is in flight (verbatim_window_in_flight)
--   pending     a window is pending (in flight or held)
declare
  m meetings;
  v_status text;
begin
  select status into v_status from meetings where id = p_meeting;
  if not found then
    return null;
  end if;
  -- A live window's commit never waits for its meeting: only a processing meeting is locked.
  if v_status is distinct from 'processing' then
    return jsonb_build_object('status', v_status);
  end if;
  select * into m from meetings where id = p_meeting for no key update;
  if m.status is distinct from 'processing' then
    return jsonb_build_object('status', m.status);
  end if;
  return jsonb_build_object(
    'status', m.status,
    'source', m.source,
    'windowsCut', m.windows_cut_at is not null,
    'splitActive', m.windows_cut_at is null and exists (
      select 1 from jobs j where j.meeting_id = p_meeting and j.kind = 'split-recording'
        and j.status in ('pending', 'running')),
    'inFlight', exists (
      select 1 from windows w
       where w.meeting_id = p_meeting and w.status = 'pending' and verbatim_window_in_flight(w.id)),
    'pending', exists (
      select 1 from windows w where w.meeting_id = p_meeting and w.status = 'pending'));
end $$;

create function verbatim_complete_window_attempt(
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

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_complete_window_attempt(uuid, uuid, uuid, text, jsonb);
drop function verbatim_close_out_gate(uuid);
`.execute(db);
}
