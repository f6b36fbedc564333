import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Db, Executor, MeetingRow } from '../db/schema.ts';
import { readAsTenant, withTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { monthlyCapReached } from '../ops/queue-stats-store.ts';
import { MeetingSource, MeetingStatus } from '../domain/status.ts';
import { heldStretchesMessage, meetingProgress, plainReason } from '../domain/meeting-progress.ts';
import { formatTranscript } from '../domain/transcript-format.ts';
import type { Minutes } from '../ports.ts';
import { transcriptLines } from '../meetings/transcript-read.ts';
import { meetingDocx } from '../meetings/transcript-docx.ts';
import { ACCEPTED_AUDIO_TYPES, isAcceptedAudioType, storeRecording } from '../meetings/intake.ts';
import { endMeeting, MAX_SEQ, storeChunk, type ChunkFormat } from '../meetings/live.ts';
import { regenerateMinutes } from '../meetings/minutes.ts';
import { previewsOf } from '../meetings/preview-store.ts';
import { formatSegments } from '../domain/readable-text.ts';
import { applyCorrections, type Correction } from '../domain/corrections.ts';
import {
  correctLine,
  MAX_CORRECTION_LENGTH,
  removeCorrection,
  renameMeeting,
} from '../meetings/corrections.ts';
import { endTracks, trackMeetingId } from '../meetings/tracks.ts';
import { tracksOf, type TrackRow } from '../meetings/track-rows.ts';
import { chunkTrack, endTracksOf } from './track-params.ts';
import { cancelBatch, createBatch, deleteMeeting, getBatch, resubmitMeeting } from '../meetings/operator.ts';
import type { WindowCounts } from '../meetings/pg-meeting-store.ts';
import { liveState, NO_LIVE_STATE, type LiveState } from '../meetings/live-state.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import { formatBytes, STREAMED_UPLOAD_ROUTE, UPLOAD_ROUTE } from './request-limits.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { isVisibility } from '../domain/roles.ts';
import { isUuid } from '../domain/ids.ts';
import {
  bytesBody,
  empty,
  ERRORS,
  ID_PARAMS,
  json,
  jsonBody,
  refusal,
  type RouteSchema,
} from './contract.ts';
import {
  BatchSchema,
  ChunkStoredSchema,
  MeetingListSchema,
  ref,
  ResubmitSchema,
  SegmentSchema,
  TranscriptSchema,
} from './schemas.ts';

/**
 * F7: past its monthly cap of transcribed hours (an operator's `verbatim workspaces hours-cap`), a
 * workspace starts no new meeting or upload until the month turns (UTC); what it is already
 * recording or processing goes on, so no word already sent is refused.
 */
async function refuseOverMonthlyCap(deps: { db: Db }, workspaceId: string): Promise<void> {
  const reached = await monthlyCapReached(deps.db, workspaceId);
  if (!reached) return;
  const now = new Date();
  const turn = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  throw new AppError(
    ErrorKind.quotaExhausted,
    'quota.hours_exceeded',
    `this workspace has transcribed ${reached.used.toFixed(2)} hours this month, its cap of ${reached.cap} (set by an operator with verbatim workspaces hours-cap); new meetings and uploads can start on ${turn.toISOString().slice(0, 10)}`,
    { retryAfterSeconds: Math.max(1, Math.ceil((turn.getTime() - now.getTime()) / 1000)) },
  );
}

const MAX_TITLE = 300;
const MEETING = ref('Meeting');

/** Live chunks: standalone 16 kHz WAV, or consecutive pieces of one WebM (Opus) stream. */
const CHUNK_TYPES: Record<string, ChunkFormat | undefined> = {
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/webm': 'webm',
  'video/webm': 'webm',
};

/** What the meeting route groups share: the dependencies and the tenant-scoped readers of a meeting. */
interface MeetingRouteKit {
  deps: MeetingDeps;
  timings: ViewTimings;
  viewIn: (trx: Executor, m: MeetingRow) => ReturnType<typeof meetingViewIn>;
  viewOf: (m: MeetingRow) => ReturnType<typeof meetingViewIn>;
  getMeeting: (workspaceId: string, id: string) => Promise<MeetingRow>;
  viewById: (workspaceId: string, id: string) => ReturnType<typeof meetingViewIn>;
}

export function registerMeetingRoutes(app: FastifyInstance, api: ApiDeps): void {
  const kit = meetingRouteKit(api.deps);
  // Recordings arrive as raw bytes of any media type; the handler decides what it accepts (415).
  // S7: at the server's small limit; only the recording and chunk routes raise theirs.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => {
    done(null, body);
  });

  registerMeetingCreate(app, kit);
  registerMeetingAudio(app, kit);
  registerMeetingReads(app, kit);
  registerMeetingActions(app, kit);
  registerBatchRoutes(app, kit);
}

function meetingRouteKit(deps: MeetingDeps): MeetingRouteKit {
  const timings = viewTimings(deps);
  // S10: every meeting read here runs as the tenant (src/db/tenant.ts), so a read that forgot its
  // workspace filter finds nothing of another workspace; the writes stay on the system path.
  const viewIn = (trx: Executor, m: MeetingRow) => meetingViewIn(deps, trx, m);
  const viewOf = (m: MeetingRow) => withTenant(deps.db, m.workspace_id, (trx) => viewIn(trx, m));
  const getMeeting = (workspaceId: string, id: string) =>
    withTenant(deps.db, workspaceId, (trx) => deps.meetings.get(workspaceId, id, trx));
  const viewById = (workspaceId: string, id: string) =>
    readAsTenant(deps.db, workspaceId, async (trx) =>
      viewIn(trx, await deps.meetings.get(workspaceId, id, trx)),
    );

  return { deps, timings, viewIn, viewOf, getMeeting, viewById };
}

