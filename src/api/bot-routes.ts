import type { FastifyInstance } from 'fastify';
import {
  cancelBotRecording,
  createCalendarEvent,
  getBotRecording,
  getBotSettings,
  listBotRecordings,
  recordingView,
  setBotRecordingEnabled,
  stopBotRecording,
} from '../bots/recordings.ts';
import { addCalendarFeed, listCalendarFeeds, removeCalendarFeed } from '../bots/calendar-feeds.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, ID_PARAMS, json, jsonBody, type RouteSchema } from './contract.ts';
import {
  BotRecordingListSchema,
  BotSettingsChangedSchema,
  BotSettingsSchema,
  BotStoppedSchema,
  CalendarEventResultSchema,
  FeedListSchema,
  FeedRemovedSchema,
  FeedSchema,
  ref,
} from './schemas.ts';

const RECORDING = ref('BotRecording');
const query = (description: string) => ({ type: 'string', description });

const CALENDAR_EVENT_SCHEMA: RouteSchema = {
  summary:
    'R1/R10: a calendar event to record with a meeting bot; copies of one meeting (same canonical link and start) share one recording. The same eventId with a new start or link moves it (the old recording canceled, its bot deleted); without an eventId, an event overlapping a not-yet-joined recording of the same link that only the API asked for replaces it (one bot per call). 400 event.meeting_url for a link that is not a Zoom, Google Meet, Teams, Webex or GoTo meeting, 400 event.ended for an event already over',
  body: jsonBody({
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
  }),
  response: {
    201: json(
      '{recording, duplicate: false, replaced: id of the recording this one replaced or null, skipped: null}',
      CalendarEventResultSchema,
    ),
    200: json(
      'A copy of a meeting already recorded ({duplicate: true}), or nothing made ({recording: null, skipped})',
      CalendarEventResultSchema,
    ),
    ...ERRORS,
  },
};

const SETTINGS_SCHEMA: RouteSchema = {
  summary: 'Whether meeting bots record this workspace’s meetings',
  response: { 200: json('{enabled}', BotSettingsSchema), ...ERRORS },
};
const SET_SETTINGS_SCHEMA: RouteSchema = {
  summary: 'Switch bot recording on or off; off cancels every recording that has not started',
  body: jsonBody({ type: 'object', required: ['enabled'], properties: { enabled: { type: 'boolean' } } }),
  response: { 200: json('{enabled, canceled}', BotSettingsChangedSchema), ...ERRORS },
};
const ADD_FEED_SCHEMA: RouteSchema = {
  summary:
    'R1: subscribe to an ICS feed (https or webcal; plain http only for hosts in VERBATIM_FEED_PLAIN_HTTP_HOSTS), polled every 5 minutes',
  body: jsonBody({ type: 'object', required: ['url'], properties: { url: { type: 'string' } } }),
  response: { 201: json('The feed, its address redacted', FeedSchema), ...ERRORS },
};
const FEEDS_SCHEMA: RouteSchema = {
  summary: 'The workspace’s feeds with their last read and last error (addresses redacted)',
  response: { 200: json('{feeds}', FeedListSchema), ...ERRORS },
};
const REMOVE_FEED_SCHEMA: RouteSchema = {
  summary: 'Unsubscribe; the unstarted recordings only this feed held are canceled',
  params: ID_PARAMS,
  response: { 200: json('{id, canceled}', FeedRemovedSchema), ...ERRORS },
};
const RECORDINGS_SCHEMA: RouteSchema = {
  summary: 'The workspace’s bot recordings, newest join time first; bad filters are 400 list.<field>',
  querystring: {
    type: 'object',
    properties: {
      status: query(
        'comma-separated: pending, scheduled, joining, in_call, recording, processing, complete, failed, not_recorded, canceled',
      ),
      failureCode: query(
        'a failure code (dotted, e.g. bot.schedule_outcome_unknown; older spellings accepted) or its prefix before ":"',
      ),
      meetingId: query('the meeting a recording was imported into'),
      from: query('join time at or after (ISO time)'),
      to: query('join time before (ISO time)'),
      limit: query('1 to 200, default 50'),
      cursor: query('nextCursor of the previous page'),
    },
  },
  response: { 200: json('{recordings, nextCursor}', BotRecordingListSchema), ...ERRORS },
};
const RECORDING_SCHEMA: RouteSchema = {
  summary: 'A bot recording: status, bot id, failure, last provider error, meeting id',
  params: ID_PARAMS,
  response: { 200: json('The recording', RECORDING), ...ERRORS },
};
const STOP_SCHEMA: RouteSchema = {
  summary:
    'Stop a recording: canceled if not started; a bot in the call is taken out of it and what it recorded is transcribed',
  params: ID_PARAMS,
  response: { 202: json('The recording and {leaving}', BotStoppedSchema), ...ERRORS },
};
const CANCEL_SCHEMA: RouteSchema = {
  summary: 'Cancel a recording that has not started; its bot is deleted by a retried job',
  params: ID_PARAMS,
  response: { 202: json('The canceled recording', RECORDING), ...ERRORS },
};

