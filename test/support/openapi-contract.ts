import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: its function is the default export's default under Node's ESM interop.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020,
) => Ajv2020;

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { responses?: Record<string, Response> }>>;
  components?: { schemas?: Record<string, unknown> };
};
type Response = { content?: Record<string, { schema?: unknown }> };

const DOC_ID = 'verbatim-openapi.json';

/**
 * The API's served OpenAPI document as a checker of responses: every JSON response a test gets
 * through the harness must match the schema the document gives its route and status (issue 34
 * scope 5). A success status the operation does not list fails; an error status it does not list
 * must still have the error shape.
 */
export class ResponseContract {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly routes: Array<{ template: string; pattern: RegExp; literal: number }>;

  constructor(private readonly doc: Doc) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, DOC_ID);
    this.routes = Object.keys(doc.paths).map((template) => ({
      template,
      pattern: new RegExp(
        '^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$',
      ),
      literal: template.replace(/\{[^}]+\}/g, '').length,
    }));
  }

  /** The problems with one response, or [] when it matches (or the route is not in the document). */
  problems(method: string, url: string, status: number, contentType: string, body: string): string[] {
    const path = url.split('?')[0] ?? url;
    const route = this.routes.filter((r) => r.pattern.test(path)).sort((a, b) => b.literal - a.literal)[0];
    if (!route) return [];
    const operation = this.doc.paths[route.template]?.[method.toLowerCase()];
    if (!operation) return [];
    const where = `${method.toUpperCase()} ${route.template} → ${status}`;
    const declared = operation.responses?.[String(status)];
    if (!declared) {
      if (status < 400) return [`${where}: the document lists no such status`];
      return this.check(where, '#/components/schemas/Error', contentType, body);
    }
    const schema = declared.content?.['application/json']?.schema;
    if (!schema) return [];
    const pointer = ['paths', route.template, method.toLowerCase(), 'responses', String(status)]
      .map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1'))
      .join('/');
    return this.check(where, `#/${pointer}/content/application~1json/schema`, contentType, body);
  }

  private check(where: string, pointer: string, contentType: string, body: string): string[] {
    if (!contentType.startsWith('application/json')) return [];
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return [`${where}: the body is not JSON`];
    }
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOC_ID}${pointer}` });
      this.compiled.set(pointer, validate);
    }
    if (validate(json)) return [];
    return (validate.errors ?? []).map((e) => `${where}: ${e.instancePath || '/'} ${e.message ?? ''}`);
  }
}
