import type { FastifyInstance } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { createEndpoint, deliveryLog, endpointView } from '../events/webhooks.ts';
import { isUuid } from '../meetings/pg-meeting-store.ts';
import { workspaceOf, type ApiDeps } from './context.ts';

/** O3: a workspace's webhook endpoints and their delivery log. The secret is shown only on creation. */
export function registerWebhookRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;

  app.post('/v1/webhooks', async (req, reply) => {
    const created = await createEndpoint(deps, workspaceOf(req), req.body);
    return reply.status(201).send(created);
  });

  app.get('/v1/webhooks', async (req) => {
    const rows = await deps.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('workspace_id', '=', workspaceOf(req))
      .orderBy('created_at')
      .execute();
    return { webhooks: rows.map(endpointView) };
  });

  app.get<{ Params: { id: string } }>('/v1/webhooks/:id/deliveries', async (req) => {
    assertId(req.params.id);
    return { deliveries: await deliveryLog(deps, workspaceOf(req), req.params.id) };
  });

  app.delete<{ Params: { id: string } }>('/v1/webhooks/:id', async (req, reply) => {
    assertId(req.params.id);
    const row = await deps.db
      .updateTable('webhook_endpoints')
      .set({ disabled_at: new Date() })
      .where('id', '=', req.params.id)
      .where('workspace_id', '=', workspaceOf(req))
      .where('disabled_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!row) throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${req.params.id}`);
    // What was still to be sent will not be: it stays in the log as failed.
    await deps.db
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', failed_at: new Date(), last_error: 'endpoint disabled' })
      .where('endpoint_id', '=', row.id)
      .where('status', '=', 'pending')
      .execute();
    return reply.status(204).send();
  });
}

function assertId(id: string): void {
  if (!isUuid(id)) throw new AppError(ErrorKind.notFound, 'webhook.not_found', `no webhook ${id}`);
}