/** POST /v1/meetings: a new meeting, or the one an Idempotency-Key already made. */
function registerMeetingCreate(app: FastifyInstance, kit: MeetingRouteKit): void {
  const { deps, timings, viewOf } = kit;
  const schema: RouteSchema = {
    summary: 'Create a meeting',
    headers: {
      type: 'object',
      properties: {
        'idempotency-key': {
          type: 'string',
          minLength: 1,
          maxLength: 200,
          description:
            'send the same key again when an answer was lost: the meeting that key made is answered (200, header idempotent-replayed), never a second one; 409 meeting.idempotency_key_reused if the details differ; 410 meeting.deleted if that meeting was deleted since',
        },
      },
    },
    body: jsonBody({
      type: 'object',
      required: ['source'],
      properties: {
        source: { enum: ['upload', 'live'] },
        title: { type: 'string', maxLength: MAX_TITLE },
        language: { type: 'string', examples: ['en'] },
        batchId: { type: 'string', format: 'uuid', description: 'an upload batch (POST /v1/batches)' },
        visibility: {
          enum: ['private', 'workspace', 'shared'],
          description:
            'U4: who may read it: private (you, and the workspace’s admins and owners), workspace (every member; the default), or shared (you, admins, and the members you share it with)',
        },
        channels: {
          enum: ['speakers'],
          description:
            'B11, uploads only: each channel of a multichannel recording (a stereo call recording, a multitrack export) is a speaker; a voice that bleeds into another channel is transcribed once, where it dominates. Without it, or for a mono file, speakers are unknown',
        },
      },
    }),
    response: {
      201: json('Created', MEETING),
      200: json('The meeting an earlier create with this Idempotency-Key made', MEETING),
      ...ERRORS,
      409: refusal('meeting.idempotency_key_reused, or batch.canceled'),
      410: refusal('meeting.deleted: the meeting this Idempotency-Key made was deleted'),
      429: refusal(
        '`quota.hours_exceeded`: the workspace reached its monthly cap of transcribed hours, with Retry-After',
      ),
    },
  };
  app.post('/v1/meetings', { schema }, async (req, reply) => {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw invalid('request.body', 'send a JSON object: {"source": "upload", "title": "…"}');
    }
    const input = body as Record<string, unknown>;
    const source = input.source;
    if (source !== MeetingSource.upload && source !== MeetingSource.live) {
      throw invalid('meeting.source', 'source must be "upload" or "live"');
    }
    const title = input.title ?? 'Untitled meeting';
    if (typeof title !== 'string' || title.trim().length === 0 || title.length > MAX_TITLE) {
      throw invalid('meeting.title', `title must be a non-empty string of at most ${MAX_TITLE} characters`);
    }
    const language = input.language ?? null;
    if (
      language !== null &&
      (typeof language !== 'string' || !/^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$/.test(language))
    ) {
      throw invalid('meeting.language', 'language must be a language tag such as "en" or "en-US"');
    }
    const givenBatch = input.batchId ?? null;
    if (givenBatch !== null && typeof givenBatch !== 'string')
      throw invalid('meeting.batch_id', 'batchId must be a batch id string');
    // Stored lower-case: a repeat that spells the id in capitals is still the same create.
    const batchId = givenBatch?.toLowerCase() ?? null;
    const key = createKeyOf(req.headers['idempotency-key']);
    // A repeat is answered before the batch is looked at: its batch may have been canceled since
    // the first try made the meeting, and the client still needs to learn that meeting's id.
    const earlier = key !== null ? await deps.meetings.madeWithKey(workspaceOf(req), key) : undefined;
    if (!earlier) await refuseOverMonthlyCap(deps, workspaceOf(req));
    if (batchId !== null && !earlier) {
      if (source !== MeetingSource.upload)
        throw invalid('meeting.batch_id', 'only upload meetings belong to batches');
      const { batch } = await getBatch(deps, workspaceOf(req), batchId);
      if (batch.canceled_at) {
        throw new AppError(ErrorKind.conflict, 'batch.canceled', `batch ${batchId} was canceled`);
      }
    }
    const channels = (input.channels ?? null) as 'speakers' | null;
    if (channels !== null && channels !== 'speakers')
      throw invalid(
        'meeting.channels',
        'channels must be "speakers" (each channel of the upload is a speaker) or left out',
      );
    if (channels !== null && source !== MeetingSource.upload)
      throw invalid('meeting.channels', 'channels applies to uploads; a live meeting sends its tracks');
    const visibility = input.visibility ?? 'workspace';
    if (!isVisibility(visibility))
      throw invalid('meeting.visibility', 'visibility must be "private", "workspace" or "shared"');
    const fields = {
      source,
      title: title.trim(),
      language,
      windowMs: deps.config.windowMs,
      batchId,
      channels,
      ownerUserId: principalOf(req).userId,
      visibility,
    };
    if (key === null) {
      const meeting = await deps.meetings.create(workspaceOf(req), fields);
      return reply.status(201).send(meetingView(meeting, emptyCounts(), NO_LIVE_STATE, timings));
    }
    const { meeting, replayed } = earlier
      ? { meeting: earlier.meeting, replayed: true }
      : await deps.meetings.createWithKey(workspaceOf(req), key, fields);
    if (meeting === null) {
      throw new AppError(
        ErrorKind.gone,
        'meeting.deleted',
        `the meeting Idempotency-Key ${key} made was deleted; use a new key for a new meeting`,
      );
    }
    if (!replayed) return reply.status(201).send(meetingView(meeting, emptyCounts(), NO_LIVE_STATE, timings));
    if (
      meeting.source !== fields.source ||
      meeting.title !== fields.title ||
      meeting.language !== fields.language ||
      meeting.batch_id !== fields.batchId ||
      meeting.channels !== fields.channels
    ) {
      throw new AppError(
        ErrorKind.conflict,
        'meeting.idempotency_key_reused',
        `Idempotency-Key ${key} already made meeting ${meeting.id} with other details; use a new key for a new meeting`,
      );
    }
    // The meeting as it is now (a repeat may come after chunks were sent), marked as a replay.
    return reply
      .status(200)
      .header('idempotent-replayed', 'true')
      .send(await viewOf(meeting));
  });
}

