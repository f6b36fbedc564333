/**
 * The API's response shapes as TypeBox schemas: JSON Schema for the OpenAPI document and the
 * tests' response checks, `Static<>` types for the web app (which imports them with `import type`).
 * Schemas and types only: nothing here runs a request.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { BotRecordingStatus, MeetingSource, MeetingStatus, MinutesStatus } from '../domain/status.ts';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Timestamp = Type.String({ format: 'date-time' });
const OneOf = <T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ enum: [...values], ...(description ? { description } : {}) });

/** Why something did not happen: the code, the provider's message, and the same in plain words. */
export const ReasonSchema = Type.Object({
  code: Type.String(),
  message: Nullable(Type.String()),
  plain: Type.String(),
});

/** The minutes' content (src/domain/minutes). */
export const MinutesContentSchema = Type.Object(
  {
    writer: Type.Unsafe<'llm' | 'extractive'>({ enum: ['llm', 'extractive'] }),
    model: Nullable(Type.String()),
    summary: Type.String(),
    decisions: Type.Array(Type.String()),
    actionItems: Type.Array(Type.String()),
    note: Nullable(Type.String()),
  },
  { additionalProperties: true },
);

const Windows = Type.Object(
  {
    total: Type.Integer(),
    done: Type.Integer(),
    inFlight: Type.Integer(),
    held: Type.Integer(),
    exhausted: Type.Integer(),
    missing: Type.Integer(),
  },
  {
    description:
      'done / still being attempted / held (J20: isolated after its workers kept dying or its errors ran out, tried again alone on a slow backoff; the meeting does not wait for it) / retries exhausted / no audio or no job',
  },
);

/** A meeting as the API shows it (src/api/meeting-routes.ts meetingView). */
export const MeetingAccessSchema = Type.Object({
  ownerUserId: Nullable(Type.String({ format: 'uuid' })),
  visibility: OneOf(['private', 'workspace', 'shared'] as const),
  sharedWith: Type.Array(Type.String({ format: 'uuid' })),
});
export const MeetingSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  ownerUserId: Nullable(
    Type.String({ format: 'uuid', description: 'U4: who made it; null for a service account’s key' }),
  ),
  visibility: OneOf(['private', 'workspace', 'shared'] as const),
  source: OneOf(Object.values(MeetingSource)),
  language: Nullable(Type.String()),
  channels: Nullable(
    Type.Literal('speakers', { description: 'B11: each channel of the upload is a speaker' }),
  ),
  status: OneOf(Object.values(MeetingStatus)),
  durationMs: Nullable(Type.Integer()),
  tracks: Type.Array(
    Type.Object({
      track: Type.String(),
      meetingId: Type.String({ format: 'uuid' }),
      offsetMs: Type.Integer(),
      status: OneOf(Object.values(MeetingStatus)),
    }),
    {
      description:
        'L25: a live meeting’s tracks beside its own (the microphone): each a timeline of its own with its chunks sent with `track=`; empty for a meeting of one track',
    },
  ),
  windows: Windows,
  progress: Nullable(
    Type.Object({
      stage: OneOf([
        'recording',
        'transcribing',
        'grace',
        'waiting_for_windows',
        'last_stretch',
        'writing_minutes',
        'finishing',
      ] as const),
      message: Type.String(),
    }),
  ),
  transcriptComplete: Type.Boolean(),
  revision: Type.Integer({
    description:
      'L19: how many times the published transcript was revised with audio that arrived late (0 until then)',
  }),
  minutes: Type.Object({
    status: OneOf(Object.values(MinutesStatus)),
    reason: Nullable(ReasonSchema),
    content: Nullable(MinutesContentSchema),
    writtenAt: Nullable(Timestamp),
    revision: Nullable(Type.Integer({ description: 'the transcript revision these minutes describe' })),
    stale: Type.Boolean({
      description:
        'the minutes describe an earlier revision of the transcript (being rewritten, or a rewrite failed)',
    }),
  }),
  failure: Nullable(ReasonSchema),
  declaredChunks: Nullable(
    Type.Integer({ description: 'L20: the number of chunks End declared; a seq at or past it is refused' }),
  ),
  missingChunks: Type.Array(Type.Integer(), {
    description:
      'Seqs the timeline went past without their chunk (at most 1000 listed); each is still taken if it comes',
  }),
  missingChunkCount: Type.Integer(),
  lateAudio: Type.Object(
    {
      waitingChunks: Type.Integer({
        description: 'chunks stored ahead of one that has not arrived, waiting for it or the patience',
      }),
      lateChunks: Type.Integer({
        description: 'chunks that arrived after the timeline went past them or after the close-out',
      }),
      repairing: Type.Boolean(),
      lastRepairAt: Nullable(Timestamp),
      failure: Nullable(ReasonSchema),
      message: Nullable(Type.String({ description: 'one sentence for the screen' })),
    },
    { description: 'L19: audio stored but not (yet) in the transcript, and repairs, in plain words' },
  ),
  drafts: Type.Object({
    shed: Type.Integer({
      description: 'L22: draft captions skipped because the drafts queue had fallen behind real time',
    }),
  }),
  heldAudio: Nullable(
    Type.Object(
      {
        awaiting: Type.Integer(),
        failed: Type.Integer(),
        keptUntil: Nullable(Timestamp),
        message: Type.String(),
      },
      {
        description:
          'J20: stretches with no transcript whose audio is kept for them (the gap a completed meeting shows): `awaiting` are still tried and their words are added when they come (a new revision, meeting.transcript_revised); `failed` were given up and are kept for an operator to resubmit until `keptUntil` (VERBATIM_HELD_AUDIO_DAYS after the meeting ended), then deleted. Null when there is none.',
      },
    ),
  ),
  audioDeletedAt: Nullable(Timestamp),
  playback: Nullable(
    Type.Object(
      { until: Timestamp },
      {
        description:
          'E4: its audio is kept for playback (GET …/audio) until then, as its workspace chose; null when it is not',
      },
    ),
  ),
  untranscribedWhenAudioDeleted: Nullable(
    Type.Object({ inFlight: Type.Integer(), exhausted: Type.Integer() }),
  ),
  createdAt: Timestamp,
  processingAt: Nullable(Timestamp),
  finalizingAt: Nullable(Timestamp),
  completedAt: Nullable(Timestamp),
  failedAt: Nullable(Timestamp),
});

