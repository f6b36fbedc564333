import type { MeetingRow, MeetingsTable, Tx } from '../db/schema.ts';
import type { Updateable } from 'kysely';
import { BotRecordingStatus, EventType, MeetingStatus } from '../domain/status.ts';
import { activeRecordingsOfMeeting, moveBotRecording } from '../bots/bot-recording-store.ts';
import { emitEvent } from '../events/outbox-store.ts';
import type { MeetingDeps } from './deps.ts';
import type { EndTransition } from './pg-meeting-store.ts';

/**
 * A meeting ends (complete or failed), and what its end sets off, in the caller's transaction:
 * R7, a bot's recording ends with the meeting its audio became; O3, the end is an event for
 * customer webhooks, written in the same transaction (O1).
 */
export async function endMeetingAs(
  deps: Pick<MeetingDeps, 'meetings'>,
  trx: Tx,
  meeting: MeetingRow,
  name: EndTransition,
  actor: string,
  reason: string | null,
  set: Updateable<MeetingsTable> = {},
): Promise<MeetingRow> {
  const row = await deps.meetings.endTransition(trx, meeting, name, actor, reason, set);
  const status = row.status === MeetingStatus.complete ? MeetingStatus.complete : MeetingStatus.failed;
  for (const rec of await activeRecordingsOfMeeting(trx, meeting.id)) {
    if (rec.status !== BotRecordingStatus.processing) continue;
    await moveBotRecording(trx, rec.id, status, {
      actor,
      reason: `its meeting is ${status}`,
      set:
        status === MeetingStatus.failed
          ? { failure_code: 'meeting.failed', failure_message: row.failure_message }
          : {},
    });
  }
  // L25: a track's end is its meeting's business, not an event of its own.
  if (meeting.parent_id !== null) return row;
  await emitEvent(trx, {
    workspaceId: meeting.workspace_id,
    type: status === MeetingStatus.complete ? EventType.meetingCompleted : EventType.meetingFailed,
    subjectId: meeting.id,
    payload: { status, failureCode: row.failure_code, failureMessage: row.failure_message },
  });
  return row;
}
