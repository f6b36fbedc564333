import { randomUUID } from 'node:crypto';
import { withTenant } from '../db/tenant.ts';
import { sameWords } from '../domain/corrections.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { deleteCorrection, insertCorrection } from './correction-store.ts';
import type { MeetingDeps } from './deps.ts';
import { revise } from './speakers.ts';
import { transcriptLines, type ReadLine } from './transcript-read.ts';

export const MAX_CORRECTION_LENGTH = 10_000;

/**
 * E3: a person corrects one line of a transcript: the line that starts at `startMs` and whose
 * recogniser's words are `rawText` (as the reader was shown them; if a repair changed them since,
 * 409 `transcript.changed` and nothing is stored). The correction is a new transcript revision
 * with an audit row and `meeting.transcript_revised`: search, exports and minutes read it.
 */
export async function correctLine(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  input: { startMs: number; rawText: string; text: string },
  author: string,
): Promise<ReadLine> {
  const text = input.text.replace(/\s+/g, ' ').trim();
  if (text === '' || text.length > MAX_CORRECTION_LENGTH)
    throw new AppError(
      ErrorKind.invalidInput,
      'correction.text',
      `text must be the line's words, 1 to ${MAX_CORRECTION_LENGTH} characters (to leave the recogniser's words, delete the correction)`,
    );
  return withTenant(deps.db, workspaceId, async (trx) => {
    const found = await deps.meetings.get(workspaceId, meetingId, trx);
    // While words still come (recording, transcribing), the lines move under the reader: a line is
    // corrected once the transcript is complete (and before the meeting's lock, which chunks take).
    if (found.transcript_completed_at === null)
      throw new AppError(
        ErrorKind.conflict,
        'transcript.not_final',
        'the transcript is still being written: correct it once it is complete',
      );
    const meeting = await deps.meetings.lock(trx, found.id);
    // The whole transcript: which line a correction belongs to is decided over all of them.
    const line = (await transcriptLines(trx, meeting.id)).find(
      (l) => l.startMs === input.startMs && sameWords(l.rawText, input.rawText),
    );
    if (!line)
      throw new AppError(
        ErrorKind.conflict,
        'transcript.changed',
        'that line is no longer in the transcript as you read it (late audio may have re-cut it): reload and correct it again',
      );
    if (line.text === text && line.review === null) return line;
    // A line holds one correction: the one it showed, and one it asked a look for, are replaced.
    for (const old of [line.correctionId, line.review?.correctionId])
      if (old) await deleteCorrection(trx, meeting.id, old);
    const id = randomUUID();
    await insertCorrection(trx, {
      id,
      workspaceId: meeting.workspace_id,
      meetingId: meeting.id,
      startMs: line.startMs,
      endMs: line.endMs,
      originalText: line.rawText,
      text,
      author,
    });
    await revise(
      trx,
      meeting,
      `line at ${line.startMs} ms corrected`,
      { correctionId: id, startMs: line.startMs },
      author,
      { correctionId: id },
    );
    return { ...line, text, correctionId: id, review: null };
  });
}

/** E3: a correction taken back (or one needing a look dismissed): the recogniser's words read again. */
export async function removeCorrection(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  correctionId: string,
  author: string,
): Promise<void> {
  await withTenant(deps.db, workspaceId, async (trx) => {
    const found = await deps.meetings.get(workspaceId, meetingId, trx);
    const meeting = await deps.meetings.lock(trx, found.id);
    if (!(await deleteCorrection(trx, meeting.id, correctionId)))
      throw new AppError(
        ErrorKind.notFound,
        'correction.not_found',
        `no correction ${correctionId} in this meeting`,
      );
    await revise(trx, meeting, `correction ${correctionId} removed`, { correctionId }, author, {
      correctionId,
    });
  });
}

/** E3: a person renames a meeting (shown at once; search finds it by its new title). */
export async function renameMeeting(
  deps: MeetingDeps,
  workspaceId: string,
  meetingId: string,
  title: string,
): Promise<void> {
  await withTenant(deps.db, workspaceId, async (trx) => {
    const found = await deps.meetings.get(workspaceId, meetingId, trx);
    await deps.meetings.rename(trx, found.id, title);
  });
}
