/**
 * Every status is declared once here, and every transition is listed as data (from → to). Store
 * methods with the same names perform them with a guarded UPDATE … WHERE status = ANY(from).
 */
export const MeetingStatus = {
  created: 'created',
  recording: 'recording',
  processing: 'processing',
  finalizing: 'finalizing',
  complete: 'complete',
  failed: 'failed',
} as const;
export type MeetingStatus = (typeof MeetingStatus)[keyof typeof MeetingStatus];

export const MeetingSource = { live: 'live', upload: 'upload', bot: 'bot' } as const;
export type MeetingSource = (typeof MeetingSource)[keyof typeof MeetingSource];

export const MeetingTransitions = {
  startProcessing: { from: [MeetingStatus.created], to: MeetingStatus.processing },
  startRecording: { from: [MeetingStatus.created], to: MeetingStatus.recording },
  startFinalizing: {
    from: [MeetingStatus.processing, MeetingStatus.recording, MeetingStatus.created],
    to: MeetingStatus.finalizing,
  },
  completeMeeting: { from: [MeetingStatus.finalizing], to: MeetingStatus.complete },
  failMeeting: {
    from: [
      MeetingStatus.created,
      MeetingStatus.processing,
      MeetingStatus.recording,
      MeetingStatus.finalizing,
    ],
    to: MeetingStatus.failed,
  },
} as const satisfies Record<string, { from: readonly MeetingStatus[]; to: MeetingStatus }>;

export const MinutesStatus = {
  none: 'none',
  pending: 'pending',
  written: 'written',
  unavailable: 'unavailable',
  failed: 'failed',
} as const;
export type MinutesStatus = (typeof MinutesStatus)[keyof typeof MinutesStatus];

export const WindowStatus = {
  pending: 'pending',
  transcribed: 'transcribed',
  failed: 'failed',
  missing: 'missing',
  /** L19: replaced by a repair's windows; kept for the audit trail, never shown. */
  superseded: 'superseded',
} as const;
export type WindowStatus = (typeof WindowStatus)[keyof typeof WindowStatus];

export const WindowTransitions = {
  markWindowTranscribed: { from: [WindowStatus.pending], to: WindowStatus.transcribed },
  markWindowFailed: { from: [WindowStatus.pending], to: WindowStatus.failed },
  markWindowMissing: { from: [WindowStatus.pending], to: WindowStatus.missing },
  /** J13: a resubmission gives a failed window another run, while its audio is still stored. */
  retryWindow: { from: [WindowStatus.failed], to: WindowStatus.pending },
  /** L19: a repair re-cut the stretch this window covered. */
  supersedeWindow: {
    from: [WindowStatus.pending, WindowStatus.transcribed, WindowStatus.failed, WindowStatus.missing],
    to: WindowStatus.superseded,
  },
} as const satisfies Record<string, { from: readonly WindowStatus[]; to: WindowStatus }>;

export const JobStatus = {
  pending: 'pending',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  canceled: 'canceled',
  superseded: 'superseded',
} as const;
export type JobStatus = (typeof JobStatus)[keyof typeof JobStatus];

/** A job waiting to run or running. */
export const ACTIVE_JOB_STATUSES = [JobStatus.pending, JobStatus.running] as const;

export const JobTransitions = {
  claimJob: { from: [JobStatus.pending], to: JobStatus.running },
  completeJob: { from: [JobStatus.running], to: JobStatus.completed },
  requeueJob: { from: [JobStatus.running], to: JobStatus.pending },
  failJob: { from: [JobStatus.running, JobStatus.pending], to: JobStatus.failed },
  releaseJob: { from: [JobStatus.running], to: JobStatus.pending },
  cancelJob: { from: [JobStatus.pending, JobStatus.running], to: JobStatus.canceled },
  supersedeJob: { from: [JobStatus.pending, JobStatus.running], to: JobStatus.superseded },
} as const satisfies Record<string, { from: readonly JobStatus[]; to: JobStatus }>;

/** J4: an attempt is `running` until it gets exactly one of these outcomes. */
export const AttemptOutcome = {
  completed: 'completed',
  retryableFailed: 'retryable_failed',
  failed: 'failed',
  canceled: 'canceled',
  superseded: 'superseded',
  leaseExpired: 'lease_expired',
} as const;
export type AttemptOutcome = (typeof AttemptOutcome)[keyof typeof AttemptOutcome];
export const ATTEMPT_RUNNING = 'running';

export const JobKind = {
  splitRecording: 'split-recording',
  transcribeWindow: 'transcribe-window',
  closeOutMeeting: 'close-out-meeting',
  writeMinutes: 'write-minutes',
  importBotRecording: 'import-bot-recording',
  scheduleBot: 'schedule-bot',
  deleteBot: 'delete-bot',
  leaveBot: 'leave-bot',
  repairTimeline: 'repair-timeline',
  importBotSpeakers: 'import-bot-speakers',
} as const;
export type JobKind = (typeof JobKind)[keyof typeof JobKind];