/** The one error shape every refusal has (src/api/server.ts). */
export const ErrorSchema = Type.Object({
  error: Type.Object({ kind: Type.String(), code: Type.String(), message: Type.String() }),
});

/** A bot recording as the API shows it (src/bots/recordings.ts recordingView). */
export const BotRecordingSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  meetingUrl: Type.String(),
  joinAt: Timestamp,
  endsAt: Timestamp,
  status: OneOf(
    Object.values(BotRecordingStatus),
    'R7/R9: pending (no bot yet) → scheduled → joining → in_call → recording → processing (the import) → complete; or failed, canceled, not_recorded',
  ),
  botId: Nullable(Type.String()),
  failure: Nullable(Type.Object({ code: Type.String(), message: Nullable(Type.String()) })),
  meetingId: Nullable(Type.String({ format: 'uuid' })),
  lastError: Nullable(Type.String()),
});

/** The shared schemas, registered by name: a route refers to them as `{ $ref: 'Meeting#' }`. */
export const SHARED_SCHEMAS = {
  Error: ErrorSchema,
  Meeting: MeetingSchema,
  BotRecording: BotRecordingSchema,
};
export const ref = (name: keyof typeof SHARED_SCHEMAS) => Type.Unsafe({ $ref: `${name}#` });
const MeetingRef = ref('Meeting');
const Cursor = Nullable(
  Type.String({ description: 'give it as `cursor` for the next page; null at the end' }),
);

export const MeetingListSchema = Type.Object({
  meetings: Type.Array(MeetingRef),
  nextCursor: Cursor,
  previews: Type.Record(
    Type.String({ format: 'uuid' }),
    Type.Object({
      text: Type.String({
        description: 'the first words said, formatted as the transcript reads ("" before any)',
      }),
      speakers: Type.Array(Type.String(), { description: 'W1: who spoke, by name' }),
    }),
    { description: 'E1: each listed meeting’s first words and speakers, by meeting id' },
  ),
});

export const ChunkStoredSchema = Type.Object({
  seq: Type.Integer(),
  created: Type.Boolean(),
  meeting: MeetingRef,
});

