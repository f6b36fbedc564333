import { randomUUID } from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import type { BotRecordingsTable, Executor, Tx } from '../db/schema.ts';
import { isUuid } from '../domain/ids.ts';
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

/** R10: the recording that is not canceled at this link and start (a slot holds one), locked with `lock`. */
export async function liveRecordingInSlot(
  trx: Tx,
  workspaceId: string,
  meetingUrl: string,
  start: Date,
  lock = false,
): Promise<BotRecordingRow | undefined> {
  const q = trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('meeting_url', '=', meetingUrl)
    .where('join_at', '=', start)
    .where('status', '<>', 'canceled');
  return (lock ? q.forNoKeyUpdate() : q).executeTakeFirst();
}

/** Every recording at this link and start, canceled ones too, newest first. */
export async function recordingsInSlot(
  trx: Tx,
  workspaceId: string,
  meetingUrl: string,
  start: Date,
): Promise<BotRecordingRow[]> {
  return trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('meeting_url', '=', meetingUrl)
    .where('join_at', '=', start)
    .orderBy('created_at', 'desc')
    .execute();
}

/**
 * R10: the recordings of this link at another start whose time overlaps [start, end) and whose
 * status is not one of `finished`, locked, by join time.
 */
export async function lockOverlappingRecordings(
  trx: Tx,
  workspaceId: string,
  e: { start: Date; end: Date; meetingUrl: string },
  finished: BotRecordingStatus[],
): Promise<BotRecordingRow[]> {
  return trx
    .selectFrom('bot_recordings')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('meeting_url', '=', e.meetingUrl)
    .where('join_at', '<>', e.start)
    .where('join_at', '<', e.end)
    .where('ends_at', '>', e.start)
    .where('status', 'not in', finished)
    .orderBy('join_at')
    .forNoKeyUpdate()
    .execute();
}

/** U4: who asked for a recording (null: a service account's, or a removed person's); undefined: none. */
export async function recordingOwnerOf(
  db: Executor,
  workspaceId: string,
  id: string,
): Promise<string | null | undefined> {
  if (!isUuid(id)) return undefined;
  const row = await db
    .selectFrom('bot_recordings')
    .select('owner_user_id')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row ? row.owner_user_id : undefined;
}

/**
 * A new pending recording in its slot (link and start), unless a recording that is not canceled
 * holds the slot (the partial unique index of migration 0013): then undefined.
 */
export async function insertRecordingInSlot(
  trx: Tx,
  r: {
    workspaceId: string;
    meetingUrl: string;
    start: Date;
    end: Date;
    title: string;
    requestedByApi: boolean;
    ownerUserId: string | null;
  },
): Promise<BotRecordingRow | undefined> {
  return trx
    .insertInto('bot_recordings')
    .values({
      id: randomUUID(),
      workspace_id: r.workspaceId,
      meeting_url: r.meetingUrl,
      join_at: r.start,
      ends_at: r.end,
      title: r.title,
      status: Status.pending,
      state_times: sql<string>`jsonb_build_object('pending', now())`,
      requested_by_api: r.requestedByApi,
      owner_user_id: r.ownerUserId,
    })
    .onConflict((oc) =>
      oc
        .columns(['workspace_id', 'meeting_url', 'join_at'])
        .where(sql<boolean>`status <> 'canceled'`)
        .doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
}

export async function setRequestedByApi(trx: Tx, id: string, requested: boolean): Promise<void> {
  await trx.updateTable('bot_recordings').set({ requested_by_api: requested }).where('id', '=', id).execute();
}

/** Only the end moved: the bot joins at the same time. */
export async function setRecordingEnd(trx: Tx, id: string, end: Date): Promise<void> {
  await trx
    .updateTable('bot_recordings')
    .set({ ends_at: end, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/** The workspace's recordings that have not started (pending or scheduled). */
export async function notStartedRecordings(trx: Tx, workspaceId: string): Promise<string[]> {
  const rows = await trx
    .selectFrom('bot_recordings')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where('status', 'in', [Status.pending, Status.scheduled])
    .execute();
  return rows.map((r) => r.id);
}

/** The workspace's recording (read as the tenant by the caller). */
export async function workspaceRecording(
  db: Executor,
  workspaceId: string,
  id: string,
): Promise<BotRecordingRow | undefined> {
  return db
    .selectFrom('bot_recordings')
    .selectAll()
    .where('id', '=', id)
    .where('workspace_id', '=', workspaceId)
    .executeTakeFirst();
}

/** Whether another recording of the same call (link and start) is not canceled. */
export async function hasLiveTwin(trx: Tx, recordingId: string): Promise<boolean> {
  const twin = await sql<{ id: string }>`select o.id from bot_recordings r join bot_recordings o
        on o.workspace_id = r.workspace_id and o.meeting_url = r.meeting_url
       and o.join_at = r.join_at and o.status <> 'canceled'
     where r.id = ${recordingId}::uuid`.execute(trx);
  return twin.rows.length > 0;
}

/** What GET /v1/bot-recordings filters by; `before` is the cursor (join time and id of the last one shown). */
export interface RecordingFilter {
  statuses?: BotRecordingStatus[];
  /** A failure code, or its prefix before a colon (`bot.fatal` matches `bot.fatal:timeout`). */
  failureCode?: string;
  meetingId?: string;
  from?: Date;
  to?: Date;
  before?: { at: Date; id: string };
}

/** A page of the workspace's recordings, newest meeting first. */
export async function listRecordings(
  db: Executor,
  workspaceId: string,
  f: RecordingFilter,
  limit: number,
): Promise<BotRecordingRow[]> {
  let q = db.selectFrom('bot_recordings').selectAll().where('workspace_id', '=', workspaceId);
  if (f.statuses) q = q.where('status', 'in', f.statuses);
  const code = f.failureCode;
  if (code !== undefined) {
    q = q.where((eb) =>
      eb.or([
        eb('failure_code', '=', code),
        eb('failure_code', 'like', `${code.replace(/[\\%_]/g, '\\$&')}:%`),
      ]),
    );
  }
  if (f.meetingId !== undefined) q = q.where('meeting_id', '=', f.meetingId);
  if (f.from) q = q.where('join_at', '>=', f.from);
  if (f.to) q = q.where('join_at', '<', f.to);
  if (f.before)
    q = q.where(sql<boolean>`(join_at, id) < (${f.before.at}::timestamptz, ${f.before.id}::uuid)`);
  return q.orderBy('join_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}