/** Audio in: the whole recording (upload meetings), live chunks, and the end of a live meeting. */
function registerMeetingAudio(app: FastifyInstance, kit: MeetingRouteKit): void {
  const { deps, viewOf, getMeeting } = kit;
  // B10: a recording goes to storage as it arrives. Its route lives in a scope whose only parser
  // hands the request stream through untouched, so no whole-body buffer is ever made.
  void app.register((scope, _options, registered) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => {
      done(null, payload);
    });
    scope.put<{ Params: { id: string } }>(
      '/v1/meetings/:id/recording',
      {
        bodyLimit: deps.config.maxUploadBytes,
        config: STREAMED_UPLOAD_ROUTE,
        schema: {
          summary: 'Upload the recording of an upload meeting; answers 202 once stored and committed',
          description: `Raw audio bytes, at most ${deps.config.maxUploadBytes} bytes.`,
          params: ID_PARAMS,
          body: bytesBody(ACCEPTED_AUDIO_TYPES),
          response: {
            202: json('Accepted', MEETING),
            ...ERRORS,
            409: refusal('The meeting already has a recording or is not an upload meeting'),
            413: refusal('Too large, or `storage.quota_exceeded`'),
            415: refusal('Not an accepted audio type'),
            429: refusal(
              '`upload.too_many` (the workspace is uploading its most at once) or `quota.hours_exceeded` (its monthly cap), with Retry-After',
            ),
          },
        } satisfies RouteSchema,
      },
      async (req, reply) => {
        const workspaceId = workspaceOf(req);
        await getMeeting(workspaceId, req.params.id);
        const contentType = req.headers['content-type'];
        if (!isAcceptedAudioType(contentType)) {
          throw new AppError(
            ErrorKind.unsupportedMedia,
            'recording.unsupported_type',
            `Content-Type ${contentType ?? '(none)'} is not accepted; send one of: ${ACCEPTED_AUDIO_TYPES.join(', ')}`,
          );
        }
        const length = req.headers['content-length'];
        const declared = length === undefined ? null : Number(length);
        if (declared === 0 || req.body === undefined || req.body === null) {
          throw invalid('recording.empty', 'the recording is empty');
        }
        const tooLarge = () =>
          new AppError(
            ErrorKind.tooLarge,
            'request.too_large',
            `the request body is larger than this route's limit of ${formatBytes(deps.config.maxUploadBytes)}`,
          );
        if (declared !== null && declared > deps.config.maxUploadBytes) throw tooLarge();
        await refuseOverMonthlyCap(deps, workspaceId);
        const meeting = await storeRecording(
          deps,
          workspaceId,
          req.params.id,
          {
            stream: req.body as Readable,
            declaredBytes: declared,
            tooLarge,
            uploadsPerWorkspace: deps.config.requestLimits.uploadsPerWorkspace,
          },
          contentType ?? '',
        );
        return reply.status(202).send(await viewOf(meeting));
      },
    );
    registered();
  });

  app.put<{ Params: { id: string; seq: string }; Querystring: { track?: string; trackOffsetMs?: string } }>(
    '/v1/meetings/:id/chunks/:seq',
    { bodyLimit: deps.config.maxChunkBytes, config: UPLOAD_ROUTE, schema: CHUNK_SCHEMA },
    async (req, reply) => {
      const workspaceId = workspaceOf(req);
      await getMeeting(workspaceId, req.params.id);
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      const format = CHUNK_TYPES[contentType];
      if (!format) {
        throw new AppError(
          ErrorKind.unsupportedMedia,
          'chunk.unsupported_type',
          `Content-Type ${contentType || '(none)'} is not accepted for chunks; send audio/wav (16 kHz mono 16-bit) or audio/webm (one stream, chunk 0 first)`,
        );
      }
      const body = req.body;
      if (!Buffer.isBuffer(body) || body.length === 0) throw invalid('chunk.empty', 'the chunk is empty');
      // L25: a track's chunk goes to the track's own timeline; the answer shows the meeting.
      const track = chunkTrack(req.query);
      const target = await trackMeetingId(deps, workspaceId, req.params.id, track);
      const stored = await storeChunk(deps, workspaceId, target, req.params.seq, body, format);
      const meeting =
        target === req.params.id ? stored.meeting : await getMeeting(workspaceId, req.params.id);
      return reply.status(stored.created ? 201 : 200).send({
        seq: Number(req.params.seq),
        created: stored.created,
        meeting: await viewOf(meeting),
      });
    },
  );

  app.post<{ Params: { id: string } }>('/v1/meetings/:id/end', { schema: END_SCHEMA }, async (req, reply) => {
    const workspaceId = workspaceOf(req);
    const tracks = endTracksOf(req.body);
    const declared = declaredChunks(req.body);
    if ((await getMeeting(workspaceId, req.params.id)).parent_id !== null) {
      throw new AppError(ErrorKind.conflict, 'meeting.not_live', 'a track is ended by ending its meeting');
    }
    let meeting = await endMeeting(deps, workspaceId, req.params.id, declared);
    await endTracks(deps, workspaceId, req.params.id, tracks, (id, chunks) =>
      endMeeting(deps, workspaceId, id, chunks),
    );
    meeting = await getMeeting(workspaceId, req.params.id);
    return reply.status(202).send(await viewOf(meeting));
  });
}

