import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  changePlaybackDays,
  getPlaybackDays,
  MAX_PLAYBACK_DAYS,
  MAX_PLAYBACK_MS,
  playbackAudio,
} from '../meetings/playback.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, ID_PARAMS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';

const PlaybackSettings = Type.Object({
  days: Type.Integer({
    minimum: 0,
    maximum: MAX_PLAYBACK_DAYS,
    description:
      'E4: days a meeting’s audio is kept for playback after it is transcribed; 0 (the default): deleted as soon as the transcript is complete',
  }),
});

/** E4: playback of a meeting's audio, while its workspace keeps it, and that setting. */
export function registerPlaybackRoutes(app: FastifyInstance, { deps }: ApiDeps): void {
  app.get<{ Params: { id: string }; Querystring: { fromMs?: string; toMs?: string } }>(
    '/v1/meetings/:id/audio',
    {
      schema: {
        summary: `E4: a stretch of a completed meeting’s audio (16 kHz WAV, at most ${MAX_PLAYBACK_MS / 60_000} minutes), while its workspace keeps audio for playback`,
        params: ID_PARAMS,
        querystring: {
          type: 'object',
          properties: {
            fromMs: { type: 'integer', minimum: 0, default: 0 },
            toMs: {
              type: 'integer',
              minimum: 1,
              description: `fromMs + ${MAX_PLAYBACK_MS} at most (the default)`,
            },
          },
        },
        response: {
          200: {
            description: 'The audio',
            content: { 'audio/wav': { schema: { type: 'string', format: 'binary' } } },
          },
          ...ERRORS,
          410: refusal('`audio.not_kept`: this workspace keeps no audio, or it has been deleted'),
        },
      } satisfies RouteSchema,
    },
    async (req, reply) => {
      const fromMs = req.query.fromMs === undefined ? 0 : Number(req.query.fromMs);
      if (!Number.isInteger(fromMs) || fromMs < 0)
        throw new AppError(ErrorKind.invalidInput, 'audio.from_ms', 'fromMs must be an integer ≥ 0');
      const toMs = req.query.toMs === undefined ? fromMs + MAX_PLAYBACK_MS : Number(req.query.toMs);
      if (!Number.isInteger(toMs) || toMs <= fromMs || toMs - fromMs > MAX_PLAYBACK_MS)
        throw new AppError(
          ErrorKind.invalidInput,
          'audio.to_ms',
          `toMs must be an integer after fromMs, at most ${MAX_PLAYBACK_MS} ms after it`,
        );
      const wav = await playbackAudio(deps, workspaceOf(req), req.params.id, fromMs, toMs);
      return reply.type('audio/wav').header('cache-control', 'private, no-store').send(wav);
    },
  );

  app.get(
    '/v1/playback-settings',
    {
      schema: {
        summary: 'E4: how long this workspace keeps meetings’ audio for playback',
        response: { 200: json('The setting', PlaybackSettings), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => ({ days: await getPlaybackDays(deps, workspaceOf(req)) }),
  );

  app.put<{ Body: unknown }>(
    '/v1/playback-settings',
    {
      schema: {
        summary:
          'E4: keep meetings’ audio for playback for this many days after they are transcribed (0: delete it at once). Applies to meetings completed from now on; audited',
        body: jsonBody(PlaybackSettings),
        response: { 200: json('The setting', PlaybackSettings), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => {
      const days = (req.body as { days?: unknown } | null)?.days;
      if (typeof days !== 'number' || !Number.isInteger(days) || days < 0 || days > MAX_PLAYBACK_DAYS)
        throw new AppError(
          ErrorKind.invalidInput,
          'playback.days',
          `days must be an integer from 0 to ${MAX_PLAYBACK_DAYS}`,
        );
      await changePlaybackDays(deps, workspaceOf(req), days);
      return { days };
    },
  );
}
