import { BotRecordingStatus, MeetingSource, MeetingStatus } from '../domain/status.ts';
import { WEBHOOK_EVENTS } from '../events/webhooks.ts';
import { ACCEPTED_AUDIO_TYPES } from '../meetings/intake.ts';
import { MeetingSchema } from './schemas.ts';

const error = { $ref: '#/components/schemas/Error' };
const meeting = { $ref: '#/components/schemas/Meeting' };
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } };
const queryParam = (name: string, description: string) => ({
  name,
  in: 'query',
  description,
  schema: { type: 'string' },
});
const errors = {
  '400': { description: 'Invalid input', content: { 'application/json': { schema: error } } },
  '401': { description: 'Missing or invalid API key', content: { 'application/json': { schema: error } } },
  '404': {
    description: 'No such meeting in this workspace',
    content: { 'application/json': { schema: error } },
  },
};

/** The API's contract, served at GET /openapi.json. */
export function openApiDocument(maxUploadBytes: number) {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Verbatim',
      version: '0.1.0',
      description: 'Meeting capture and transcription that never loses a word.',
    },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key from `verbatim keys create` or POST /v1/api-keys',
        },
        metricsToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'the operator’s VERBATIM_METRICS_TOKEN (only for /metrics)',
        },
      },
      schemas: {
        BotRecording: {
          type: 'object',
          properties: {
            id: { type: 'string', format: 'uuid' },
            title: { type: 'string' },
            meetingUrl: { type: 'string' },
            joinAt: { type: 'string', format: 'date-time' },
            endsAt: { type: 'string', format: 'date-time' },
            status: {
              enum: Object.values(BotRecordingStatus),
              description:
                'R7/R9: pending (no bot yet) → scheduled → joining → in_call → recording → processing (the import) → complete; or failed, canceled, not_recorded',
            },
            botId: { type: ['string', 'null'] },
            failure: {
              type: ['object', 'null'],
              properties: { code: { type: 'string' }, message: { type: ['string', 'null'] } },
            },
            meetingId: { type: ['string', 'null'], format: 'uuid' },
            lastError: { type: ['string', 'null'] },
          },
        },
        Error: {
          type: 'object',
          properties: {
            error: {
              type: 'object',
              properties: { kind: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' } },
            },
          },
        },
        // One declaration of the shape: the TypeBox schema the web app takes its type from.
        Meeting: MeetingSchema,
      },
    },
    security: [{ bearer: [] }],
    paths: {
      '/v1/meetings': {
        post: {
          summary: 'Create a meeting',
          parameters: [
            {
              name: 'Idempotency-Key',
              in: 'header',
              description:
                'send the same key again when an answer was lost: the meeting that key made is answered (200, header idempotent-replayed), never a second one; 409 meeting.idempotency_key_reused if the details differ; 410 meeting.deleted if that meeting was deleted since',
              schema: { type: 'string', minLength: 1, maxLength: 200 },
            },
          ],
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['source'],
                  properties: {
                    source: { enum: ['upload', 'live'] },
                    title: { type: 'string', maxLength: 300 },
                    language: { type: 'string', example: 'en' },
                  },
                },
              },
            },
          },
          responses: {
            '201': { description: 'Created', content: { 'application/json': { schema: meeting } } },
            '200': {
              description: 'The meeting an earlier create with this Idempotency-Key made',
              content: { 'application/json': { schema: meeting } },
            },
            ...errors,
          },
        },
        get: {
          summary: 'List meetings, newest first',
          parameters: [
            { name: 'status', in: 'query', schema: { type: 'string' } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' } },
            {
              name: 'q',
              in: 'query',
              description: 'case-insensitive part of the title',
              schema: { type: 'string', maxLength: 300 },
            },
          ],
          responses: { '200': { description: '{meetings, nextCursor}' }, ...errors },
        },
      },
      '/v1/meetings/{id}': {
        delete: {
          summary:
            'Delete a meeting and everything of it in one transaction; its audio goes through the cleanup outbox',
          parameters: [idParam],
          responses: { '204': { description: 'Deleted' }, ...errors },
        },
        get: {
          summary: 'Meeting status, window counts, minutes and failure reason',
          parameters: [idParam],
          responses: {
            '200': { description: 'The meeting', content: { 'application/json': { schema: meeting } } },
            ...errors,
          },
        },
      },
      '/v1/meetings/{id}/recording': {
        put: {
          summary: 'Upload the recording of an upload meeting; answers 202 once stored and committed',
          parameters: [idParam],
          requestBody: {
            description: `Raw audio bytes, at most ${maxUploadBytes} bytes`,
            content: Object.fromEntries(
              ACCEPTED_AUDIO_TYPES.map((t) => [t, { schema: { type: 'string', format: 'binary' } }]),
            ),
          },
          responses: {
            '202': { description: 'Accepted', content: { 'application/json': { schema: meeting } } },
            '409': { description: 'The meeting already has a recording or is not an upload meeting' },
            '413': { description: 'Too large' },
            '415': { description: 'Not an accepted audio type' },
            ...errors,
          },
        },
      },
      '/v1/meetings/{id}/chunks/{seq}': {
        put: {
          summary:
            'Store one live chunk, in any order and at any time while the meeting exists (L19); idempotent on (meeting, seq)',
          description:
            'A chunk at the frontier is placed and the windows it fills are cut; one ahead of a missing chunk waits; one whose stretch the timeline already went past (or that comes after the close-out or after completion) is added by a repair that re-cuts and re-transcribes the windows it touches. See docs/live-meetings.md.',
          parameters: [
            idParam,
            { name: 'seq', in: 'path', required: true, schema: { type: 'integer', minimum: 0 } },
          ],
          requestBody: {
            content: {
              'audio/wav': { schema: { type: 'string', format: 'binary' } },
              'audio/webm': { schema: { type: 'string', format: 'binary' } },
            },
          },
          responses: {
            '201': { description: 'Stored; `meeting` is the meeting as it now stands' },
            '200': { description: 'The same chunk was already stored' },
            '409': {
              description:
                '`chunk.conflict`: other bytes under this seq; `chunk.after_end`: seq at or past the count End declared; `chunk.too_far_ahead`: seq more than VERBATIM_MAX_SEQ_AHEAD above the highest stored (retryable, with Retry-After; nothing stored); `meeting.not_live`',
              headers: {
                'Retry-After': { schema: { type: 'integer' }, description: 'with chunk.too_far_ahead' },
              },
            },
            '410': {
              description: '`chunk.too_late`: the meeting ended more than VERBATIM_LATE_AUDIO_DAYS ago',
            },
            '413': { description: 'Too large, or `storage.quota_exceeded`' },
            '415': {
              description:
                'Not a 16 kHz mono 16-bit WAV, a WebM chunk 0 without the stream header, or a format other than the meeting’s',
            },
            ...errors,
          },
        },
      },
      '/v1/meetings/{id}/end': {
        post: {
          summary: 'End a live meeting: finalizing now, close-out after the grace period',
          description:
            'L20: with `{"chunks": N}`, seqs 0…N−1 are expected; a missing one is still taken later and repaired, any seq ≥ N is refused. When all N are stored the close-out starts at once (L24). Without a body the count is the highest stored seq + 1 at the close-out, and no chunk is refused for coming after End. Ending an ended meeting changes nothing.',
          parameters: [idParam],
          requestBody: {
            required: false,
            content: {
              'application/json': {
                schema: { type: 'object', properties: { chunks: { type: 'integer', minimum: 0 } } },
              },
            },
          },
          responses: {
            '202': { description: 'Accepted', content: { 'application/json': { schema: meeting } } },
            '409': {
              description:
                '`end.chunks_below_stored`: a chunk at or past N is already stored; `end.chunks_conflict`: ended before with another count',
            },
            ...errors,
          },
        },
      },
      '/v1/meetings/{id}/transcript': {
        get: {
          summary: 'Transcript segments; JSON carries `revision` (L19)',
          parameters: [
            idParam,
            { name: 'format', in: 'query', schema: { enum: ['json', 'txt', 'vtt', 'srt'] } },
          ],
          responses: { '200': { description: 'Segments (JSON) or a text rendering' }, ...errors },
        },
      },
      '/v1/search': {
        get: {
          summary:
            'O4: search what was said, across the workspace’s transcripts and minutes. `q` takes web search syntax: words (all must match), "quoted phrases", `or`, `-word`. English meetings are stemmed ("contracts" finds "contract"); meetings in other languages match word for word. Results are meetings, best first, each with its best hits: the segment’s start time (null for a line of the minutes), the plain `snippet`, the `highlights` as [start, end) offsets into it, and `snippetHtml` (escaped, matches in <mark>).',
          parameters: [
            {
              name: 'q',
              in: 'query',
              required: true,
              schema: { type: 'string', minLength: 1, maxLength: 500 },
            },
            { name: 'from', in: 'query', schema: { type: 'string', format: 'date-time' } },
            { name: 'to', in: 'query', schema: { type: 'string', format: 'date-time' } },
            { name: 'source', in: 'query', schema: { enum: Object.values(MeetingSource) } },
            { name: 'status', in: 'query', schema: { enum: Object.values(MeetingStatus) } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 50, default: 20 } },
            {
              name: 'cursor',
              in: 'query',
              schema: { type: 'string' },
              description: 'nextCursor of the page before',
            },
          ],
          responses: {
            '200': { description: '{ query, results: [{ meeting, score, hitCount, hits }], nextCursor }' },
            ...errors,
            '400': {
              description:
                'search.query, search.limit, search.cursor, search.from, search.to, search.source or search.status',
            },
          },
        },
      },
      '/v1/ask': {
        post: {
          summary:
            'O5: a question answered from the workspace’s meetings. The best passages (search hits widened with the transcript around them) are given to the chat model, whose answer cites them as [n]; `citations` are the passages it cited, never one it was not given. With no model configured, or the model out or over its quota, `mode` is `passages`: the answer is the passages themselves, and `note` says why in plain words.',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['question'],
                  properties: { question: { type: 'string', minLength: 1, maxLength: 1000 } },
                },
              },
            },
          },
          responses: {
            '200': {
              description: '{ question, mode: model|passages, answer, note, model, citations, passages }',
            },
            ...errors,
            '400': { description: 'ask.question' },
          },
        },
      },
      '/v1/meetings/{id}/events': {
        get: {
          summary:
            'L22/L23: the meeting live, as Server-Sent Events: `draft` (a chunk’s provisional words), `window` (a window’s final words, or `superseded`: drop them), `meeting` (the meeting as GET shows it, closing every batch), `deleted`. Event ids are positions in the meeting’s stream: reconnect with `Last-Event-ID` (or `?lastEventId=`) to get exactly what came after; without one the whole meeting so far comes first. A comment line every 15 s keeps the connection alive.',
          parameters: [
            idParam,
            { name: 'Last-Event-ID', in: 'header', schema: { type: 'string', pattern: '^[0-9]+$' } },
            { name: 'lastEventId', in: 'query', schema: { type: 'string', pattern: '^[0-9]+$' } },
          ],
          responses: {
            ...errors,
            '200': { description: 'text/event-stream', content: { 'text/event-stream': {} } },
            '400': { description: 'Last-Event-ID is not an id this stream sent (stream.bad_last_event_id)' },
          },
        },
      },
      '/v1/meetings/{id}/minutes': {
        post: {
          summary: 'Regenerate the minutes from the transcript',
          parameters: [idParam],
          responses: {
            '202': { description: 'Accepted' },
            '409': { description: 'No finished transcript yet' },
            ...errors,
          },
        },
      },
      '/v1/meetings/{id}/resubmit': {
        post: {
          summary:
            'A new request for the meeting’s unfinished work: active jobs superseded (history kept), remaining work created',
          parameters: [idParam],
          responses: {
            '202': { description: 'Resubmitted: counts of superseded and created jobs, and the meeting' },
            '409': { description: 'The meeting ended and its audio was deleted, or it has not started' },
            ...errors,
          },
        },
      },
      '/v1/batches': {
        post: {
          summary: 'Create an upload batch; create meetings with "batchId" to put them in it',
          requestBody: {
            content: {
              'application/json': { schema: { type: 'object', properties: { title: { type: 'string' } } } },
            },
          },
          responses: { '201': { description: 'The batch' }, ...errors },
        },
      },
      '/v1/batches/{id}': {
        get: {
          summary: 'A batch and the status of its meetings',
          parameters: [idParam],
          responses: { '200': { description: 'The batch' }, ...errors },
        },
      },
      '/v1/batches/{id}/cancel': {
        post: {
          summary:
            'Cancel a batch: its jobs canceled and running attempts closed at once, its meetings failed as canceled, then their audio deleted',
          parameters: [idParam],
          responses: { '202': { description: 'The canceled batch' }, ...errors },
        },
      },
      '/v1/webhooks': {
        post: {
          summary: 'Register a webhook endpoint; the answer carries its signing secret, shown once',
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['url'],
                  properties: {
                    url: { type: 'string', format: 'uri' },
                    events: { type: 'array', items: { enum: [...WEBHOOK_EVENTS] } },
                  },
                },
              },
            },
          },
          responses: { '201': { description: 'The endpoint and its secret' }, ...errors },
        },
        get: {
          summary: 'The workspace’s endpoints (no secrets)',
          responses: { '200': { description: 'Endpoints' } },
        },
      },
      '/v1/webhooks/{id}': {
        delete: {
          summary: 'Disable an endpoint',
          parameters: [idParam],
          responses: { '204': { description: 'Disabled' }, ...errors },
        },
      },
      '/v1/webhooks/{id}/deliveries': {
        get: {
          summary: 'The delivery log: each delivery with its status and every attempt',
          parameters: [idParam],
          responses: { '200': { description: 'Deliveries' }, ...errors },
        },
      },
      '/v1/api-keys': {
        get: {
          summary:
            'S9: the workspace’s API keys with their status (active, expired, revoked), created, last used, expires and revoked times; never a key or its hash (`hint` is the public part only)',
          responses: {
            '200': {
              description:
                '{apiKeys: [{id, name, hint, status, createdAt, lastUsedAt, expiresAt, revokedAt}]}',
            },
            ...errors,
          },
        },
        post: {
          summary: 'S9: create an API key for this workspace; the answer carries the key, shown once',
          requestBody: {
            required: false,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    name: { type: 'string', maxLength: 100, description: 'a label (default "api")' },
                    expiresAt: {
                      type: 'string',
                      format: 'date-time',
                      description:
                        'when the key stops working (a future time with a zone); none: it never expires',
                    },
                  },
                },
              },
            },
          },
          responses: { '201': { description: 'The key as listed, plus `key` (shown once)' }, ...errors },
        },
      },
      '/v1/api-keys/{id}': {
        delete: {
          summary:
            'S9: revoke one of this workspace’s keys; its next request gets 401. Another workspace’s key, or one already revoked: 404. The workspace’s last active key: 409 api_key.last_key (create another first)',
          parameters: [idParam],
          responses: {
            '204': { description: 'Revoked' },
            '409': { description: 'The last active key', content: { 'application/json': { schema: error } } },
            ...errors,
          },
        },
      },
      '/v1/api-keys/{id}/revoke': {
        post: {
          summary: 'S9: the same as DELETE /v1/api-keys/{id}, answering with the revoked key as listed',
          parameters: [idParam],
          responses: {
            '200': { description: 'The revoked key (no secret)' },
            '409': { description: 'The last active key', content: { 'application/json': { schema: error } } },
            ...errors,
          },
        },
      },
      '/v1/operator/overview': {
        get: {
          summary:
            'X1 for the web app: queues (pending, due, running, oldest due age), health figures, dead letters with their attempt histories, minutes outages in progress, cleanup backlog; job lists are the caller’s workspace only',
          responses: {
            '200': {
              description:
                '{queues, health (installation-wide), workspace (this workspace’s failed, quarantined and outage counts), deadLetters, outages, storedBytes}',
            },
            ...errors,
          },
        },
      },
      '/v1/calendar-events': {
        post: {
          summary:
            'R1/R10: a calendar event to record with a meeting bot; copies of one meeting (same canonical link and start) share one recording. The same eventId with a new start or link moves it (the old recording canceled, its bot deleted); without an eventId, an event overlapping a not-yet-joined recording of the same link that only the API asked for replaces it (one bot per call). 400 event.meeting_url for a link that is not a Zoom, Google Meet, Teams, Webex or GoTo meeting, 400 event.ended for an event already over',
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['start', 'end', 'meetingUrl'],
                  properties: {
                    title: { type: 'string' },
                    start: { type: 'string', format: 'date-time' },
                    end: { type: 'string', format: 'date-time' },
                    meetingUrl: { type: 'string', format: 'uri' },
                    record: {
                      type: 'boolean',
                      description:
                        'false: do not record this event; true: record it even if a user canceled this meeting’s recording',
                    },
                    eventId: {
                      type: 'string',
                      maxLength: 200,
                      description:
                        'the calendar’s own id for the event: posting it again with a new time or link moves the recording',
                    },
                  },
                },
              },
            },
          },
          responses: {
            '201': {
              description:
                '{recording, duplicate: false, replaced: id of the recording this one replaced or null, skipped: null}',
            },
            '200': {
              description:
                'A copy of a meeting already recorded ({duplicate: true}), or nothing made ({recording: null, skipped})',
            },
            ...errors,
          },
        },
      },
      '/v1/calendar-feeds': {
        post: {
          summary:
            'R1: subscribe to an ICS feed (https or webcal; plain http only for hosts in VERBATIM_FEED_PLAIN_HTTP_HOSTS), polled every 5 minutes',
          requestBody: {
            content: {
              'application/json': {
                schema: { type: 'object', required: ['url'], properties: { url: { type: 'string' } } },
              },
            },
          },
          responses: { '201': { description: 'The feed, its address redacted' }, ...errors },
        },
        get: {
          summary: 'The workspace’s feeds with their last read and last error (addresses redacted)',
          responses: { '200': { description: '{feeds}' } },
        },
      },
      '/v1/calendar-feeds/{id}': {
        delete: {
          summary: 'Unsubscribe; the unstarted recordings only this feed held are canceled',
          parameters: [idParam],
          responses: { '200': { description: '{id, canceled}' }, ...errors },
        },
      },
      '/v1/bot-recordings': {
        get: {
          summary: 'The workspace’s bot recordings, newest join time first; bad filters are 400 list.<field>',
          parameters: [
            queryParam(
              'status',
              'comma-separated: pending, scheduled, joining, in_call, recording, processing, complete, failed, not_recorded, canceled',
            ),
            queryParam(
              'failureCode',
              'a failure code (dotted, e.g. bot.schedule_outcome_unknown; older spellings accepted) or its prefix before ":"',
            ),
            queryParam('meetingId', 'the meeting a recording was imported into'),
            queryParam('from', 'join time at or after (ISO time)'),
            queryParam('to', 'join time before (ISO time)'),
            queryParam('limit', '1 to 200, default 50'),
            queryParam('cursor', 'nextCursor of the previous page'),
          ],
          responses: { '200': { description: '{recordings, nextCursor}' }, ...errors },
        },
      },
      '/v1/bot-recordings/{id}': {
        get: {
          summary: 'A bot recording: status, bot id, failure, last provider error, meeting id',
          parameters: [idParam],
          responses: {
            '200': {
              description: 'The recording',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/BotRecording' } } },
            },
            ...errors,
          },
        },
      },
      '/v1/bot-recordings/{id}/cancel': {
        post: {
          summary: 'Cancel a recording that has not started; its bot is deleted by a retried job',
          parameters: [idParam],
          responses: { '202': { description: 'The canceled recording' }, ...errors },
        },
      },
      '/v1/bot-recordings/{id}/stop': {
        post: {
          summary:
            'Stop a recording: canceled if not started; a bot in the call is taken out of it and what it recorded is transcribed',
          parameters: [idParam],
          responses: { '202': { description: 'The recording and {leaving}' }, ...errors },
        },
      },
      '/v1/bot-settings': {
        get: {
          summary: 'Whether meeting bots record this workspace’s meetings',
          responses: { '200': { description: '{enabled}' } },
        },
        put: {
          summary: 'Switch bot recording on or off; off cancels every recording that has not started',
          requestBody: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['enabled'],
                  properties: { enabled: { type: 'boolean' } },
                },
              },
            },
          },
          responses: { '200': { description: '{enabled, canceled}' }, ...errors },
        },
      },
      '/providers/recall/webhooks': {
        post: {
          summary:
            'R7/R8: the bot provider’s webhooks, verified by signature (Standard Webhooks / Svix headers), not by API key',
          security: [],
          responses: {
            '200': { description: '{outcome}' },
            '401': { description: 'Bad or stale signature' },
          },
        },
      },
      '/healthz': {
        get: {
          summary: 'Liveness and database readiness',
          security: [],
          responses: { '200': { description: 'ok' } },
        },
      },
      '/metrics': {
        get: {
          summary:
            'S9: Prometheus metrics (installation-wide; no workspace ids), with `Authorization: Bearer <VERBATIM_METRICS_TOKEN>`',
          security: [{ metricsToken: [] }],
          responses: {
            '200': { description: 'text' },
            '401': {
              description: 'Missing or wrong metrics token',
              content: { 'application/json': { schema: error } },
            },
            '404': {
              description: 'VERBATIM_METRICS_TOKEN is not set: metrics are off',
              content: { 'application/json': { schema: error } },
            },
          },
        },
      },
    },
  };
}
