import type { FastifyInstance } from 'fastify';
import {
  applyProviderWebhook,
  parseProviderEvent,
  providerWebhookMayVerify,
  verifyProviderWebhook,
} from '../bots/provider-webhooks.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { ApiDeps } from './context.ts';
import { json, refusal, type RouteSchema } from './contract.ts';

const WEBHOOK_SCHEMA: RouteSchema = {
  summary:
    'R7/R8: the bot provider’s webhooks, verified by signature (Standard Webhooks / Svix headers), not by API key',
  security: [],
  response: {
    200: json('{outcome}', {
      type: 'object',
      required: ['outcome'],
      properties: { outcome: { type: 'string' } },
    }),
    400: refusal('The body is not JSON (webhook.body)'),
    401: refusal('Bad or stale signature'),
  },
};

/**
 * R7/R8: the bot provider's webhooks. Outside /v1 (no API key): a delivery is authenticated by its
 * signature over the raw body, so the body is kept as received rather than parsed first.
 */
export function registerProviderRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;
  void app.register((scope, _opts, done) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, next) => {
      next(null, body);
    });
    const badSignature = () =>
      new AppError(
        ErrorKind.unauthorized,
        'webhook.bad_signature',
        'the webhook signature is missing, wrong or stale',
      );
    // S7: no API key here, so the body is small (64 KiB) and a delivery that cannot verify (no
    // secrets, headers missing, stale) is refused before a byte of it is read.
    scope.post(
      '/providers/recall/webhooks',
      {
        bodyLimit: deps.config.requestLimits.maxProviderWebhookBytes,
        schema: WEBHOOK_SCHEMA,
        onRequest: (req, _reply, next) => {
          next(
            providerWebhookMayVerify(deps.config.recall.webhookSecrets, req.headers)
              ? undefined
              : badSignature(),
          );
        },
      },
      async (req, reply) => {
        const raw = typeof req.body === 'string' ? req.body : '';
        const id = verifyProviderWebhook(deps.config.recall.webhookSecrets, req.headers, raw);
        if (!id) throw badSignature();
        let body: unknown;
        try {
          body = JSON.parse(raw);
        } catch {
          throw new AppError(ErrorKind.invalidInput, 'webhook.body', 'the webhook body is not JSON');
        }
        const outcome = await applyProviderWebhook(deps, id, parseProviderEvent(body));
        return reply.status(200).send({ outcome });
      },
    );
    done();
  });
}