const CHUNK_SCHEMA: RouteSchema = {
  summary:
    'Store one live chunk, in any order and at any time while the meeting exists (L19); idempotent on (meeting, seq)',
  description:
    'A chunk at the frontier is placed and the windows it fills are cut; one ahead of a missing chunk waits; one whose stretch the timeline already went past (or that comes after the close-out or after completion) is added by a repair that re-cuts and re-transcribes the windows it touches. See docs/live-meetings.md.',
  params: {
    type: 'object',
    required: ['id', 'seq'],
    properties: { id: { type: 'string', format: 'uuid' }, seq: { type: 'integer', minimum: 0 } },
  },
  querystring: {
    type: 'object',
    properties: {
      track: {
        type: 'string',
        pattern: '^[a-z][a-z0-9-]{0,31}$',
        description:
          'L25: the track this chunk belongs to: `mic` (the default) is the meeting’s own timeline; another name (`tab`: a browser tab’s or the screen’s audio) is a track with its own seqs, timeline, windows, repair and close-out, made by its first chunk. Each track is a speaker; the transcript interleaves them by time, and a word another track dominates (its echo) is shown once.',
      },
      trackOffsetMs: {
        type: 'integer',
        minimum: 0,
        description:
          'With `track`: where the track’s first sample falls on the meeting’s timeline (ms); the same for every chunk of the track',
      },
    },
  },
  body: bytesBody(Object.keys(CHUNK_TYPES)),
  response: {
    201: json('Stored; `meeting` is the meeting as it now stands', ChunkStoredSchema),
    200: json('The same chunk was already stored', ChunkStoredSchema),
    ...ERRORS,
    409: {
      ...refusal(
        '`chunk.conflict`: other bytes under this seq; `chunk.after_end`: seq at or past the count End declared; `chunk.too_far_ahead`: seq more than VERBATIM_MAX_SEQ_AHEAD above the highest stored (retryable, with Retry-After; nothing stored); `meeting.not_live`',
      ),
      headers: { 'Retry-After': { type: 'integer', description: 'with chunk.too_far_ahead' } },
    },
    410: refusal('`chunk.too_late`: the meeting ended more than VERBATIM_LATE_AUDIO_DAYS ago'),
    413: refusal('Too large, or `storage.quota_exceeded`'),
    415: refusal(
      'Not a 16 kHz mono 16-bit WAV, a WebM chunk 0 without the stream header, or a format other than the meeting’s',
    ),
  },
};

const END_SCHEMA: RouteSchema = {
  summary: 'End a live meeting: finalizing now, close-out after the grace period',
  description:
    'L20: with `{"chunks": N}`, seqs 0…N−1 are expected; a missing one is still taken later and repaired, any seq ≥ N is refused. When all N are stored the close-out starts at once (L24). Without a body the count is the highest stored seq + 1 at the close-out, and no chunk is refused for coming after End. Ending an ended meeting changes nothing.',
  params: ID_PARAMS,
  body: jsonBody(
    {
      type: 'object',
      properties: {
        chunks: { type: 'integer', minimum: 0 },
        tracks: {
          type: 'object',
          description:
            'L25: each other track’s count and start, e.g. `{"tab": {"chunks": 12, "offsetMs": 0}}`. End ends every track; a track named here that no chunk made yet is made.',
          additionalProperties: {
            type: 'object',
            properties: {
              chunks: { type: 'integer', minimum: 0 },
              offsetMs: { type: 'integer', minimum: 0 },
            },
          },
        },
      },
    },
    false,
  ),
  response: {
    202: json('Accepted', MEETING),
    ...ERRORS,
    409: refusal(
      '`end.chunks_below_stored`: a chunk at or past N is already stored; `end.chunks_conflict`: ended before with another count',
    ),
  },
};