/** L13: one queue per resource, each with its own concurrency. */
export const QueueName = {
  intake: 'intake',
  transcription: 'transcription',
  closeout: 'closeout',
  minutes: 'minutes',
  /** R10: calls to the meeting-bot provider, so a slow provider never holds an upload's split. */
  bots: 'bots',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

export const QUEUE_OF: Record<JobKind, QueueName> = {
  [JobKind.splitRecording]: QueueName.intake,
  [JobKind.transcribeWindow]: QueueName.transcription,
  [JobKind.closeOutMeeting]: QueueName.closeout,
  [JobKind.writeMinutes]: QueueName.minutes,
  [JobKind.importBotRecording]: QueueName.bots,
  [JobKind.scheduleBot]: QueueName.bots,
  [JobKind.deleteBot]: QueueName.bots,
  [JobKind.leaveBot]: QueueName.bots,
  // A repair recognises audio: it shares the speech recognizer's queue and concurrency.
  [JobKind.repairTimeline]: QueueName.transcription,
  [JobKind.importBotSpeakers]: QueueName.bots,
};

export const EventType = {
  meetingTranscribed: 'meeting.transcribed',
  meetingCompleted: 'meeting.completed',
  meetingFailed: 'meeting.failed',
  minutesReady: 'minutes.ready',
  /** L19: a published transcript changed (late audio was spliced in). */
  meetingTranscriptRevised: 'meeting.transcript_revised',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export const Consumer = { minutes: 'minutes', webhooks: 'webhooks', search: 'search' } as const;
export type Consumer = (typeof Consumer)[keyof typeof Consumer];

export const CONSUMERS_OF: Record<EventType, Consumer[]> = {
  // O2: the search index follows every change of a published transcript and of its minutes.
  [EventType.meetingTranscribed]: [Consumer.minutes, Consumer.webhooks, Consumer.search],
  [EventType.meetingCompleted]: [Consumer.webhooks],
  [EventType.meetingFailed]: [Consumer.webhooks],
  [EventType.minutesReady]: [Consumer.webhooks, Consumer.search],
  [EventType.meetingTranscriptRevised]: [Consumer.minutes, Consumer.webhooks, Consumer.search],
};

/**
 * R7/R9: a meeting bot's recording. It waits for its bot to be created (`pending`), holds a bot
 * (`scheduled`), follows the provider's word forward only (`joining` → `in_call` → `recording` →
 * `processing`, the import), and ends `complete` (with its meeting), `failed`, `canceled` or
 * `not_recorded` (the bot ended without recording).
 */
export const BotRecordingStatus = {
  pending: 'pending',
  scheduled: 'scheduled',
  joining: 'joining',
  inCall: 'in_call',
  recording: 'recording',
  processing: 'processing',
  complete: 'complete',
  failed: 'failed',
  canceled: 'canceled',
  notRecorded: 'not_recorded',
} as const;
export type BotRecordingStatus = (typeof BotRecordingStatus)[keyof typeof BotRecordingStatus];

export const BOT_RECORDING_FINISHED: readonly BotRecordingStatus[] = [
  BotRecordingStatus.complete,
  BotRecordingStatus.failed,
  BotRecordingStatus.canceled,
  BotRecordingStatus.notRecorded,
];
const BOT_ACTIVE = [
  BotRecordingStatus.pending,
  BotRecordingStatus.scheduled,
  BotRecordingStatus.joining,
  BotRecordingStatus.inCall,
  BotRecordingStatus.recording,
  BotRecordingStatus.processing,
] as const;

/** How far along the provider's word a recording is: a report never moves it back. */
export const BOT_PROGRESS_RANK: Record<BotRecordingStatus, number> = {
  pending: 0,
  scheduled: 1,
  joining: 2,
  in_call: 3,
  recording: 4,
  processing: 5,
  complete: 6,
  failed: 6,
  canceled: 6,
  not_recorded: 6,
};

/**
 * Every legal move of a bot recording, by its target: the statuses it may come from. Anything else
 * is refused (and audited as refused) by the store (src/bots/bot-recording-store.ts).
 */
export const BotRecordingTransitions = {
  /** The bot was created (or found by its metadata) and attached. */
  scheduled: { from: [BotRecordingStatus.pending], to: BotRecordingStatus.scheduled },
  /** The provider's word; `canceled` → `joining`: a canceled recording whose bot got in anyway. */
  joining: {
    from: [BotRecordingStatus.scheduled, BotRecordingStatus.canceled],
    to: BotRecordingStatus.joining,
  },
  inCall: {
    from: [BotRecordingStatus.scheduled, BotRecordingStatus.joining],
    to: BotRecordingStatus.inCall,
  },
  recording: {
    from: [BotRecordingStatus.scheduled, BotRecordingStatus.joining, BotRecordingStatus.inCall],
    to: BotRecordingStatus.recording,
  },
  /** The call is over and its recording is being imported. */
  processing: {
    from: [
      BotRecordingStatus.scheduled,
      BotRecordingStatus.joining,
      BotRecordingStatus.inCall,
      BotRecordingStatus.recording,
    ],
    to: BotRecordingStatus.processing,
  },
  /** Its meeting completed (or the bot recorded nothing at all). */
  complete: { from: [BotRecordingStatus.processing], to: BotRecordingStatus.complete },
  notRecorded: { from: [BotRecordingStatus.processing], to: BotRecordingStatus.notRecorded },
  failed: { from: BOT_ACTIVE, to: BotRecordingStatus.failed },
  /** A user's cancel (before the bot joins) or its meeting deleted (at any point). */
  canceled: { from: BOT_ACTIVE, to: BotRecordingStatus.canceled },
} as const satisfies Record<string, { from: readonly BotRecordingStatus[]; to: BotRecordingStatus }>;

/** The transition that ends in `to` (none ends in `pending`: a recording is only created so). */
export function botTransitionTo(to: BotRecordingStatus): {
  from: readonly BotRecordingStatus[];
  to: BotRecordingStatus;
} {
  return Object.values(BotRecordingTransitions).find((t) => t.to === to) ?? { from: [], to };
}
