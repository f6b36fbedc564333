/**
 * The API's contract: each route declares its request and response schemas beside its handler
 * (`schema` in the route's options), and @fastify/swagger builds the OpenAPI 3.1 document, served at
 * GET /openapi.json, from them. The shared shapes (Error, Meeting, BotRecording) are registered by
 * name from src/api/schemas.ts.
 *
 * Request schemas document; they do not validate. The handlers check their input themselves, so a
 * bad value gets its own code (`meeting.source`, `chunk.empty`, …) and a message naming what is
 * wrong, which a generic schema error would not give. Responses are serialized with JSON.stringify
 * as before (a schema never drops a field); the tests check every response against the document
 * (test/support/openapi-contract.ts).
 */
import type { FastifyInstance, FastifyPluginCallback, FastifySchema } from 'fastify';
import swagger from '@fastify/swagger';
import type { TSchema } from '@sinclair/typebox';
import { SHARED_SCHEMAS, ref } from './schemas.ts';

/** Registers the shared schemas and the document's generator; call before any route is added. */
export function registerApiContract(app: FastifyInstance): void {
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  for (const [name, schema] of Object.entries(SHARED_SCHEMAS)) app.addSchema({ ...schema, $id: name });
  void app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Verbatim',
        version: '0.1.0',
        description: 'Meeting capture and transcription that never loses a word.',
      },
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'API key from `verbatim keys create` or POST /v1/api-keys',
          },
          metricsToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'the operator’s VERBATIM_METRICS_TOKEN (only for /metrics)',
          },
        },
      },
      security: [{ bearer: [] }],
    },
    // Shared schemas keep their names: `Meeting#` becomes #/components/schemas/Meeting.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
    // A route that declares no schema (the web app's pages and files, this document) is not API.
    transform: ({ schema, url }) => ({ schema: schema ?? { hide: true }, url }),
    transformObject: (document) =>
      'openapiObject' in document ? markOptionalBodies(document.openapiObject) : document.swaggerObject,
  });
}

const OPTIONAL_BODY = 'x-verbatim-optional-body';

/** The generator marks every request body required; a body `jsonBody(…, false)` declared is not. */
function markOptionalBodies<T>(doc: T): T {
  const paths = (doc as { paths?: Record<string, Record<string, unknown>> }).paths ?? {};
  for (const item of Object.values(paths))
    for (const operation of Object.values(item)) {
      const body = (operation as { requestBody?: { required?: boolean; content?: object } }).requestBody;
      const schema = (body?.content as Record<string, { schema?: Record<string, unknown> }> | undefined)?.[
        'application/json'
      ]?.schema;
      if (!body || !schema || !(OPTIONAL_BODY in schema)) continue;
      delete schema[OPTIONAL_BODY];
      body.required = false;
    }
  return doc;
}

/**
 * Routes added inside this plugin see the document's generator (which starts once registered) and
 * still share the root's hooks, parsers and error handler: the plugin does not open a new scope.
 */
export function apiRoutes(register: (app: FastifyInstance) => void): FastifyPluginCallback {
  const plugin: FastifyPluginCallback = (app, _options, done) => {
    register(app);
    done();
  };
  return Object.assign(plugin, { [Symbol.for('skip-override')]: true });
}

/** A JSON response: its description and its body's schema. */
export const json = (description: string, schema: TSchema | object) => ({
  description,
  content: { 'application/json': { schema } },
});

/** A response with no body. */
export const empty = (description: string) => ({ description, type: 'null' });

/** A refusal: the error shape under this status, with what it means. */
export const refusal = (description: string) => json(description, ref('Error'));

/** The refusals every authenticated route may give. */
export const ERRORS = {
  400: refusal('Invalid input'),
  401: refusal('Missing or invalid API key or session'),
  403: refusal(
    'Your role or key scope may not do this (auth.forbidden), or a write with the session cookie lacks its CSRF token (auth.csrf)',
  ),
  404: refusal('No such meeting in this workspace'),
};

/** The `:id` of a path. */
export const ID_PARAMS = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', format: 'uuid' } },
};

/** A request body of JSON; `required` false when it may be left out. */
export const jsonBody = (schema: object, required = true) => ({
  content: { 'application/json': { schema: required ? schema : { ...schema, [OPTIONAL_BODY]: true } } },
});

/** A request body of raw bytes in one of these media types. */
export const bytesBody = (types: readonly string[], description?: string) => ({
  ...(description ? { description } : {}),
  content: Object.fromEntries(types.map((t) => [t, { schema: { type: 'string', format: 'binary' } }])),
});

export type RouteSchema = FastifySchema & {
  summary?: string;
  description?: string;
  security?: Array<Record<string, string[]>>;
};
