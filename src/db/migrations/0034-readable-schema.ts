// Issue 34: a schema you can read (src/db/schema.sql is generated from the catalogs).
// 1. Two overloads left behind when 0030 moved the close-out's job spec into one jsonb argument
//    are dropped: nothing calls them, and the dump showed them beside the live ones.
// 2. Every function gets a header, as a comment on the function: its arguments, its effects and
//    what it returns or raises. The dump prints it above the function's body; `\df+` shows it.
import { sql, type Kysely } from 'kysely';

const HEADERS: Array<[signature: string, header: string]> = [
  [
    'job_attempts_guard()',
    'Trigger, before update on job_attempts. Effects: none. Raises check_violation when a closed attempt is changed or a running one changes its identity, token, context, owner, input revision or start.',
  ],
  [
    'job_attempts_no_delete()',
    'Trigger, before delete on job_attempts. Attempts are audit evidence: raises check_violation unless the session deletes a whole meeting (verbatim.deleting_meeting = on).',
  ],
  [
    'verbatim_commit_window(uuid, jsonb, text)',
    'p_window, p_segments (jsonb array of {startMs,endMs,text}), p_actor. Effects: a pending window becomes transcribed with its segments, audited. Returns false when the window was not pending (nothing written).',
  ],
  [
    'verbatim_complete_attempt(uuid, uuid, text)',
    'p_job, p_attempt, p_actor. Effects: the running attempt and its job become completed, audited. Raises VB001 when the attempt is no longer running (a stale attempt, J3).',
  ],
  [
    'verbatim_complete_window_attempt(uuid, uuid, uuid, text, jsonb, jsonb)',
    "p_job, p_attempt, p_token, p_actor, p_segments, p_closeout (the close-out job spec). Effects, in one statement: fence (J3), commit the window, complete the attempt, then start the meeting's close-out if every window is settled. Returns verbatim_start_close_out's code. Raises VB001 for a stale attempt.",
  ],
  [
    'verbatim_drop_drafts()',
    'Trigger, after a window is inserted or becomes transcribed: deletes the live drafts whose midpoint falls in that window (L22).',
  ],
  [
    'verbatim_drop_meeting_drafts()',
    "Trigger, after a meeting's transcript is first completed: deletes all of its live drafts.",
  ],
  [
    'verbatim_enqueue(text, json, timestamp with time zone, integer, text)',
    'p_identifier (task), p_payload, p_run_at, p_max_attempts, p_job_key. Security definer. Effects: adds (or replaces by key) the graphile-worker message that delivers a job. Returns nothing.',
  ],
  [
    'verbatim_fence(uuid, uuid, uuid)',
    'p_job, p_attempt, p_token. Effects: locks the job row. Returns the job when the attempt still holds it with this token; raises VB001 otherwise (J3).',
  ],
  [
    'verbatim_insert_job(jsonb, text)',
    "p_spec (the job catalog's spec: kind, queue, subject, payload, budgets, delayMs, dedupeKey, workspaceId), p_actor. Effects: inserts a pending job and its audit row. Returns the new job, or no row when an active job holds the dedupe key.",
  ],
  [
    'verbatim_passages_added()',
    "Trigger, after insert or update on search_passages (per statement): fills search_phrase_pairs with each new passage's adjacent word pairs.",
  ],
  [
    'verbatim_phrase_pairs(tsquery)',
    "q. Immutable. Returns the query's adjacent word pairs as a tsquery over search_phrase_pairs, or null when it has none; no effects.",
  ],
  [
    'verbatim_search(text, timestamp with time zone, timestamp with time zone, text, text, integer, integer, integer, integer)',
    "The workspace's search (O2): query, time range, source, status, paging, candidate cap, snippets. Security definer, bounded to the session's verbatim.workspace_id. Returns ranked meetings (and passages); no effects.",
  ],
  [
    'verbatim_search_meetings(text, timestamp with time zone, timestamp with time zone, text, text, integer, integer, integer)',
    'verbatim_search without passages: the ranked meetings only. No effects.',
  ],
  [
    'verbatim_start_close_out(uuid, text, jsonb)',
    'p_meeting, p_actor, p_job (the close-out job spec). Effects when the meeting is processing, its split is done (J19) and no window is in flight (held windows do not count, J20): the meeting becomes finalizing, audited, and its close-out job is created and enqueued. Returns started, not_started, or undelivered (the job committed, its message not: the rescue sweep re-drives it).',
  ],
  [
    'verbatim_stream_change()',
    'Trigger, after a meeting changes, a window settles or moves, or a draft is added: appends a meeting_stream row and notifies verbatim_stream with the meeting id (live views).',
  ],
  [
    'verbatim_tsvector_pairs(tsvector)',
    't. Immutable. Returns the adjacent lexeme pairs of a passage as a tsvector (pairs over 2047 bytes left out); no effects.',
  ],
  [
    'verbatim_unqueue(text)',
    'p_job_key. Security definer. Effects: removes the graphile-worker message with this key (a job superseded or canceled). Returns nothing.',
  ],
  [
    'verbatim_window_held(uuid)',
    "p_window. Returns true when the window's job is isolated and waits out its backoff (a held window, J20); no effects.",
  ],
  [
    'verbatim_window_in_flight(uuid)',
    'p_window. Returns true when a job is at work on the window, other than an isolated one waiting out its backoff; no effects.',
  ],
  [
    'window_tallies_apply(uuid, text, integer)',
    "p_meeting, p_status, p_sign. Effects: adds p_sign to the meeting's window_tallies row for that status (superseded windows are not counted). Returns nothing.",
  ],
  [
    'window_tallies_track()',
    "Trigger, after insert, update or delete on windows: keeps window_tallies equal to the counts of the meeting's windows by status.",
  ],
];

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
drop function verbatim_complete_window_attempt(uuid, uuid, uuid, text, jsonb, integer, integer);
drop function verbatim_start_close_out(uuid, text, integer, integer, integer);`.execute(db);
  for (const [signature, header] of HEADERS)
    await sql.raw(`comment on function ${signature} is '${header.replace(/'/g, "''")}'`).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const [signature] of HEADERS) await sql.raw(`comment on function ${signature} is null`).execute(db);
  await sql`
create function verbatim_start_close_out(p_meeting uuid, p_actor text, p_max_errors integer, p_max_reclaims integer, p_delay_ms integer)
 returns text language sql as $function$
  select verbatim_start_close_out(p_meeting, p_actor, jsonb_build_object(
    'kind', 'close-out-meeting', 'queue', 'closeout', 'subjectType', 'meeting', 'subjectId', p_meeting,
    'meetingId', p_meeting, 'dedupeKey', 'close-out:' || p_meeting,
    'payload', jsonb_build_object('meetingId', p_meeting),
    'maxErrors', p_max_errors, 'maxReclaims', p_max_reclaims, 'delayMs', p_delay_ms));
$function$;
create function verbatim_complete_window_attempt(p_job uuid, p_attempt uuid, p_token uuid, p_actor text, p_segments jsonb, p_closeout_max_errors integer, p_closeout_max_reclaims integer)
 returns text language plpgsql as $function$
declare
  j jobs;
begin
  j := verbatim_fence(p_job, p_attempt, p_token);
  perform verbatim_commit_window((j.payload->>'windowId')::uuid, p_segments, p_actor);
  perform verbatim_complete_attempt(p_job, p_attempt, p_actor);
  return verbatim_start_close_out((j.payload->>'meetingId')::uuid, p_actor,
    p_closeout_max_errors, p_closeout_max_reclaims, 0);
end $function$;`.execute(db);
}
