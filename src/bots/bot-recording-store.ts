import { sql, type Selectable } from 'kysely';
import type { BotRecordingsTable, Executor, Tx } from '../db/schema.ts';
import {
  ACTIVE_JOB_STATUSES,
  BOT_RECORDING_FINISHED,
  BotRecordingStatus as Status,
  JobKind,
  botTransitionTo,
  type BotRecordingStatus,
} from '../domain/status.ts';
import { recordAudit } from '../jobs/audit-store.ts';

export type BotRecordingRow = Selectable<BotRecordingsTable>;

/** Fields a move may set with the status. */
export interface BotRecordingFields {
  bot_id?: string;
  meeting_id?: string | null;
  failure_code?: string | null;
  failure_message?: string | null;
  last_error?: string | null;
  last_error_at?: null;
}

export interface BotRecordingMove {
  /** `user:<workspace>`, `worker`, `provider:webhook`, `backstop`, … */
  actor: string;
  reason: string;
  /**
   * The caller's own condition on the locked row (a status it expects, a bot not yet attached):
   * when it does not hold, the move is not made and nothing is recorded: another writer got there
   * first. A move the lifecycle forbids is a different thing: refused and audited as refused.
   */
  when?: (row: BotRecordingRow) => boolean;
  set?: BotRecordingFields;
}

/**
 * The one writer of a bot recording's status (R7/R9). Each move is a legal transition of
 * `BotRecordingTransitions` (src/domain/status.ts), made on the locked row in the caller's
 * transaction, with its audit row and the time the recording entered its new status
 * (`state_times`). A move the lifecycle does not allow is refused: the row is left as it is and an
 * audit row says what was asked and refused. Returns the moved row, or null when not moved.
 */
