import type { FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  getVocabulary,
  listSpeakers,
  MAX_SPEAKER_NAME,
  MAX_TERM_LENGTH,
  MAX_VOCABULARY_TERMS,
  mergeSpeakers,
  nameSpeaker,
  setVocabulary,
} from '../meetings/speakers.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, ID_PARAMS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';
import { SpeakerSchema } from './schemas.ts';

const SPEAKER_PARAMS = {
  type: 'object',
  required: ['id', 'speakerId'],
  properties: { id: { type: 'string', format: 'uuid' }, speakerId: { type: 'string', format: 'uuid' } },
};

/** W1/W4: a meeting's speakers, named and merged by people. */
export function registerSpeakerRoutes(app: FastifyInstance, { deps }: ApiDeps): void {
  app.get<{ Params: { id: string } }>(
    '/v1/meetings/:id/speakers',
    {
      schema: {
        summary:
          'W1: the meeting’s speakers, each from the source that knows it (a bot’s participants, a track, a channel, a diarizing recogniser); merged ones carry `mergedInto`',
        params: ID_PARAMS,
        response: {
          200: json('The speakers', Type.Object({ speakers: Type.Array(SpeakerSchema) })),
          ...ERRORS,
        },
      } satisfies RouteSchema,
    },
    async (req) => ({ speakers: await listSpeakers(deps, workspaceOf(req), req.params.id) }),
  );

  app.patch<{ Params: { id: string; speakerId: string }; Body: unknown }>(
    '/v1/meetings/:id/speakers/:speakerId',
    {
      schema: {
        summary:
          'W4: name a speaker (`name: null` gives back the source’s label). A published transcript gets a new revision and `meeting.transcript_revised`; the minutes are written again',
        params: SPEAKER_PARAMS,
        body: jsonBody({
          type: 'object',
          required: ['name'],
          properties: { name: { type: ['string', 'null'], maxLength: MAX_SPEAKER_NAME } },
        }),
        response: { 200: json('The speaker as named', SpeakerSchema), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => {
      const body = req.body as { name?: unknown } | null;
      const name = body?.name;
      if (!body || typeof body !== 'object' || !('name' in body))
        throw invalid('speaker.name', 'send {"name": "…"} (or null to use the source’s label)');
      if (name !== null && (typeof name !== 'string' || name.trim() === '' || name.length > MAX_SPEAKER_NAME))
        throw invalid(
          'speaker.name',
          `name must be null or a non-empty string of at most ${MAX_SPEAKER_NAME} characters`,
        );
      return nameSpeaker(
        deps,
        workspaceOf(req),
        req.params.id,
        req.params.speakerId,
        name === null ? null : name.replace(/\s+/g, ' ').trim(),
      );
    },
  );

  app.post<{ Params: { id: string; speakerId: string }; Body: unknown }>(
    '/v1/meetings/:id/speakers/:speakerId/merge',
    {
      schema: {
        summary:
          'W4: this speaker is the same person as `into`: its words read as `into`’s from now on (a new transcript revision, as for a rename). 409 speaker.same when they already are one',
        params: SPEAKER_PARAMS,
        body: jsonBody({
          type: 'object',
          required: ['into'],
          properties: { into: { type: 'string', format: 'uuid' } },
        }),
        response: {
          200: json('The speaker both now read as', SpeakerSchema),
          ...ERRORS,
          409: refusal('They are already one speaker'),
        },
      } satisfies RouteSchema,
    },
    async (req) => {
      const into = (req.body as { into?: unknown } | null)?.into;
      if (typeof into !== 'string') throw invalid('speaker.into', 'send {"into": "<speaker id>"}');
      return mergeSpeakers(deps, workspaceOf(req), req.params.id, req.params.speakerId, into);
    },
  );
}

const VOCABULARY = Type.Object({
  terms: Type.Array(Type.String()),
  applied: Type.Boolean({ description: 'whether the configured recogniser uses it' }),
  note: Type.String({ description: 'in plain words, how it is used, or why it is not' }),
});

/** W7: the words a workspace's meetings use. */
export function registerVocabularyRoutes(app: FastifyInstance, { deps }: ApiDeps): void {
  app.get(
    '/v1/vocabulary',
    {
      schema: {
        summary:
          'W7: the names and product terms the workspace’s meetings use, given to recognisers that take a prompt (a Whisper-compatible server), with whether the configured one does',
        response: { 200: json('The vocabulary', VOCABULARY), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => getVocabulary(deps, workspaceOf(req)),
  );
  app.put(
    '/v1/vocabulary',
    {
      schema: {
        summary: `W7: replaces the vocabulary (at most ${MAX_VOCABULARY_TERMS} terms of at most ${MAX_TERM_LENGTH} characters; duplicates dropped). 400 vocabulary.terms names what is wrong`,
        body: jsonBody({
          type: 'object',
          required: ['terms'],
          properties: {
            terms: {
              type: 'array',
              maxItems: MAX_VOCABULARY_TERMS,
              items: { type: 'string', minLength: 1, maxLength: MAX_TERM_LENGTH },
            },
          },
        }),
        response: { 200: json('The vocabulary as kept', VOCABULARY), ...ERRORS },
      } satisfies RouteSchema,
    },
    async (req) => setVocabulary(deps, workspaceOf(req), req.body),
  );
}

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}