/** Reads: one meeting, its transcript, the list. */
function registerMeetingReads(app: FastifyInstance, kit: MeetingRouteKit): void {
  const { deps, viewIn, viewById } = kit;
  app.get<{ Params: { id: string } }>(
    '/v1/meetings/:id',
    {
      schema: {
        summary: 'Meeting status, window counts, minutes and failure reason',
        params: ID_PARAMS,
        response: { 200: json('The meeting', MEETING), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => viewById(workspaceOf(req), req.params.id),
  );

  app.get<{ Params: { id: string }; Querystring: { format?: string } }>(
    '/v1/meetings/:id/transcript',
    { schema: TRANSCRIPT_SCHEMA },
    async (req, reply) => {
      const workspaceId = workspaceOf(req);
      const { meeting, segments } = await withTenant(deps.db, workspaceId, async (trx) => {
        const m = await deps.meetings.get(workspaceId, req.params.id, trx);
        return { meeting: m, segments: await transcriptLines(trx, m.id) };
      });
      const format = req.query.format ?? 'json';
      switch (format) {
        case 'json':
          return {
            meetingId: meeting.id,
            complete: meeting.transcript_completed_at !== null,
            revision: meeting.transcript_revision,
            segments: segments.map((s) => ({
              startMs: s.startMs,
              endMs: s.endMs,
              text: s.text,
              speaker: s.speaker,
              speakerAttribution: s.attribution,
              rawText: s.rawText,
              formatted: s.formatted,
              correctionId: s.correctionId,
              review: s.review,
            })),
          };
        case 'txt':
          return reply.type('text/plain; charset=utf-8').send(formatTranscript(segments, 'txt'));
        case 'vtt':
          return reply.type('text/vtt; charset=utf-8').send(formatTranscript(segments, 'vtt'));
        case 'srt':
          return reply.type('application/x-subrip; charset=utf-8').send(formatTranscript(segments, 'srt'));
        case 'md':
          return reply
            .type('text/markdown; charset=utf-8')
            .send(formatTranscript(segments, 'md', meeting.title));
        case 'docx':
          return reply
            .type(DOCX_TYPE)
            .header('content-disposition', `attachment; filename="${downloadName(meeting.title)}.docx"`)
            .send(
              await meetingDocx({
                title: meeting.title,
                segments,
                minutes: meeting.minutes as Minutes | null,
              }),
            );
        default:
          throw invalid('transcript.format', `format must be one of ${TRANSCRIPT_FORMATS.join(', ')}`);
      }
    },
  );

  app.get<{ Querystring: { status?: string; limit?: string; cursor?: string; q?: string } }>(
    '/v1/meetings',
    { schema: LIST_SCHEMA },
    async (req) => {
      const { status, limit: limitText, cursor, q } = req.query;
      if (q !== undefined && (typeof q !== 'string' || q.length > MAX_TITLE)) {
        throw invalid('list.q', `q must be a string of at most ${MAX_TITLE} characters`);
      }
      if (status !== undefined && !(Object.values(MeetingStatus) as string[]).includes(status)) {
        throw invalid('list.status', `status must be one of ${Object.values(MeetingStatus).join(', ')}`);
      }
      const limit = limitText === undefined ? 50 : Number(limitText);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200)
        throw invalid('list.limit', 'limit must be 1 to 200');
      const before = cursor === undefined ? undefined : decodeCursor(cursor);
      const workspaceId = workspaceOf(req);
      return withTenant(deps.db, workspaceId, async (trx) => {
        const rows = await deps.meetings.list(
          workspaceId,
          {
            status: status as MeetingStatus | undefined,
            limit,
            before,
            titleContains: q?.trim() || undefined,
          },
          trx,
        );
        const last = rows.length === limit ? rows[rows.length - 1] : undefined;
        // One connection: the views are read one after another, in the same tenant transaction.
        const meetings = [];
        for (const m of rows) meetings.push(await viewIn(trx, m));
        const previews = Object.fromEntries(
          (
            await previewsOf(
              trx,
              rows.map((m) => m.id),
            )
          ).map((p) => [p.meetingId, { text: previewText(p.lines, p.corrections), speakers: p.speakers }]),
        );
        return { meetings, nextCursor: last ? encodeCursor(last) : null, previews };
      });
    },
  );
}

const TRANSCRIPT_FORMATS = ['json', 'txt', 'vtt', 'srt', 'md', 'docx'] as const;
const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/** A title as a file name: letters, digits, spaces, dots and dashes. */
function downloadName(title: string): string {
  return (
    title
      .replace(/[^\p{L}\p{N} ._-]+/gu, '_')
      .trim()
      .slice(0, 100) || 'meeting'
  );
}

const TRANSCRIPT_SCHEMA: RouteSchema = {
  summary:
    'Transcript segments with their speakers (W1, W5); JSON carries `revision` (L19). `md` and `docx` group the transcript by speaker; `docx` includes the minutes',
  params: ID_PARAMS,
  querystring: {
    type: 'object',
    properties: { format: { enum: [...TRANSCRIPT_FORMATS], default: 'json' } },
  },
  response: {
    200: {
      description: 'Segments (JSON) or a text rendering',
      content: {
        'application/json': { schema: TranscriptSchema },
        'text/plain': { schema: { type: 'string' } },
        'text/vtt': { schema: { type: 'string' } },
        'application/x-subrip': { schema: { type: 'string' } },
        'text/markdown': { schema: { type: 'string' } },
        [DOCX_TYPE]: { schema: { type: 'string', format: 'binary' } },
      },
    },
    ...ERRORS,
  },
};

const LIST_SCHEMA: RouteSchema = {
  summary: 'List meetings, newest first',
  querystring: {
    type: 'object',
    properties: {
      status: { enum: Object.values(MeetingStatus) },
      limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
      cursor: { type: 'string', description: 'nextCursor of the page before' },
      q: { type: 'string', maxLength: MAX_TITLE, description: 'case-insensitive part of the title' },
    },
  },
  response: { 200: json('{meetings, nextCursor}', MeetingListSchema), ...ERRORS },
};

/** Operator actions on one meeting: new minutes, delete, resubmit. */
function registerMeetingActions(app: FastifyInstance, kit: MeetingRouteKit): void {
  const { deps, viewById } = kit;
  const action = (summary: string, response: RouteSchema['response']): { schema: RouteSchema } => ({
    schema: { summary, params: ID_PARAMS, response },
  });
  const minutes = action('Regenerate the minutes from the transcript', {
    202: json('Accepted: the meeting, its minutes being written', MEETING),
    ...ERRORS,
    409: refusal('No finished transcript yet'),
  });
  app.post<{ Params: { id: string } }>('/v1/meetings/:id/minutes', minutes, async (req, reply) => {
    await regenerateMinutes(deps, workspaceOf(req), req.params.id);
    return reply.status(202).send(await viewById(workspaceOf(req), req.params.id));
  });

  const remove = action(
    'Delete a meeting and everything of it in one transaction; its audio goes through the cleanup outbox',
    {
      204: empty('Deleted'),
      ...ERRORS,
      409: refusal(
        '`meeting.is_track`: the meeting is a track of another (L25); it is deleted with that meeting',
      ),
    },
  );
  app.delete<{ Params: { id: string } }>('/v1/meetings/:id', remove, async (req, reply) => {
    await deleteMeeting(deps, workspaceOf(req), req.params.id);
    return reply.status(204).send();
  });

  const rename: { schema: RouteSchema } = {
    schema: {
      summary: 'E3: rename a meeting',
      params: ID_PARAMS,
      body: jsonBody({
        type: 'object',
        required: ['title'],
        properties: { title: { type: 'string', minLength: 1, maxLength: MAX_TITLE } },
      }),
      response: { 200: json('The meeting as renamed', MEETING), ...ERRORS },
    },
  };
  app.patch<{ Params: { id: string }; Body: unknown }>('/v1/meetings/:id', rename, async (req) => {
    const title = (req.body as { title?: unknown } | null)?.title;
    if (typeof title !== 'string' || title.trim() === '' || title.length > MAX_TITLE)
      throw invalid('meeting.title', `title must be a non-empty string of at most ${MAX_TITLE} characters`);
    await renameMeeting(deps, workspaceOf(req), req.params.id, title.replace(/\s+/g, ' ').trim());
    return viewById(workspaceOf(req), req.params.id);
  });

  const correct: { schema: RouteSchema } = {
    schema: {
      summary:
        'E3: correct one line of the transcript: the line starting at `startMs` whose recogniser’s words are `rawText` (as read). A new transcript revision, an audit row and `meeting.transcript_revised`; search, exports and minutes read the correction, and a late-audio repair keeps it where it finds the same words',
      params: ID_PARAMS,
      body: jsonBody({
        type: 'object',
        required: ['startMs', 'rawText', 'text'],
        properties: {
          startMs: { type: 'integer', minimum: 0 },
          rawText: { type: 'string', description: 'the line’s `rawText` as the transcript gave it' },
          text: { type: 'string', minLength: 1, maxLength: MAX_CORRECTION_LENGTH },
        },
      }),
      response: {
        200: json('The line as corrected', SegmentSchema),
        ...ERRORS,
        409: refusal(
          '`transcript.changed`: the line is no longer as it was read (late audio re-cut it): reload',
        ),
      },
    },
  };
  app.post<{ Params: { id: string }; Body: unknown }>(
    '/v1/meetings/:id/corrections',
    correct,
    async (req) => {
      const body = (req.body ?? {}) as { startMs?: unknown; rawText?: unknown; text?: unknown };
      if (typeof body.startMs !== 'number' || !Number.isInteger(body.startMs) || body.startMs < 0)
        throw invalid('correction.start_ms', 'startMs must be the line’s startMs, an integer ≥ 0');
      if (typeof body.rawText !== 'string')
        throw invalid('correction.raw_text', 'rawText must be the line’s rawText as the transcript gave it');
      if (typeof body.text !== 'string')
        throw invalid('correction.text', 'text must be the corrected words of the line');
      const line = await correctLine(
        deps,
        workspaceOf(req),
        req.params.id,
        { startMs: body.startMs, rawText: body.rawText, text: body.text },
        authorOf(principalOf(req)),
      );
      return {
        startMs: line.startMs,
        endMs: line.endMs,
        text: line.text,
        speaker: line.speaker,
        speakerAttribution: line.attribution,
        rawText: line.rawText,
        formatted: line.formatted,
        correctionId: line.correctionId,
        review: line.review,
      };
    },
  );

  const uncorrect: { schema: RouteSchema } = {
    schema: {
      summary:
        'E3: take a correction back (or dismiss one that needs a look): the recogniser’s words read again; a new transcript revision',
      params: {
        type: 'object',
        required: ['id', 'correctionId'],
        properties: {
          id: { type: 'string', format: 'uuid' },
          correctionId: { type: 'string', format: 'uuid' },
        },
      },
      response: { 204: empty('Removed'), ...ERRORS },
    },
  };
  app.delete<{ Params: { id: string; correctionId: string } }>(
    '/v1/meetings/:id/corrections/:correctionId',
    uncorrect,
    async (req, reply) => {
      if (!isUuid(req.params.correctionId))
        throw new AppError(ErrorKind.notFound, 'correction.not_found', 'no such correction in this meeting');
      await removeCorrection(
        deps,
        workspaceOf(req),
        req.params.id,
        req.params.correctionId,
        authorOf(principalOf(req)),
      );
      return reply.status(204).send();
    },
  );

  const resubmit = action(
    'A new request for the meeting’s unfinished work: active jobs superseded (history kept), remaining work created',
    {
      202: json('Resubmitted: counts of superseded and created jobs, and the meeting', ResubmitSchema),
      ...ERRORS,
      409: refusal('The meeting ended and its audio was deleted, or it has not started'),
    },
  );
  app.post<{ Params: { id: string } }>('/v1/meetings/:id/resubmit', resubmit, async (req, reply) => {
    const result = await resubmitMeeting(deps, workspaceOf(req), req.params.id);
    return reply.status(202).send({ ...result, meeting: await viewById(workspaceOf(req), req.params.id) });
  });
}

/** Upload batches: create, read, cancel. */
function registerBatchRoutes(app: FastifyInstance, kit: MeetingRouteKit): void {
  const { deps } = kit;
  const create: RouteSchema = {
    summary: 'Create an upload batch; create meetings with "batchId" to put them in it',
    body: jsonBody(
      { type: 'object', properties: { title: { type: 'string', maxLength: MAX_TITLE } } },
      false,
    ),
    response: { 201: json('The batch', BatchSchema), ...ERRORS },
  };
  app.post('/v1/batches', { schema: create }, async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const title = body.title ?? 'Upload batch';
    if (typeof title !== 'string' || title.trim().length === 0 || title.length > MAX_TITLE) {
      throw invalid('batch.title', `title must be a non-empty string of at most ${MAX_TITLE} characters`);
    }
    const batch = await createBatch(deps, workspaceOf(req), title.trim(), principalOf(req).userId);
    return reply.status(201).send(batchView(batch, []));
  });

  const read: RouteSchema = {
    summary: 'A batch and the status of its meetings',
    params: ID_PARAMS,
    response: { 200: json('The batch', BatchSchema), ...ERRORS },
  };
  app.get<{ Params: { id: string } }>('/v1/batches/:id', { schema: read }, async (req) => {
    const { batch, meetings } = await getBatch(deps, workspaceOf(req), req.params.id);
    return batchView(batch, meetings);
  });

  const cancel: RouteSchema = {
    summary:
      'Cancel a batch: its jobs canceled and running attempts closed at once, its meetings failed as canceled, then their audio deleted',
    params: ID_PARAMS,
    response: { 202: json('The canceled batch', BatchSchema), ...ERRORS },
  };
  app.post<{ Params: { id: string } }>('/v1/batches/:id/cancel', { schema: cancel }, async (req, reply) => {
    const { batch, meetings } = await cancelBatch(deps, workspaceOf(req), req.params.id);
    return reply.status(202).send(batchView(batch, meetings));
  });
}

/** L20: End's optional body, `{"chunks": N}`: the number of chunks the client recorded. */
function declaredChunks(body: unknown): number | null {
  if (body === undefined || body === null || (Buffer.isBuffer(body) && body.length === 0)) return null;
  if (typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) {
    throw invalid('end.body', 'send no body, or a JSON object such as {"chunks": 29}');
  }
  const chunks = (body as Record<string, unknown>).chunks;
  if (chunks === undefined || chunks === null) return null;
  if (typeof chunks !== 'number' || !Number.isInteger(chunks) || chunks < 0 || chunks > MAX_SEQ + 1) {
    throw invalid(
      'end.chunks',
      `chunks must be the number of chunks recorded, a whole number from 0 to ${MAX_SEQ + 1}`,
    );
  }
  return chunks;
}

/** The create's Idempotency-Key: absent → null; 1–200 visible ASCII characters, else 400. */
function createKeyOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !/^[\x21-\x7e]{1,200}$/.test(header)) {
    throw invalid(
      'request.idempotency_key',
      'Idempotency-Key must be one value of 1 to 200 visible ASCII characters (a UUID, say)',
    );
  }
  return header;
}