export async function moveBotRecording(
  trx: Tx,
  id: string,
  to: BotRecordingStatus,
  move: BotRecordingMove,
): Promise<BotRecordingRow | null> {
  const row = await trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('id', '=', id)
    .forNoKeyUpdate()
    .executeTakeFirst();
  if (!row) return null;
  if (move.when && !move.when(row)) return null;
  const audit = (reason: string, details?: Record<string, unknown>) =>
    recordAudit(trx, {
      workspaceId: row.workspace_id,
      subjectType: 'bot_recording',
      subjectId: row.id,
      from: row.status,
      to,
      actor: move.actor,
      reason,
      details,
    });
  if (!(botTransitionTo(to).from as readonly string[]).includes(row.status)) {
    await audit(`refused: ${row.status} → ${to} is not a legal move (${move.reason})`, { refused: true });
    return null;
  }
  const moved = await trx
    .updateTable('bot_recordings')
    .set({
      ...move.set,
      status: to,
      state_times: sql<string>`state_times || jsonb_build_object(${to}::text, now())`,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await audit(move.reason);
  return moved;
}

/** The audit row of a new recording (it starts `pending`, in the transaction that made it). */
export async function recordBotRecordingCreated(trx: Tx, row: BotRecordingRow, actor: string): Promise<void> {
  await recordAudit(trx, {
    workspaceId: row.workspace_id,
    subjectType: 'bot_recording',
    subjectId: row.id,
    from: null,
    to: row.status,
    actor,
    reason: 'created',
  });
}

/** The recordings whose audio became this meeting, still on their way (locked, for a move each). */
export async function activeRecordingsOfMeeting(trx: Tx, meetingId: string): Promise<BotRecordingRow[]> {
  return trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('meeting_id', '=', meetingId)
    .where('status', 'not in', [...BOT_RECORDING_FINISHED])
    .forNoKeyUpdate()
    .execute();
}

/**
 * R7: recordings of the workspace whose meeting ended before `endedBefore` while their bot never
 * reported the end, the least recently looked at first.
 */
export async function endedButUnreported(
  db: Executor,
  workspaceId: string,
  endedBefore: Date,
  limit: number,
): Promise<Array<{ id: string; bot_id: string | null }>> {
  return db
    .selectFrom('bot_recordings')
    .select(['id', 'bot_id'])
    .where('workspace_id', '=', workspaceId)
    .where('status', 'in', ['scheduled', 'joining', 'in_call', 'recording'])
    .where('bot_id', 'is not', null)
    .where('ends_at', '<', endedBefore)
    .orderBy('updated_at')
    .limit(limit)
    .execute();
}

/** Marks a recording as looked at now (its status unchanged), so the next pass asks about others first. */
export async function touchRecording(db: Executor, id: string): Promise<void> {
  await db
    .updateTable('bot_recordings')
    .set({ updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/** The workspace a recording belongs to. */
export async function workspaceOfRecording(db: Executor, id: string): Promise<string> {
  const row = await db
    .selectFrom('bot_recordings')
    .select('workspace_id')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.workspace_id;
}

/** The recording holding this bot, locked; undefined when none does (yet). */
export async function lockRecordingByBot(trx: Tx, botId: string): Promise<BotRecordingRow | undefined> {
  return trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('bot_id', '=', botId)
    .forNoKeyUpdate()
    .executeTakeFirst();
}

/** A recording, locked; undefined when there is none. */
export async function lockRecording(trx: Tx, id: string): Promise<BotRecordingRow | undefined> {
  return trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('id', '=', id)
    .forNoKeyUpdate()
    .executeTakeFirst();
}

export async function recordingById(db: Executor, id: string): Promise<BotRecordingRow | undefined> {
  return db.selectFrom('bot_recordings').selectAll().where('id', '=', id).executeTakeFirst();
}

/** R7: links the meeting an import made; false when another run linked one first. */
export async function linkRecordingMeeting(
  trx: Tx,
  recordingId: string,
  meetingId: string,
): Promise<boolean> {
  const linked = await trx
    .updateTable('bot_recordings')
    .set({ meeting_id: meetingId })
    .where('id', '=', recordingId)
    .where('meeting_id', 'is', null)
    .executeTakeFirst();
  return linked.numUpdatedRows > 0n;
}

/**
 * R3: a new scheduling attempt, durable before the provider hears of it: when it began, its
 * idempotency key and the hash of the inputs it was made from.
 */
export async function markScheduleAttempt(
  trx: Tx,
  id: string,
  key: string,
  inputsHash: string,
): Promise<void> {
  await trx
    .updateTable('bot_recordings')
    .set({
      schedule_attempted_at: sql<Date>`now()`,
      idempotency_key: key,
      schedule_inputs_hash: inputsHash,
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', id)
    .execute();
}

/** Why the last provider call for this recording failed, kept on it (its status unchanged). */
export async function noteRecordingError(db: Executor, id: string, message: string): Promise<void> {
  await db
    .updateTable('bot_recordings')
    .set({ last_error: message.slice(0, 500), last_error_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/** The recording if it is pending without a bot (R4/R5: what scheduling and recovery act on). */
export async function pendingWithoutBot(db: Executor, id: string): Promise<BotRecordingRow | undefined> {
  return db
    .selectFrom('bot_recordings')
    .selectAll()
    .where('id', '=', id)
    .where('status', '=', Status.pending)
    .where('bot_id', 'is', null)
    .executeTakeFirst();
}

/**
 * R4/R5: the workspace's pending recordings without a bot and without a scheduling job of their
 * own (a row with one is that job's), soonest first.
 */
export async function unscheduledRecordings(db: Executor, workspaceId: string): Promise<BotRecordingRow[]> {
  return db
    .selectFrom('bot_recordings as r')
    .selectAll('r')
    .where('r.workspace_id', '=', workspaceId)
    .where('r.status', '=', Status.pending)
    .where('r.bot_id', 'is', null)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('jobs as j')
            .select('j.id')
            .whereRef('j.subject_id', '=', 'r.id')
            .where('j.kind', '=', JobKind.scheduleBot)
            .where('j.status', 'in', ACTIVE_JOB_STATUSES),
        ),
      ),
    )
    .orderBy('r.join_at')
    .execute();
}

/** Of these recordings, the ids still pending without a bot. */
export async function stillWithoutBot(db: Executor, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('bot_recordings')
    .select('id')
    .where('id', 'in', ids)
    .where('status', '=', Status.pending)
    .where('bot_id', 'is', null)
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** A deleted meeting's recordings point at nothing any more. */
export async function unlinkMeetingFromRecordings(trx: Tx, meetingId: string): Promise<void> {
  await trx
    .updateTable('bot_recordings')
    .set({ meeting_id: null, updated_at: sql<Date>`now()` })
    .where('meeting_id', '=', meetingId)
    .execute();
}
