import type { FastifyInstance } from 'fastify';
import { AppError, assertNever, ErrorKind } from '../domain/errors.ts';
import { parseNewKeyRequest } from '../workspaces/api-keys.ts';
import { workspaceOf, type ApiDeps } from './context.ts';

/**
 * S9: a workspace's own API keys. Listing never shows a secret; a new key is shown once; another
 * workspace's key is 404. The last active key cannot be revoked here (409): a workspace cannot
 * lock itself out by accident, and an operator can still do it with `verbatim keys revoke`.
 */
export function registerKeyRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { workspaces } = api;

  app.get('/v1/api-keys', async (req) => ({ apiKeys: await workspaces.listApiKeys(workspaceOf(req)) }));

  app.post('/v1/api-keys', async (req, reply) => {
    const workspaceId = workspaceOf(req);
    const request = parseNewKeyRequest(req.body, new Date());
    const created = await workspaces.createApiKey(workspaceId, request.name, {
      expiresAt: request.expiresAt,
    });
    const listed = (await workspaces.listApiKeys(workspaceId)).find((k) => k.id === created.keyId);
    return reply.status(201).send({ ...listed, key: created.apiKey });
  });

  const revoke = async (workspaceId: string, id: string) => {
    const result = await workspaces.revokeApiKey(id, { workspaceId, keepOne: true });
    switch (result.outcome) {
      case 'revoked':
        return result.key;
      case 'not_found':
      case 'already_revoked':
        throw new AppError(
          ErrorKind.notFound,
          'api_key.not_found',
          `no active API key ${id} in this workspace`,
        );
      case 'last_key':
        throw new AppError(
          ErrorKind.conflict,
          'api_key.last_key',
          'this is the workspace’s last active API key: create another first (an operator can still revoke it with `verbatim keys revoke`)',
        );
      default:
        return assertNever(result, 'revoke outcome');
    }
  };

  app.delete<{ Params: { id: string } }>('/v1/api-keys/:id', async (req, reply) => {
    await revoke(workspaceOf(req), req.params.id);
    return reply.status(204).send();
  });

  app.post<{ Params: { id: string } }>('/v1/api-keys/:id/revoke', async (req) =>
    revoke(workspaceOf(req), req.params.id),
  );
}