/** E1: a meeting's first words as a line of the list, formatted as its transcript reads. */
/** E1/E3: the first lines as the transcript reads them: formatted, with their corrections. */
function previewText(
  lines: Array<{ startMs: number; endMs: number; text: string }>,
  corrections: Correction[],
): string {
  const text = applyCorrections(formatSegments(lines), corrections)
    .map((l) => l.text.trim())
    .join(' ');
  return text.length > 160 ? `${text.slice(0, 159).replace(/\s+\S*$/, '')}…` : text;
}

/** Who made a change, for the rows that keep it (no secret: ids only). */
function authorOf(principal: ReturnType<typeof principalOf>): string {
  return principal.via === 'session' ? `person:${principal.userId}` : `key:${principal.keyId}`;
}

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}

function emptyCounts(): WindowCounts {
  return { total: 0, transcribed: 0, inFlight: 0, held: 0, exhausted: 0, exhaustedAudioKept: 0, missing: 0 };
}

function encodeCursor(m: MeetingRow): string {
  return Buffer.from(JSON.stringify([m.created_at.toISOString(), m.id])).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [string, string];
    const createdAt = new Date(at);
    if (Number.isNaN(createdAt.getTime()) || typeof id !== 'string') throw new Error('bad cursor');
    return { createdAt, id };
  } catch {
    throw invalid('list.cursor', 'cursor is not one this API returned');
  }
}