/** R1: calendar events from the API, and the recordings their bots make. */
export function registerBotRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;
  app.post('/v1/calendar-events', { schema: CALENDAR_EVENT_SCHEMA }, async (req, reply) => {
    const { recording, duplicate, skipped, replaced } = await createCalendarEvent(
      deps,
      workspaceOf(req),
      req.body,
      principalOf(req).userId,
    );
    return reply.status(recording && !duplicate ? 201 : 200).send({
      recording: recording ? recordingView(recording) : null,
      duplicate,
      replaced: replaced ?? null,
      skipped,
    });
  });
  app.get('/v1/bot-settings', { schema: SETTINGS_SCHEMA }, async (req) =>
    getBotSettings(deps, workspaceOf(req)),
  );
  app.put('/v1/bot-settings', { schema: SET_SETTINGS_SCHEMA }, async (req) =>
    setBotRecordingEnabled(deps, workspaceOf(req), req.body),
  );
  app.post('/v1/calendar-feeds', { schema: ADD_FEED_SCHEMA }, async (req, reply) =>
    reply.status(201).send(await addCalendarFeed(deps, workspaceOf(req), req.body, principalOf(req).userId)),
  );
  app.get('/v1/calendar-feeds', { schema: FEEDS_SCHEMA }, async (req) =>
    listCalendarFeeds(deps, workspaceOf(req)),
  );
  app.delete<{ Params: { id: string } }>(
    '/v1/calendar-feeds/:id',
    { schema: REMOVE_FEED_SCHEMA },
    async (req) => removeCalendarFeed(deps, workspaceOf(req), req.params.id),
  );
  app.get<{ Querystring: Record<string, unknown> }>(
    '/v1/bot-recordings',
    { schema: RECORDINGS_SCHEMA },
    async (req) => listBotRecordings(deps, workspaceOf(req), req.query),
  );
  app.get<{ Params: { id: string } }>('/v1/bot-recordings/:id', { schema: RECORDING_SCHEMA }, async (req) =>
    recordingView(await getBotRecording(deps, workspaceOf(req), req.params.id)),
  );
  app.post<{ Params: { id: string } }>(
    '/v1/bot-recordings/:id/stop',
    { schema: STOP_SCHEMA },
    async (req, reply) => {
      const { recording, leaving } = await stopBotRecording(deps, workspaceOf(req), req.params.id);
      return reply.status(202).send({ ...recordingView(recording), leaving });
    },
  );
  app.post<{ Params: { id: string } }>(
    '/v1/bot-recordings/:id/cancel',
    { schema: CANCEL_SCHEMA },
    async (req, reply) =>
      reply.status(202).send(recordingView(await cancelBotRecording(deps, workspaceOf(req), req.params.id))),
  );
}