/** W1: a speaker as the transcript names it. */
export const SpeakerRefSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String({ description: 'The name a person gave it, else its source’s label' }),
  source: Type.Union(
    [Type.Literal('participant'), Type.Literal('track'), Type.Literal('channel'), Type.Literal('recogniser')],
    {
      description: 'Who knew it: the bot provider’s participant, a track, a channel, a diarizing recogniser',
    },
  ),
});

/** W1/W4: a meeting's speaker. */
export const SpeakerSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String({ description: 'displayName when a person gave one, else label' }),
  label: Type.String({
    description: 'The source’s own label (a participant’s name, “You”, “Channel 2”, “Speaker A”)',
  }),
  displayName: Type.Union([Type.String(), Type.Null()]),
  source: SpeakerRefSchema.properties.source,
  mergedInto: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description: 'The speaker it was merged into: its words read as that one’s',
  }),
  scope: Type.Union([Type.Literal('meeting'), Type.Literal('window')], {
    description:
      'W3: `window` for a recogniser’s speaker that holds only within one window of audio (the recogniser was given no reference clips): the same person may be several speakers',
  }),
});

const Segment = Type.Object({
  startMs: Type.Integer(),
  endMs: Type.Integer(),
  text: Type.String(),
  speaker: Type.Union([SpeakerRefSchema, Type.Null()], {
    description: 'W1: who said it, where a source knows; null when none does (never guessed)',
  }),
  speakerAttribution: Type.Union(
    [
      Type.Literal('source'),
      Type.Literal('turn'),
      Type.Literal('split'),
      Type.Literal('overlap'),
      Type.Null(),
    ],
    {
      description:
        'W2: `source` from its own track, channel or recogniser cluster; `turn` inside one speaker’s turns; `split` cut at word times where the speaker changed; `overlap` spans a change without word times and went to the speaker of the largest overlap (it may hold another speaker’s words)',
    },
  ),
  rawText: Type.String({
    description:
      'E2: the recogniser’s own words, as it gave them (`text` may be formatted from them, or a person’s correction)',
  }),
  formatted: Type.Boolean({
    description:
      'E2: `text` was formatted here (sentences, capitals) from a recogniser that gives neither case nor punctuation',
  }),
  correctionId: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
    description: 'E3: the correction `text` comes from, when a person corrected this line',
  }),
  review: Type.Union(
    [Type.Object({ correctionId: Type.String({ format: 'uuid' }), text: Type.String() }), Type.Null()],
    {
      description:
        'E3: a correction of this stretch whose words late audio changed since: a person should look (correct the line again, or delete the correction)',
    },
  ),
});
export const SegmentSchema = Segment;
export const TranscriptSchema = Type.Object({
  meetingId: Type.String({ format: 'uuid' }),
  complete: Type.Boolean(),
  revision: Type.Integer(),
  segments: Type.Array(Segment),
});

export const ResubmitSchema = Type.Object(
  { superseded: Type.Integer(), created: Type.Integer(), meeting: MeetingRef },
  { additionalProperties: true },
);

export const BatchSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  createdAt: Timestamp,
  canceledAt: Nullable(Timestamp),
  meetings: Type.Array(
    Type.Object({
      id: Type.String({ format: 'uuid' }),
      title: Type.String(),
      status: OneOf(Object.values(MeetingStatus)),
      failureCode: Nullable(Type.String()),
    }),
  ),
});

const WebhookEndpoint = Type.Object({
  id: Type.String({ format: 'uuid' }),
  url: Type.String(),
  events: Type.Array(Type.String()),
  createdAt: Timestamp,
  disabledAt: Nullable(Timestamp),
});
export const WebhookCreatedSchema = Type.Composite([
  WebhookEndpoint,
  Type.Object({ secret: Type.String({ description: 'the signing secret, shown this once' }) }),
]);
export const WebhookListSchema = Type.Object({ webhooks: Type.Array(WebhookEndpoint) });
export const DeliveryLogSchema = Type.Object({
  deliveries: Type.Array(
    Type.Object({
      id: Type.String(),
      eventId: Type.String(),
      eventType: Type.String(),
      status: Type.String(),
      attempts: Type.Integer(),
      nextAttemptAt: Nullable(Timestamp),
      lastError: Nullable(Type.String()),
      createdAt: Timestamp,
      deliveredAt: Nullable(Timestamp),
      failedAt: Nullable(Timestamp),
      log: Type.Array(
        Type.Object({
          attempt: Type.Integer(),
          statusCode: Nullable(Type.Integer()),
          error: Nullable(Type.String()),
          durationMs: Nullable(Type.Integer()),
          at: Timestamp,
        }),
      ),
    }),
  ),
});