/** The public shape of a meeting. Never includes job internals, tokens or storage keys. */
/** A meeting as the API shows it, read in the caller's transaction (GET /v1/meetings/{id}, L23 streams). */
export async function meetingViewIn(deps: MeetingDeps, trx: Executor, m: MeetingRow) {
  return meetingView(
    m,
    await deps.meetings.windowCounts(m.id, trx),
    await liveState(trx, m),
    viewTimings(deps),
    m.source === MeetingSource.live && m.parent_id === null ? await tracksOf(trx, m.id) : [],
  );
}

/** The settings a meeting's view reads: the close-out's grace (L3), how long held audio is kept (J20). */
export interface ViewTimings {
  graceMs: number;
  heldAudioMs: number;
}

export function viewTimings(deps: { config: { closeoutGraceMs: number; heldAudioMs: number } }): ViewTimings {
  return { graceMs: deps.config.closeoutGraceMs, heldAudioMs: deps.config.heldAudioMs };
}

export function meetingView(
  m: MeetingRow,
  counts: WindowCounts,
  live: LiveState,
  timings: ViewTimings,
  tracks: TrackRow[] = [],
) {
  const windows = {
    total: counts.total,
    done: counts.transcribed,
    inFlight: counts.inFlight,
    held: counts.held,
    exhausted: counts.exhausted,
    missing: counts.missing,
  };
  const endedAt = m.completed_at ?? m.failed_at;
  const heldMessage = heldStretchesMessage(
    counts.held,
    counts.exhaustedAudioKept,
    endedAt ? new Date(endedAt.getTime() + timings.heldAudioMs) : null,
  );
  const repairFailure = m.repair_failure_code
    ? {
        code: m.repair_failure_code,
        message: m.repair_failure_message,
        plain: plainReason(m.repair_failure_code, m.repair_failure_message),
      }
    : null;
  return {
    id: m.id,
    title: m.title,
    ownerUserId: m.owner_user_id,
    visibility: m.visibility,
    source: m.source,
    language: m.language,
    channels: m.channels,
    status: m.status,
    durationMs: m.duration_ms,
    tracks: tracks.map((t) => ({ track: t.track, meetingId: t.id, offsetMs: t.offsetMs, status: t.status })),
    windows,
    // L17: the close-out step a finalizing meeting is in, for the Finalizing screen.
    progress: meetingProgress(
      {
        status: m.status,
        source: m.source,
        finalizingAt: m.finalizing_at,
        transcriptCompletedAt: m.transcript_completed_at,
        minutesStatus: m.minutes_status,
        windows,
      },
      new Date(),
      timings.graceMs,
    ),
    transcriptComplete: m.transcript_completed_at !== null,
    // L19: how many times the published transcript changed since (late audio spliced in).
    revision: m.transcript_revision,
    minutes: {
      status: m.minutes_status,
      reason: m.minutes_code
        ? {
            code: m.minutes_code,
            message: m.minutes_message,
            plain: plainReason(m.minutes_code, m.minutes_message),
          }
        : null,
      content: m.minutes,
      writtenAt: m.minutes_written_at,
      // The transcript revision the minutes describe; stale once the transcript moved on.
      revision: m.minutes_revision,
      stale: m.minutes !== null && (m.minutes_revision ?? 0) < m.transcript_revision,
    },
    failure: m.failure_code
      ? {
          code: m.failure_code,
          message: m.failure_message,
          plain: plainReason(m.failure_code, m.failure_message),
        }
      : null,
    declaredChunks: m.declared_chunks,
    missingChunks: live.missing.seqs,
    missingChunkCount: live.missing.count,
    lateAudio: {
      waitingChunks: live.waiting,
      lateChunks: live.late,
      repairing: live.repairing,
      lastRepairAt: m.last_repair_at,
      failure: repairFailure,
      message: lateAudioMessage(m, live, repairFailure?.plain ?? null),
    },
    // L22: draft captions skipped because the drafts queue had fallen behind real time.
    drafts: { shed: m.drafts_shed },
    // J20: stretches with no transcript whose audio is held (the gap a completed meeting shows).
    heldAudio: heldMessage
      ? {
          awaiting: counts.held,
          failed: counts.exhaustedAudioKept,
          keptUntil: endedAt ? new Date(endedAt.getTime() + timings.heldAudioMs) : null,
          message: heldMessage,
        }
      : null,
    audioDeletedAt: m.audio_deleted_at,
    playback: m.playback_until && m.playback_until > new Date() ? { until: m.playback_until } : null,
    untranscribedWhenAudioDeleted:
      m.audio_deleted_at && m.untranscribed_exhausted !== null
        ? { inFlight: m.untranscribed_in_flight, exhausted: m.untranscribed_exhausted }
        : null,
    createdAt: m.created_at,
    processingAt: m.processing_at,
    finalizingAt: m.finalizing_at,
    completedAt: m.completed_at,
    failedAt: m.failed_at,
  };
}

