import type { FastifyInstance } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  createEndpoint,
  deliveryLog,
  disableEndpoint,
  listEndpoints,
  rotateEndpointSecret,
  WEBHOOK_EVENTS,
} from '../events/webhooks.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { empty, ERRORS, ID_PARAMS, json, jsonBody, type RouteSchema } from './contract.ts';
import { DeliveryLogSchema, WebhookCreatedSchema, WebhookListSchema } from './schemas.ts';

const CREATE_SCHEMA: RouteSchema = {
  summary: 'Register a webhook endpoint; the answer carries its signing secret, shown once',
  body: jsonBody({
    type: 'object',
    required: ['url'],
    properties: {
      url: { type: 'string', format: 'uri' },
      events: {
        type: 'array',
        items: { enum: [...WEBHOOK_EVENTS] },
        description: 'the events to send (empty or left out: all of them)',
      },
    },
  }),
  response: { 201: json('The endpoint and its secret', WebhookCreatedSchema), ...ERRORS },
};
const LIST_SCHEMA: RouteSchema = {
  summary: 'The workspace’s endpoints (no secrets)',
  response: { 200: json('Endpoints', WebhookListSchema), ...ERRORS },
};
const DELIVERIES_SCHEMA: RouteSchema = {
  summary: 'The delivery log: each delivery with its status and every attempt',
  params: ID_PARAMS,
  response: { 200: json('Deliveries', DeliveryLogSchema), ...ERRORS },
};
const DISABLE_SCHEMA: RouteSchema = {
  summary: 'Disable an endpoint',
  params: ID_PARAMS,
  response: { 204: empty('Disabled'), ...ERRORS },
};

const ROTATE_SCHEMA: RouteSchema = {
  summary:
    'U7: a new signing secret for the endpoint, shown once. The one before stays valid for overlapHours (default 24, 0–720): until then each delivery carries both signatures, so the receiver can switch without missing one',
  params: ID_PARAMS,
  body: jsonBody({ type: 'object', properties: { overlapHours: { type: 'number' } } }, false),
  response: {
    200: json('The new secret', {
      type: 'object',
      required: ['secret', 'previousValidUntil'],
      properties: {
        secret: { type: 'string' },
        previousValidUntil: { type: ['string', 'null'], format: 'date-time' },
      },
    }),
    ...ERRORS,
  },
};

/** O3: a workspace's webhook endpoints and their delivery log. The secret is shown only on creation. */
export function registerWebhookRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;

  app.post('/v1/webhooks', { schema: CREATE_SCHEMA }, async (req, reply) => {
    const created = await createEndpoint(deps, workspaceOf(req), req.body);
    return reply.status(201).send(created);
  });

  app.get('/v1/webhooks', { schema: LIST_SCHEMA }, async (req) => ({
    webhooks: await listEndpoints(deps, workspaceOf(req)),
  }));

  app.get<{ Params: { id: string } }>(
    '/v1/webhooks/:id/deliveries',
    { schema: DELIVERIES_SCHEMA },
    async (req) => {
      assertId(req.params.id);
      return { deliveries: await deliveryLog(deps, workspaceOf(req), req.params.id) };
    },
  );

  app.post<{ Params: { id: string } }>(
    '/v1/webhooks/:id/rotate-secret',
    { schema: ROTATE_SCHEMA },
    async (req) => {
      assertId(req.params.id);
      const rotated = await rotateEndpointSecret(deps, workspaceOf(req), req.params.id, req.body);
      api.log.info({ event: 'webhook.secret_rotated', endpointId: req.params.id }, 'webhook secret rotated');
      return {
        secret: rotated.secret,
        previousValidUntil: rotated.previousValidUntil?.toISOString() ?? null,
      };
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/webhooks/:id',
    { schema: DISABLE_SCHEMA },
    async (req, reply) => {
      assertId(req.params.id);
      if (!(await disableEndpoint(deps, workspaceOf(req), req.params.id))) {
        throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${req.params.id}`);
      }
      return reply.status(204).send();
    },
  );
}

function assertId(id: string): void {
  if (!isUuid(id)) throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${id}`);
}
