import { describe, expect, it } from 'vitest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, SERVED_ROUTES } from '@genservice/core';
import { openApiFixtureModels } from './fixtures/openapi-models.js';

const models = openApiFixtureModels;

const service = createGenerationService({
  providers: [{ models, generate: async () => ({ text: 'x' }) }],
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
  ledger: new MemoryLedger({ balances: { u: 10 } }),
  publicUrl: 'https://api.example.com/gen',
});

async function document(): Promise<Record<string, any>> {
  const res = await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} });
  expect(res.status).toBe(200);
  return JSON.parse(String(res.body));
}

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(await document());
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('lists every route the handler serves, and the handler serves every route it lists', async () => {
    const doc = await document();
    const listed = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect([...listed].sort()).toEqual([...SERVED_ROUTES].sort());
    // Each listed route is routed by the handler (anything but the 404 of an unknown path or a 405).
    for (const route of listed) {
      const [method, path] = route.split(' ') as [string, string];
      const concrete = path.replace('{id}', 'AAAAAAAAAAAAAAAAAAAAAA').replace('{key}', 'k');
      const res = await service.handle({ method, path: concrete, headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: '{}' });
      expect(res.status, route).not.toBe(405);
      // A 404 here must be the domain's (no such generation or file), never "no such endpoint".
      if (res.status === 404) expect(String(res.body), route).not.toContain('No such endpoint');
    }
  });

  it('describes each model\'s settings with the same schema that validates them', async () => {
    const doc = await document();
    const variants = doc.paths['/v1/generations'].post.requestBody.content['application/json'].schema.oneOf as Array<Record<string, any>>;
    const img = variants.find((v) => v.properties.modelId.const === 'img')!;
    expect(img.required).toEqual(['modelId', 'settings']);
    const settings = img.properties.settings;
    expect(settings.required).toEqual(['prompt']);
    expect(settings.additionalProperties).toBe(false);
    expect(settings.properties.size.enum).toEqual(['256', '512']);
    expect(settings.properties.images.type).toBe('array');
    expect(settings.properties.images.maxItems).toBe(10);
    const txt = variants.find((v) => v.properties.modelId.const === 'txt')!;
    expect(txt.required).toEqual(['modelId']);
  });

  it('gives every operation a summary, description and tag, and every answer its headers and schema', async () => {
    const doc = await document();
    const codes = doc.components.schemas.Error.properties.error.properties.code.enum as string[];
    for (const code of ['invalid_json', 'invalid_request', 'invalid_settings', 'unauthorized', 'insufficient_funds', 'budget_exceeded', 'conflict', 'model_not_found', 'not_found', 'payload_too_large', 'request_timeout', 'unsupported_media_type', 'method_not_allowed', 'idempotency_conflict', 'idempotency_mismatch', 'forbidden', 'rate_limited', 'unavailable', 'internal']) {
      expect(codes).toContain(code);
    }
    expect(doc.components.schemas.Generation.discriminator.propertyName).toBe('status');
    expect(doc.components.schemas.Generation.oneOf).toHaveLength(4);
    // The poll answers exactly the contract's per-status shapes; the details view has its own operation, also per status.
    expect(doc.paths['/v1/generations/{id}'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Generation' });
    expect(doc.paths['/v1/generations/{id}'].get.parameters.map((p: { name: string }) => p.name)).not.toContain('include');
    expect(doc.paths['/v1/generations/{id}/details'].get.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/GenerationDetails' });
    expect(doc.components.schemas.GenerationDetails.oneOf).toHaveLength(4);
    expect(doc.components.schemas.GenerationDetailsCompleted.required).toEqual(expect.arrayContaining(['status', 'result', 'price', 'generationId']));
    expect(doc.components.schemas.GenerationDetailsPending.properties.result).toBeUndefined();
    expect(doc.components.schemas.Error.properties.error.properties.details.items.properties.code.enum).toContain('invalid_option');
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, o] of Object.entries(ops)) {
        const where = `${method} ${path}`;
        expect(o.summary, where).toBeTypeOf('string');
        expect(o.description, where).toBeTypeOf('string');
        expect(o.tags?.length, where).toBeGreaterThan(0);
        for (const [status, answer] of Object.entries(o.responses as Record<string, any>)) {
          // 416 and 204 have no body by definition.
          if (status !== '416' && status !== '204') expect(answer.content, `${where} ${status}`).toBeDefined();
          if (status === '401') expect(answer.headers['WWW-Authenticate'], where).toBeDefined();
          if (status === '405') expect(answer.headers.Allow, where).toBeDefined();
          if (status === '429' || status === '503') expect(answer.headers['Retry-After'], where).toBeDefined();
        }
      }
    }
    const img = doc.paths['/v1/generations'].post.requestBody.content['application/json'].schema.oneOf.find((v: any) => v.properties.modelId.const === 'img');
    expect(img.properties.metadata.type).toBe('object');
    expect(img.properties.webhook.properties.url.type).toBe('string');
  });
});