export const ApiKeySchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  workspaceId: Type.String(),
  name: Type.String(),
  hint: Type.String({ description: 'the public part of the key only' }),
  status: OneOf(['active', 'expired', 'revoked'] as const),
  createdAt: Timestamp,
  lastUsedAt: Nullable(Timestamp),
  expiresAt: Nullable(Timestamp),
  revokedAt: Nullable(Timestamp),
  userId: Nullable(Type.String({ description: 'the person it acts for; null for a service account' })),
  scopes: Type.Array(OneOf(['read', 'write', 'admin', 'keys'] as const)),
});
const RoleSchema = OneOf(['owner', 'admin', 'member', 'viewer'] as const);
export const SessionSchema = Type.Object({
  user: Type.Object({ id: Type.String({ format: 'uuid' }), email: Type.String(), name: Type.String() }),
  workspaceId: Type.String({ format: 'uuid' }),
  role: RoleSchema,
  workspaces: Type.Array(
    Type.Object({ id: Type.String({ format: 'uuid' }), name: Type.String(), role: RoleSchema }),
  ),
  csrfToken: Type.String({
    description: 'send it in x-csrf-token with every write made with the session cookie',
  }),
  expiresAt: Timestamp,
});
export const MemberSchema = Type.Object({
  userId: Type.String({ format: 'uuid' }),
  email: Type.String(),
  name: Type.String(),
  role: RoleSchema,
  joinedAt: Timestamp,
});
export const MemberListSchema = Type.Object({ members: Type.Array(MemberSchema) });
export const InviteSchema = Type.Object({
  token: Type.String({ description: 'the link’s secret, shown this once: the web app’s /join#<token>' }),
  role: RoleSchema,
  expiresAt: Timestamp,
  emailedTo: Nullable(
    Type.String({ description: 'U9: the address the link was emailed to; null: not emailed' }),
  ),
  emailError: Nullable(
    Type.String({ description: 'U9: why the email was not sent (the link is valid: copy it instead)' }),
  ),
});
export const ApiKeyListSchema = Type.Object({ apiKeys: Type.Array(ApiKeySchema) });
export const ApiKeyCreatedSchema = Type.Composite([
  ApiKeySchema,
  Type.Object({ key: Type.String({ description: 'the key, shown this once' }) }),
]);

export const CalendarEventResultSchema = Type.Object({
  recording: Nullable(ref('BotRecording')),
  duplicate: Type.Boolean(),
  replaced: Nullable(Type.String({ description: 'the id of the recording this one replaced' })),
  skipped: Nullable(Type.String({ description: 'why nothing was made' })),
});
const Feed = Type.Object({
  id: Type.String({ format: 'uuid' }),
  url: Type.String({ description: 'the address with its secret parts redacted' }),
  createdAt: Timestamp,
  lastPolledAt: Nullable(Timestamp),
  lastError: Nullable(Type.String()),
  nextPollAt: Nullable(Timestamp),
});
export const FeedSchema = Feed;
export const FeedListSchema = Type.Object({ feeds: Type.Array(Feed) });
export const FeedRemovedSchema = Type.Object({ id: Type.String(), canceled: Type.Integer() });
export const BotRecordingListSchema = Type.Object({
  recordings: Type.Array(ref('BotRecording')),
  nextCursor: Cursor,
});
export const BotStoppedSchema = Type.Composite([
  BotRecordingSchema,
  Type.Object({ leaving: Type.Boolean({ description: 'the bot is being taken out of the call' }) }),
]);
export const BotSettingsSchema = Type.Object({ enabled: Type.Boolean() });
export const BotSettingsChangedSchema = Type.Object({ enabled: Type.Boolean(), canceled: Type.Integer() });

