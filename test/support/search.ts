import { randomUUID } from 'node:crypto';
import type { Harness } from './harness.ts';

/** A published meeting written straight into the tables, as a transcription would leave it. */
export async function seedMeeting(
  h: Harness,
  opts: {
    title: string;
    lines: string[];
    workspaceId?: string;
    language?: string;
    createdAt?: Date;
    source?: string;
  },
): Promise<string> {
  const db = h.app.database.db;
  const workspaceId = opts.workspaceId ?? h.workspaceId;
  const meetingId = randomUUID();
  const windowId = randomUUID();
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('meetings')
      .values({
        id: meetingId,
        workspace_id: workspaceId,
        source: opts.source ?? 'upload',
        title: opts.title,
        status: 'complete',
        window_ms: 60_000,
        language: opts.language ?? null,
        transcript_completed_at: new Date(),
        created_at: opts.createdAt ?? new Date(),
      })
      .execute();
    await trx
      .insertInto('windows')
      .values({
        id: windowId,
        workspace_id: workspaceId,
        meeting_id: meetingId,
        index: 0,
        start_ms: 0,
        end_ms: opts.lines.length * 5000,
        status: 'transcribed',
      })
      .execute();
    await trx
      .insertInto('segments')
      .values(
        opts.lines.map((text, i) => ({
          workspace_id: workspaceId,
          meeting_id: meetingId,
          window_id: windowId,
          seq: i,
          start_ms: i * 5000,
          end_ms: i * 5000 + 4000,
          text,
        })),
      )
      .execute();
  });
  return meetingId;
}
