/**
 * The API's response shapes as TypeBox schemas: JSON Schema for the OpenAPI document and the
 * tests' response checks, `Static<>` types for the web app (which imports them with `import type`).
 * Schemas and types only: nothing here runs a request.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { MeetingSource, MeetingStatus, MinutesStatus } from '../domain/status.ts';

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
export const MeetingSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  source: OneOf(Object.values(MeetingSource)),
  language: Nullable(Type.String()),
  status: OneOf(Object.values(MeetingStatus)),
  durationMs: Nullable(Type.Integer()),
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
  untranscribedWhenAudioDeleted: Nullable(
    Type.Object({ inFlight: Type.Integer(), exhausted: Type.Integer() }),
  ),
  createdAt: Timestamp,
  processingAt: Nullable(Timestamp),
  finalizingAt: Nullable(Timestamp),
  completedAt: Nullable(Timestamp),
  failedAt: Nullable(Timestamp),
});

export type MeetingResponse = Static<typeof MeetingSchema>;
export type ReasonResponse = Static<typeof ReasonSchema>;
export type MinutesContent = Static<typeof MinutesContentSchema>;
