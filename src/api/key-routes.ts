import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Action, boundNewKey, decide } from '../domain/roles.ts';
import { AppError, assertNever, ErrorKind } from '../domain/errors.ts';
import { parseNewKeyRequest } from '../workspaces/api-keys.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { empty, ERRORS, ID_PARAMS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';
import { ApiKeyCreatedSchema, ApiKeyListSchema, ApiKeySchema } from './schemas.ts';

const LIST_SCHEMA: RouteSchema = {
  summary:
    'S9: the workspace’s API keys with their status (active, expired, revoked), created, last used, expires and revoked times; never a key or its hash (`hint` is the public part only)',
  response: {
    200: json(
      '{apiKeys: [{id, name, hint, status, createdAt, lastUsedAt, expiresAt, revokedAt}]}',
      ApiKeyListSchema,
    ),
    ...ERRORS,
  },
};
const CREATE_SCHEMA: RouteSchema = {
  summary:
    'S9: create an API key for this workspace; the answer carries the key, shown once. U6: a workspace holds at most VERBATIM_MAX_API_KEYS active keys (409 api_key.limit)',
  body: jsonBody(
    {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: { type: 'string', maxLength: 100, description: 'a label (default "api")' },
        expiresAt: {
          type: 'string',
          format: 'date-time',
          description:
            'when the key stops working (a future time with a zone), no later than the key or session making it; none: the maker’s expiry (never, for a key without one)',
        },
        scopes: {
          type: 'array',
          items: { type: 'string', enum: ['read', 'write', 'admin', 'keys'] },
          description: 'what the key may be used for, within its maker’s scopes (default: the maker’s)',
        },
      },
    },
    false,
  ),
  response: {
    201: json('The key as listed, plus `key` (shown once)', ApiKeyCreatedSchema),
    ...ERRORS,
    409: refusal('The workspace holds the most active keys allowed (api_key.limit)'),
  },
};
const LAST_KEY = refusal('The last active key (api_key.last_key): create another first');
const DELETE_SCHEMA: RouteSchema = {
  summary:
    'S9: revoke one of this workspace’s keys; its next request gets 401. Another workspace’s key, or one already revoked: 404. The workspace’s last active key: 409 api_key.last_key (create another first)',
  params: ID_PARAMS,
  response: { 204: empty('Revoked'), ...ERRORS, 409: LAST_KEY },
};
const REVOKE_SCHEMA: RouteSchema = {
  summary: 'S9: the same as DELETE /v1/api-keys/{id}, answering with the revoked key as listed',
  params: ID_PARAMS,
  response: { 200: json('The revoked key (no secret)', ApiKeySchema), ...ERRORS, 409: LAST_KEY },
};

/**
 * S9: a workspace's own API keys. Listing never shows a secret; a new key is shown once; another
 * workspace's key is 404. The last active key cannot be revoked here (409): a workspace cannot
 * lock itself out by accident, and an operator can still do it with `verbatim keys revoke`.
 */
export function registerKeyRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { workspaces } = api;

  /** U6: whose keys the caller may list and revoke: everyone's, or only their own. */
  const keysOf = (req: FastifyRequest): { userId?: string | null } => {
    const principal = principalOf(req);
    return decide(principal, Action.manageAllKeys).allowed ? {} : { userId: principal.userId };
  };

  app.get('/v1/api-keys', { schema: LIST_SCHEMA }, async (req) => ({
    apiKeys: await workspaces.listApiKeys(workspaceOf(req), keysOf(req)),
  }));

  app.post('/v1/api-keys', { schema: CREATE_SCHEMA }, async (req, reply) => {
    const workspaceId = workspaceOf(req);
    const principal = principalOf(req);
    const request = parseNewKeyRequest(req.body, new Date());
    // U6: a key's scopes and expiry are bounded by the key or session that makes it.
    const bounded = boundNewKey(principal, request);
    if (!bounded.ok) throw new AppError(ErrorKind.invalidInput, bounded.code, bounded.message);
    const cap = api.deps.config.maxActiveKeys;
    const created = await workspaces.createApiKeyUnderCap(
      workspaceId,
      request.name,
      { expiresAt: bounded.expiresAt, scopes: bounded.scopes, userId: principal.userId },
      cap,
    );
    if (!created)
      throw new AppError(
        ErrorKind.conflict,
        'api_key.limit',
        `this workspace already has ${cap} active API keys, the most VERBATIM_MAX_API_KEYS allows: revoke one first`,
      );
    const listed = (await workspaces.listApiKeys(workspaceId)).find((k) => k.id === created.keyId);
    return reply.status(201).send({ ...listed, key: created.apiKey });
  });

  const revoke = async (req: FastifyRequest, id: string) => {
    const workspaceId = workspaceOf(req);
    const result = await workspaces.revokeApiKey(id, { workspaceId, keepOne: true, ...keysOf(req) });
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

  app.delete<{ Params: { id: string } }>(
    '/v1/api-keys/:id',
    { schema: DELETE_SCHEMA },
    async (req, reply) => {
      await revoke(req, req.params.id);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: { id: string } }>('/v1/api-keys/:id/revoke', { schema: REVOKE_SCHEMA }, async (req) =>
    revoke(req, req.params.id),
  );
}
