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
import { workspaceOf, type ApiDeps } from './context.ts';

/** R1: calendar events from the API, and the recordings their bots make. */
export function registerBotRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;
  app.post('/v1/calendar-events', async (req, reply) => {
    const { recording, duplicate, skipped, replaced } = await createCalendarEvent(
      deps,
      workspaceOf(req),
      req.body,
    );
    return reply.status(recording && !duplicate ? 201 : 200).send({
      recording: recording ? recordingView(recording) : null,
      duplicate,
      replaced: replaced ?? null,
      skipped,
    });
  });
  app.get('/v1/bot-settings', async (req) => getBotSettings(deps, workspaceOf(req)));
  app.put('/v1/bot-settings', async (req) => setBotRecordingEnabled(deps, workspaceOf(req), req.body));
  app.post('/v1/calendar-feeds', async (req, reply) =>
    reply.status(201).send(await addCalendarFeed(deps, workspaceOf(req), req.body)),
  );
  app.get('/v1/calendar-feeds', async (req) => listCalendarFeeds(deps, workspaceOf(req)));
  app.delete<{ Params: { id: string } }>('/v1/calendar-feeds/:id', async (req) =>
    removeCalendarFeed(deps, workspaceOf(req), req.params.id),
  );
  app.get<{ Querystring: Record<string, unknown> }>('/v1/bot-recordings', async (req) =>
    listBotRecordings(deps, workspaceOf(req), req.query),
  );
  app.get<{ Params: { id: string } }>('/v1/bot-recordings/:id', async (req) =>
    recordingView(await getBotRecording(deps, workspaceOf(req), req.params.id)),
  );
  app.post<{ Params: { id: string } }>('/v1/bot-recordings/:id/stop', async (req, reply) => {
    const { recording, leaving } = await stopBotRecording(deps, workspaceOf(req), req.params.id);
    return reply.status(202).send({ ...recordingView(recording), leaving });
  });
  app.post<{ Params: { id: string } }>('/v1/bot-recordings/:id/cancel', async (req, reply) =>
    reply.status(202).send(recordingView(await cancelBotRecording(deps, workspaceOf(req), req.params.id))),
  );
}