/** L19 in plain words: audio waiting, being added, added, or that could not be added. */
function lateAudioMessage(m: MeetingRow, live: LiveState, failure: string | null): string | null {
  const n = (k: number, one: string, many: string) => `${k} ${k === 1 ? one : many}`;
  if (live.late > 0 && failure && !live.repairing) {
    return `${n(live.late, 'late chunk', 'late chunks')} could not be added to the transcript yet. ${failure}`;
  }
  if (live.late > 0) {
    return `${n(live.late, 'chunk', 'chunks')} of audio arrived late; adding ${live.late === 1 ? 'it' : 'them'} to the transcript.`;
  }
  if (live.repairing) return 'Adding audio that arrived late to the transcript.';
  if (live.waiting > 0) {
    const first = m.next_seq;
    return `${n(live.waiting, 'later chunk is', 'later chunks are')} stored and waiting for chunk ${first}; the transcript goes on without it if it does not come soon, and takes it in when it does.`;
  }
  if (m.transcript_revision > 0) {
    return `The transcript was revised ${n(m.transcript_revision, 'time', 'times')} since it was published: audio that arrived late, words transcribed after it, or who said what.`;
  }
  return null;
}

function batchView(
  batch: { id: string; title: string; created_at: Date; canceled_at: Date | null },
  meetings: Array<{ id: string; title: string; status: string; failure_code: string | null }>,
) {
  return {
    id: batch.id,
    title: batch.title,
    createdAt: batch.created_at,
    canceledAt: batch.canceled_at,
    meetings: meetings.map((m) => ({
      id: m.id,
      title: m.title,
      status: m.status,
      failureCode: m.failure_code,
    })),
  };
}
