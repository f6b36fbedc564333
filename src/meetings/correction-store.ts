import type { Executor } from '../db/schema.ts';
import type { Correction } from '../domain/corrections.ts';

/** E3: a meeting's corrections over a stretch of its timeline (all of it without a range). */
export async function correctionsOf(
  db: Executor,
  meetingId: string,
  range?: { fromMs: number; toMs: number },
): Promise<Correction[]> {
  let query = db
    .selectFrom('transcript_corrections')
    .select(['id', 'start_ms', 'end_ms', 'original_text', 'text', 'created_at'])
    .where('meeting_id', '=', meetingId);
  if (range) query = query.where('end_ms', '>', range.fromMs).where('start_ms', '<', range.toMs);
  const rows = await query.orderBy('created_at').execute();
  return rows.map((r) => ({
    id: r.id,
    startMs: r.start_ms,
    endMs: r.end_ms,
    originalText: r.original_text,
    text: r.text,
    createdAt: r.created_at,
  }));
}

export async function insertCorrection(
  db: Executor,
  row: {
    id: string;
    workspaceId: string;
    meetingId: string;
    startMs: number;
    endMs: number;
    originalText: string;
    text: string;
    author: string;
  },
): Promise<void> {
  await db
    .insertInto('transcript_corrections')
    .values({
      id: row.id,
      workspace_id: row.workspaceId,
      meeting_id: row.meetingId,
      start_ms: row.startMs,
      end_ms: row.endMs,
      original_text: row.originalText,
      text: row.text,
      author: row.author,
    })
    .execute();
}

/** Whether a correction of this meeting was removed. */
export async function deleteCorrection(db: Executor, meetingId: string, id: string): Promise<boolean> {
  const done = await db
    .deleteFrom('transcript_corrections')
    .where('meeting_id', '=', meetingId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(done.numDeletedRows) > 0;
}

/** W7, E2: the vocabulary of the workspace a meeting is in (names keep their spelling). */
export async function vocabularyOfMeeting(db: Executor, meetingId: string): Promise<string[]> {
  const row = await db
    .selectFrom('meetings')
    .innerJoin('workspaces', 'workspaces.id', 'meetings.workspace_id')
    .select('workspaces.vocabulary')
    .where('meetings.id', '=', meetingId)
    .executeTakeFirst();
  return row?.vocabulary ?? [];
}
