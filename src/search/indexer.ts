import { transcriptLines } from '../meetings/transcript-read.ts';
import { isDatabaseConnectionLoss } from '../db/connect.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import type { IndexOutcome } from './search-store.ts';

/**
 * O2: the search index consumer. It takes meeting.transcribed, meeting.transcript_revised and
 * minutes.ready for a meeting and brings that meeting's index rows up to date; it is idempotent on
 * (meeting, revision), so a second delivery, a re-drive and an older event all change nothing.
 */
export async function indexMeetingForSearch(
  deps: Pick<MeetingDeps, 'db' | 'search' | 'checkpoints'>,
  meetingId: string,
): Promise<IndexOutcome> {
  return deps.db.transaction().execute((trx) =>
    deps.search.indexMeeting(
      trx,
      meetingId,
      (t) => transcriptLines(t, meetingId),
      () => deps.checkpoints.hit('search-index.before-commit', { meetingId }),
    ),
  );
}

/** How many ledger entries one re-drive pass takes: the rest wait for the next pass. */
export const REDRIVE_BATCH = 50;

/**
 * O2: the consumer's own re-drive. Whatever happened to an event (lost before the dispatcher, a
 * consumer killed mid-index, a consumer down for a day), the meeting stays in the ledger until
 * its index matches it, and each pass indexes the oldest entries. Returns how many it indexed.
 */
export async function redriveSearchIndex(
  deps: Pick<MeetingDeps, 'db' | 'search' | 'checkpoints' | 'log'>,
  batch = REDRIVE_BATCH,
): Promise<number> {
  let indexed = 0;
  for (const entry of await deps.search.ledger(batch)) {
    try {
      if ((await indexMeetingForSearch(deps, entry.meetingId)) === 'indexed') indexed++;
    } catch (err) {
      // The database gone fails every entry alike: the pass ends, and the next one tries again.
      if (isDatabaseConnectionLoss(err)) throw err;
      // One meeting that cannot be indexed must not hold up the others behind it in the ledger.
      // It stays there, so the ledger's age (verbatim status, /metrics) shows it to an operator.
      deps.log.warn(
        { meetingId: entry.meetingId, err: err instanceof Error ? err.message : String(err) },
        'search index: this meeting could not be indexed; it stays in the ledger',
      );
    }
  }
  if (indexed > 0) deps.log.info({ indexed }, 'search index re-drive indexed meetings the events missed');
  return indexed;
}
