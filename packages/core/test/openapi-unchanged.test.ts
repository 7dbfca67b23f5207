import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger } from '@genservice/core';
import { openApiFixtureModels } from './fixtures/openapi-models.js';

/**
 * The served OpenAPI document is derived from the route table. `fixtures/openapi-before.json` is the document the
 * service served before the route table existed (commit e3137eb, written with these models and options), plus only
 * the additions made on purpose since, regenerated from the table each time: issue 37 the `maximum` of token amounts
 * (MAX_TOKENS) in four admin schemas; issue 38 the failure code `storage_unavailable` and `POST /v1/uploads` (raw or
 * multipart); issue 40 the admin organisation operations (and `PATCH /v1/admin/organizations/{organizationId}`, its limits changed), `groupBy=member` and `userId` on usage, the organisation
 * audit actions, `maxInFlight` of admin keys, a create's `priority` and `deadline`, a quote's `priority` and
 * `multiplier`, the key scope `priority`, and the `queue` of a pending generation's details (and the stream's
 * `event: queue`); issue 41 the `/v1/webhook-endpoints` operations and schemas, the audit action
 * `webhook_endpoint.disable`, and the console's reads (`GET /v1/keys`, `GET /v1/admin/users...`, `GET /v1/admin/queue`); the audit action `webhook_delivery.replay` (an admin's replay, audited).
 * The table must describe exactly the same paths, operations and schemas.
 */
const before = JSON.parse(readFileSync(new URL('./fixtures/openapi-before.json', import.meta.url), 'utf8')) as Record<string, any>;

async function served(): Promise<Record<string, any>> {
  const service = createGenerationService({
    providers: [{ models: openApiFixtureModels, generate: async () => ({ text: 'x' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10 } }),
    publicUrl: 'https://api.example.com/gen',
  });
  const res = await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} });
  expect(res.status).toBe(200);
  return JSON.parse(String(res.body));
}

describe('the OpenAPI document derived from the route table', () => {
  it('has the same paths and operations as before', async () => {
    const doc = await served();
    const ops = (d: Record<string, any>) => Object.entries(d.paths as Record<string, object>).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`)).sort();
    expect(ops(doc)).toEqual(ops(before));
  });

  it('has the same operation objects (parameters, request bodies, answers by status, security) as before', async () => {
    const doc = await served();
    for (const [path, item] of Object.entries(before.paths as Record<string, Record<string, unknown>>)) {
      for (const [method, op] of Object.entries(item)) expect(doc.paths[path][method], `${method} ${path}`).toEqual(op);
    }
  });

  it('has the same components (schemas, parameters, responses, security schemes) as before', async () => {
    const doc = await served();
    expect(doc.components).toEqual(before.components);
    expect(doc.openapi).toBe(before.openapi);
    expect(doc.security).toEqual(before.security);
  });
});
