/**
 * The route table (issue 35): each route declared once, and what is derived from it (scopes, rate classes, Allow,
 * `limit`) answers as the separate tables before it did.
 */
import { describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type HttpResponse } from '@genservice/core';
import { ROUTE_TABLE } from '../src/http/route-table/index.js';
import { matchRoute } from '../src/http/routes.js';
import type { HttpRequest } from '../src/http/types.js';

const userRoutes = ROUTE_TABLE.filter((r) => r.auth === 'user');

describe('the route table', () => {
  it('gives each user route the scope the former scope table did: generate to what spends or changes, read to the rest', () => {
    const scopes = Object.fromEntries(userRoutes.map((r) => [r.name, r.auth === 'user' ? r.scope : undefined]));
    expect(scopes).toEqual({
      models: 'read',
      list: 'read',
      create: 'generate',
      get: 'read',
      delete: 'generate',
      details: 'read',
      cancel: 'generate',
      quote: 'generate',
      events: 'read',
      deliveries: 'read',
      webhookSecret: 'read',
      rotateWebhookSecret: 'generate',
      // Webhook endpoints (issue 41): the same rule.
      createWebhookEndpoint: 'generate',
      listWebhookEndpoints: 'read',
      getWebhookEndpoint: 'read',
      updateWebhookEndpoint: 'generate',
      deleteWebhookEndpoint: 'generate',
      rotateWebhookEndpointSecret: 'generate',
      webhookEndpointDeliveries: 'read',
      replayWebhookDelivery: 'generate',
      createBatch: 'generate',
      getBatch: 'read',
      batchGenerations: 'read',
      cancelBatch: 'generate',
      balance: 'read',
      usage: 'read',
      keys: 'read',
      // The OpenAI-compatible surface (issue 39): the same rule.
      openaiModels: 'read',
      openaiModel: 'read',
      openaiImages: 'generate',
      openaiImageEdits: 'generate',
      openaiCreateVideo: 'generate',
      openaiListVideos: 'read',
      openaiGetVideo: 'read',
      openaiDeleteVideo: 'generate',
      openaiVideoContent: 'read',
      openaiSpeech: 'generate',
      createUpload: 'generate',
    });
  });

  it('counts creates as create, the event stream and a long-poll as stream, everything else as read', () => {
    const req = (headers: HttpRequest['headers']): HttpRequest => ({ method: 'GET', path: '/', headers });
    const classOf = (headers: HttpRequest['headers']) =>
      Object.fromEntries(userRoutes.map((r) => [r.name, r.auth !== 'user' ? undefined : typeof r.rate === 'function' ? r.rate(req(headers)) : r.rate]));
    const plain = classOf({});
    expect(Object.entries(plain).filter(([, c]) => c !== 'read')).toEqual([
      ['create', 'create'],
      ['events', 'stream'],
      ['createBatch', 'create'],
      ['createUpload', 'create'],
      ['openaiImages', 'create'],
      ['openaiImageEdits', 'create'],
      ['openaiCreateVideo', 'create'],
      ['openaiSpeech', 'create'],
    ]);
    const polled = classOf({ prefer: 'wait=5' });
    expect(Object.entries(polled).filter(([, c]) => c !== 'read')).toEqual([
      ['create', 'create'],
      ['get', 'stream'],
      ['details', 'stream'],
      ['events', 'stream'],
      ['createBatch', 'create'],
      ['createUpload', 'create'],
      ['openaiImages', 'create'],
      ['openaiImageEdits', 'create'],
      ['openaiCreateVideo', 'create'],
      ['openaiGetVideo', 'stream'],
      ['openaiSpeech', 'create'],
    ]);
  });

  it('answers Allow in the order of the table, GET bringing HEAD', () => {
    const allow = (method: string, path: string) => (matchRoute(method, path) as HttpResponse).headers.allow;
    expect(allow('PUT', '/v1/generations')).toBe('GET, HEAD, POST');
    expect(allow('POST', '/v1/generations/abc')).toBe('GET, HEAD, DELETE');
    expect(allow('PUT', '/v1/admin/users/u/keys')).toBe('POST, GET, HEAD');
    expect(allow('POST', '/healthz')).toBe('GET, HEAD');
  });

  it('declares each METHOD and path once', () => {
    const keys = ROUTE_TABLE.map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe('limit, read once for every page of generations', () => {
  const service = createGenerationService({
    providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10 } }),
    runner: { enabled: false },
  });
  const get = (path: string) => service.handle({ method: 'GET', path, headers: { authorization: 'Bearer k', 'content-type': 'application/json' } });

  it('refuses the same values with the same 400 on the list and on a batch\u2019s generations', async () => {
    const created = await service.handle({
      method: 'POST',
      path: '/v1/batches',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: '{"requests":[{"modelId":"m"}]}',
    });
    const { batchId } = JSON.parse(String(created.body)) as { batchId: string };
    for (const bad of ['0', '101', '1000', '-1', '5.0', 'x', '', '+5']) {
      const list = await get(`/v1/generations?limit=${encodeURIComponent(bad)}`);
      const batch = await get(`/v1/batches/${batchId}/generations?limit=${encodeURIComponent(bad)}`);
      expect([list.status, batch.status], bad).toEqual([400, 400]);
      expect(JSON.parse(String(batch.body)), bad).toEqual(JSON.parse(String(list.body)));
      expect(JSON.parse(String(list.body)).error.details).toEqual([{ field: 'limit', code: 'invalid_value', message: 'must be a whole number from 1 to 100' }]);
    }
    for (const good of ['1', '100', '007']) {
      expect((await get(`/v1/generations?limit=${good}`)).status, good).toBe(200);
      expect((await get(`/v1/batches/${batchId}/generations?limit=${good}`)).status, good).toBe(200);
    }
    // As before: the list refuses a parameter given twice, a batch's page takes the first.
    expect((await get('/v1/generations?limit=1&limit=2')).status).toBe(400);
    const firstWins = await get(`/v1/batches/${batchId}/generations?limit=1&limit=x`);
    expect(firstWins.status).toBe(200);
  });
});
