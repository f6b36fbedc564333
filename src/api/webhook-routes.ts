import type { FastifyInstance } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { createEndpoint, deliveryLog, disableEndpoint, listEndpoints } from '../events/webhooks.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import { workspaceOf, type ApiDeps } from './context.ts';

/** O3: a workspace's webhook endpoints and their delivery log. The secret is shown only on creation. */
export function registerWebhookRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;

  app.post('/v1/webhooks', async (req, reply) => {
    const created = await createEndpoint(deps, workspaceOf(req), req.body);
    return reply.status(201).send(created);
  });

  app.get('/v1/webhooks', async (req) => ({ webhooks: await listEndpoints(deps, workspaceOf(req)) }));

  app.get<{ Params: { id: string } }>('/v1/webhooks/:id/deliveries', async (req) => {
    assertId(req.params.id);
    return { deliveries: await deliveryLog(deps, workspaceOf(req), req.params.id) };
  });

  app.delete<{ Params: { id: string } }>('/v1/webhooks/:id', async (req, reply) => {
    assertId(req.params.id);
    if (!(await disableEndpoint(deps, workspaceOf(req), req.params.id))) {
      throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${req.params.id}`);
    }
    return reply.status(204).send();
  });
}

function assertId(id: string): void {
  if (!isUuid(id)) throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${id}`);
}