const Hit = Type.Object({
  kind: OneOf(['segment', 'minutes'] as const),
  startMs: Nullable(Type.Integer({ description: 'null for a line of the minutes' })),
  endMs: Nullable(Type.Integer()),
  snippet: Type.String(),
  highlights: Type.Array(Type.Object({ start: Type.Integer(), end: Type.Integer() }), {
    description: '[start, end) offsets into the snippet',
  }),
  snippetHtml: Type.String({ description: 'the snippet escaped, matches in <mark>' }),
  speaker: Nullable(Type.String({ description: 'W6: who said it, where a source knows; null for minutes' })),
});
export const SearchSchema = Type.Object({
  query: Type.String(),
  results: Type.Array(
    Type.Object({
      meeting: Type.Object({
        id: Type.String({ format: 'uuid' }),
        title: Type.String(),
        createdAt: Timestamp,
        source: OneOf(Object.values(MeetingSource)),
        status: OneOf(Object.values(MeetingStatus)),
      }),
      score: Type.Number(),
      hitCount: Type.Integer(),
      hits: Type.Array(Hit),
    }),
  ),
  nextCursor: Cursor,
});

const Passage = Type.Object({
  n: Type.Integer(),
  meetingId: Type.String({ format: 'uuid' }),
  meetingTitle: Type.String(),
  meetingDate: Timestamp,
  kind: OneOf(['segment', 'minutes'] as const),
  startMs: Nullable(Type.Integer()),
  endMs: Nullable(Type.Integer()),
  text: Type.String(),
});
export const AskSchema = Type.Object({
  question: Type.String(),
  mode: OneOf(['model', 'passages'] as const),
  answer: Nullable(Type.String({ description: 'null in `passages` mode' })),
  note: Nullable(Type.String()),
  model: Nullable(Type.String()),
  citations: Type.Array(Passage),
  passages: Type.Array(Passage),
});

export const OverviewSchema = Type.Object(
  {
    queues: Type.Unknown(),
    health: Type.Unknown({ description: 'installation-wide' }),
    workspace: Type.Unknown({
      description: 'this workspace’s failed, quarantined and outage counts',
    }),
    deadLetters: Type.Array(Type.Unknown()),
    outages: Type.Unknown(),
    storedBytes: Type.Unknown(),
    usage: Type.Union(
      [
        Type.Object({
          workspaceId: Type.String(),
          name: Type.String(),
          weight: Type.Number(),
          storedBytes: Type.Number(),
          reservedBytes: Type.Number({
            description: 'F1: bytes set aside for the windows of recordings being split, not stored yet',
          }),
          queuedWindows: Type.Integer(),
          runningJobs: Type.Integer(),
          hoursThisMonth: Type.Number(),
          monthlyHoursCap: Type.Union([Type.Number(), Type.Null()], {
            description: 'the cap on those hours an operator set; past it, new meetings and uploads get 429',
          }),
          maxRunningJobs: Type.Union([Type.Integer(), Type.Null()], {
            description:
              'F5: the cap an operator set on its batch jobs running at once (uploads, their windows, repairs); live work is never capped',
          }),
          openStreams: Type.Integer({
            description: 'F7: its event streams open on every api process that reported in the last minute',
          }),
        }),
        Type.Null(),
      ],
      {
        description:
          'F7: this workspace’s weight, stored bytes, queued windows, running jobs, hours transcribed this month, its monthly cap, its running cap and its open event streams',
      },
    ),
  },
  { additionalProperties: true },
);

export const HealthSchema = Type.Object({ status: Type.String(), database: Type.String() });

export const ReadySchema = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
  database: Type.String({ description: '`ok` or `unreachable`' }),
  migrations: Type.String({ description: '`ok`, or how many of this release’s migrations are not applied' }),
  storage: Type.String({ description: '`ok`, or `not writable` (the log says why)' }),
});

export type MeetingResponse = Static<typeof MeetingSchema>;
export type ReasonResponse = Static<typeof ReasonSchema>;
export type TranscriptResponse = Static<typeof TranscriptSchema>;
export type SearchResponse = Static<typeof SearchSchema>;
export type AskResponse = Static<typeof AskSchema>;
export type MinutesContent = Static<typeof MinutesContentSchema>;
