import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startHarness, type Harness } from './support/harness.ts';

/** Every (path, method, statuses) the hand-written document of before issue 34 scope 5 listed. */
const OPERATIONS = JSON.parse(
  fs.readFileSync(new URL('./fixtures/openapi-operations.json', import.meta.url), 'utf8'),
) as Array<{ path: string; method: string; statuses: string[] }>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

void describe('the OpenAPI document (issue 34 scope 5)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    await h?.close();
  });

  void it('lists every path, method and response status it listed before', async () => {
    const doc = (await h.request('GET', '/openapi.json')).json;
    const missing: string[] = [];
    for (const { path, method, statuses } of OPERATIONS) {
      const operation = doc.paths?.[path]?.[method];
      if (!operation) {
        missing.push(`${method.toUpperCase()} ${path}`);
        continue;
      }
      for (const status of statuses)
        if (!operation.responses?.[status]) missing.push(`${method.toUpperCase()} ${path} → ${status}`);
    }
    assert.deepEqual(missing, []);
  });

  void it('is valid OpenAPI 3.1: its fields, its operations, its $refs and its schemas', async () => {
    const doc = (await h.request('GET', '/openapi.json')).json;
    assert.match(doc.openapi, /^3\.1\.\d+$/);
    assert.equal(typeof doc.info?.title, 'string');
    assert.equal(typeof doc.info?.version, 'string');
    const problems: string[] = [];
    const refs: string[] = [];
    const collectRefs = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(collectRefs);
      else if (node && typeof node === 'object')
        for (const [k, v] of Object.entries(node)) {
          if (k === '$ref' && typeof v === 'string') refs.push(v);
          else collectRefs(v);
        }
    };
    collectRefs(doc);
    for (const ref of refs) {
      if (!ref.startsWith('#/')) {
        problems.push(`external $ref ${ref}`);
        continue;
      }
      let node: unknown = doc;
      for (const part of ref.slice(2).split('/'))
        node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
      if (node === undefined) problems.push(`unresolved $ref ${ref}`);
    }
    // Every schema compiles as JSON Schema 2020-12, the dialect OpenAPI 3.1 uses.
    const ajv = new Ajv2020({ strict: false });
    ajv.addFormat('uuid', true).addFormat('date-time', true).addFormat('uri', true);
    ajv.addSchema(doc, 'doc');
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      assert.ok(path.startsWith('/'), path);
      for (const [method, op] of Object.entries(item)) {
        if (!METHODS.includes(method)) continue;
        const operation = op as { responses?: Record<string, { description?: unknown; content?: unknown }> };
        if (!operation.responses || Object.keys(operation.responses).length === 0)
          problems.push(`${method} ${path}: no responses`);
        for (const [status, response] of Object.entries(operation.responses ?? {})) {
          if (!/^([1-5]\d\d|[1-5]XX|default)$/.test(status))
            problems.push(`${method} ${path}: status ${status}`);
          if (typeof response.description !== 'string')
            problems.push(`${method} ${path} ${status}: no description`);
          const content = (response.content ?? {}) as Record<string, { schema?: unknown }>;
          for (const [type, media] of Object.entries(content)) {
            if (media.schema === undefined) continue;
            const pointer = ['paths', path, method, 'responses', status, 'content', type, 'schema']
              .map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1'))
              .join('/');
            try {
              ajv.compile({ $ref: `doc#/${pointer}` });
            } catch (e) {
              problems.push(`${method} ${path} ${status}: ${(e as Error).message}`);
            }
          }
        }
      }
    }
    assert.deepEqual(problems, []);
  });
});
