import type { BotDeps } from '../bots/provider.ts';
import type { Checkpoints } from '../checkpoints.ts';
import type { Config } from '../config.ts';
import type { Db } from '../db/schema.ts';
import type { PgJobStore } from '../jobs/pg-job-store.ts';
import type { Logger } from '../log.ts';
import type { AnswerWriter, AudioDecoder, BlobStore, MinutesWriter, Transcriber } from '../ports.ts';
import type { SearchStore } from '../search/search-store.ts';
import type { PgMeetingStore } from './pg-meeting-store.ts';

/** What the meeting use cases need; built once by the composition root. */
export interface MeetingDeps {
  db: Db;
  /** B2: a small pool of its own for staged cleanup rows (see src/storage/objects.ts). */
  stagingDb?: Db;
  jobs: PgJobStore;
  meetings: PgMeetingStore;
  blobs: BlobStore;
  transcriber: Transcriber;
  /** L22: what drafts are recognised with (VERBATIM_DRAFT_RECOGNISER); the finals use `transcriber`. */
  draftTranscriber?: Transcriber;
  minutesWriter: MinutesWriter;
  /** O5: the chat model that answers questions; null offline (answers are the passages). */
  answerWriter: AnswerWriter | null;
  /** O2/O4: the search index's store. */
  search: SearchStore;
  decoder: AudioDecoder;
  config: Config;
  log: Logger;
  checkpoints: Checkpoints;
  /** R1/R2: the meeting-bot provider and its shared budget; null when no provider key is set. */
  bots: BotDeps | null;
}
