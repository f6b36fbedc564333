/**
 * Error and reason codes that clients act on (the web app's outbox, its meeting page): changing one
 * is a breaking change of the API. The server throws them by these names; the web app imports the
 * type (never the object: it takes only types from the server) and compares through it, so a
 * misspelt or retired code fails its typecheck.
 */
export const ClientCode = {
  /** 409: a chunk numbered at or past the count End declared. */
  chunkAfterEnd: 'chunk.after_end',
  /** 409: chunks or End for a meeting that is not a live one. */
  meetingNotLive: 'meeting.not_live',
  /** 413: the workspace's or the installation's storage quota. */
  storageQuotaExceeded: 'storage.quota_exceeded',
  /** 404: no such meeting in this workspace (or it was deleted). */
  meetingNotFound: 'meeting.not_found',
  /** 409: End with a count different from the one declared before. */
  endChunksConflict: 'end.chunks_conflict',
  /** 409: End with a count below the chunks already stored. */
  endChunksBelowStored: 'end.chunks_below_stored',
  /** Minutes reason: there was no transcript to write minutes from. */
  minutesNoTranscript: 'minutes.no_transcript',
} as const;
export type ClientCode = (typeof ClientCode)[keyof typeof ClientCode];
