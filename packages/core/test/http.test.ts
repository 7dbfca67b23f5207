import { describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type HttpRequest } from '@genservice/core';
import type { HttpResponse } from '@genservice/core';

const service = createGenerationService({
  providers: [
    {
      models: [
        {
          modelId: 'm',
          title: 'M',
          resultType: 'text',
          estimatedGenerationTime: 1,
          settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
          price: 5,
        },
      ],
      generate: async () => ({ text: 'ok' }),
    },
  ],
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'good-key', userId: 'u1' }] }),
  ledger: new MemoryLedger({ balances: { u1: 100 } }),
  limits: { bodyBytes: 1000 },
});

const auth = { authorization: 'Bearer good-key' };
const post = (body: string | Uint8Array, headers: Record<string, string> = {}): HttpRequest => ({
  method: 'POST',
  path: '/v1/generations',
  headers: { ...auth, 'content-type': 'application/json', ...headers },
  body,
});
const parse = (b: HttpResponse['body']): { error: { code: string; details?: Array<{ field: string; code: string }> } } => {
  if (typeof b !== 'string' && !(b instanceof Uint8Array)) throw new Error('a JSON answer, not a stream, was expected');
  return JSON.parse(typeof b === 'string' ? b : Buffer.from(b).toString());
};

describe('HttpHandler', () => {
  it('rejects every malformed Authorization header with 401 before reading the body', async () => {
    for (const authorization of [undefined, '', 'Bearer', 'Bearer ', 'Basic Z29vZC1rZXk=', 'good-key', 'Bearer bad', 'Bearer good-key extra', 'bearer  wrong']) {
      const res = await service.handle({ method: 'POST', path: '/v1/generations', headers: { authorization, 'content-type': 'text/plain' }, body: '{not json' });
      expect(res.status, String(authorization)).toBe(401);
      expect(parse(res.body).error.code).toBe('unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    // The scheme is case-insensitive.
    expect((await service.handle({ method: 'GET', path: '/v1/models', headers: { authorization: 'bearer good-key' } })).status).toBe(200);
  });

  it('maps body problems to their statuses', async () => {
    expect((await service.handle(post('{"modelId":'))).status).toBe(400);
    expect(parse((await service.handle(post('{"modelId":'))).body).error.code).toBe('invalid_json');
    expect(parse((await service.handle(post(new Uint8Array([0x7b, 0xff, 0x7d])))).body).error.code).toBe('invalid_json');
    expect(parse((await service.handle(post('[]'))).body).error.code).toBe('invalid_request');
    expect(parse((await service.handle(post('null'))).body).error.code).toBe('invalid_request');
    const missing = parse((await service.handle(post('{"settings":{}}'))).body);
    expect(missing.error).toMatchObject({ code: 'invalid_request', details: [{ field: 'modelId', code: 'required' }] });
    expect(parse((await service.handle(post('{"modelId":5}'))).body).error.details?.[0]).toMatchObject({ field: 'modelId', code: 'invalid_type' });
    expect(parse((await service.handle(post('{"modelId":"m","settings":[1]}'))).body).error.details?.[0]).toMatchObject({ field: 'settings' });
    expect((await service.handle(post('{"modelId":"nope"}'))).status).toBe(404);
    expect((await service.handle(post('{"modelId":"m"}', { 'content-type': 'text/plain' }))).status).toBe(415);
    expect((await service.handle({ ...post('{"modelId":"m"}'), headers: auth })).status).toBe(415);
    expect((await service.handle(post(`{"modelId":"m","settings":{"prompt":"${'x'.repeat(2000)}"}}`))).status).toBe(413);
    expect((await service.handle(post('{}', { 'content-length': '5000' }))).status).toBe(413);
    expect((await service.handle({ ...post(''), bodyError: 'invalid_json' })).status).toBe(400);
    expect((await service.handle({ ...post(''), bodyError: 'payload_too_large' })).status).toBe(413);
    // A host parser's lower limit is the one named; a higher or nonsense one is not believed.
    const applied = await service.handle({ ...post(''), bodyError: 'payload_too_large', bodyLimitApplied: 100 });
    expect((JSON.parse(String(applied.body)) as { error: { message: string } }).error.message).toBe('The request body is larger than 100 bytes.');
    for (const bogus of [10 ** 12, -1, Number.NaN]) {
      const r = await service.handle({ ...post(''), bodyError: 'payload_too_large', bodyLimitApplied: bogus });
      expect((JSON.parse(String(r.body)) as { error: { message: string } }).error.message).toBe(`The request body is larger than ${service.bodyLimit} bytes.`);
    }
    // A body that did not arrive in time: 408 and the connection closes, before anything else is looked at.
    const late = await service.handle({ method: 'POST', path: '/v1/generations', headers: {}, bodyError: 'timeout' });
    expect(late.status).toBe(408);
    expect(late.headers.connection).toBe('close');
    expect(parse(late.body).error.code).toBe('request_timeout');
    // Compressed bodies: 415, whatever the encoding; identity is no encoding.
    for (const encoding of ['gzip', 'deflate', 'br', 'x-gzip', 'gzip, identity']) {
      const r = await service.handle(post('{"modelId":"m","settings":{"prompt":"a"}}', { 'content-encoding': encoding }));
      expect(r.status, encoding).toBe(415);
    }
    expect((await service.handle(post('{"modelId":"m","settings":{"prompt":"a"}}', { 'content-encoding': 'identity' }))).status).toBe(201);
    expect((await service.handle(post('{"modelId":"m","settings":{"prompt":"a"}}', { 'content-type': 'application/json; charset=utf-8' }))).status).toBe(201);
  });

  it('accepts a body a host parser already parsed', async () => {
    const res = await service.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'content-type': 'application/json' }, parsedBody: { modelId: 'm', settings: { prompt: 'p' } } });
    expect(res.status).toBe(201);
  });

  it('answers unknown routes 404 and wrong methods 405, both as JSON errors', async () => {
    const nf = await service.handle({ method: 'GET', path: '/v2/models', headers: auth });
    expect(nf.status).toBe(404);
    expect(nf.headers['content-type']).toMatch(/^application\/json/);
    const na = await service.handle({ method: 'DELETE', path: '/v1/models', headers: auth });
    expect(na.status).toBe(405);
    expect(na.headers.allow).toBe('GET, HEAD');
    const head = await service.handle({ method: 'HEAD', path: '/v1/models', headers: auth });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
  });

  it('answers an unknown and a malformed generation id exactly alike', async () => {
    const a = await service.handle({ method: 'GET', path: '/v1/generations/AAAAAAAAAAAAAAAAAAAAAA', headers: auth });
    const b = await service.handle({ method: 'GET', path: '/v1/generations/%E0%A4%A', headers: auth });
    const c = await service.handle({ method: 'GET', path: '/v1/generations/..%2F..%2Fetc', headers: auth });
    expect([a.status, b.status, c.status]).toEqual([404, 404, 404]);
    expect(b.body).toEqual(a.body);
    expect(c.body).toEqual(a.body);
  });

  it('never shows a stack or an internal message on a 500', async () => {
    const broken = createGenerationService({
      providers: [],
      apiKeys: { resolve: async () => { throw new Error('db password is hunter2'); } },
    });
    const res = await broken.handle({ method: 'GET', path: '/v1/models', headers: auth });
    expect(res.status).toBe(500);
    expect(String(res.body)).not.toMatch(/hunter2|at |Error:/);
    expect(parse(res.body).error.code).toBe('internal');
  });

  it('serves an OpenAPI document with every route and per-model settings', async () => {
    const res = await service.handle({ method: 'GET', path: '/v1/openapi.json', headers: {} });
    const doc = JSON.parse(String(res.body));
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/v1/balance',
        '/v1/keys',
        '/v1/batches',
        '/v1/batches/{id}',
        '/v1/batches/{id}/cancel',
        '/v1/batches/{id}/generations',
        '/v1/files/{key}',
        '/v1/generations',
        '/v1/generations/{id}',
        '/v1/generations/{id}/cancel',
        '/v1/generations/{id}/details',
        '/v1/generations/{id}/events',
        '/v1/generations/{id}/webhook-deliveries',
        '/v1/models',
        '/v1/openapi.json',
        '/v1/quotes',
        '/v1/uploads',
        '/v1/usage',
        '/v1/webhooks/secret',
        '/v1/webhooks/secret/rotate',
        '/v1/webhook-endpoints',
        '/v1/webhook-endpoints/{id}',
        '/v1/webhook-endpoints/{id}/rotate-secret',
        '/v1/webhook-endpoints/{id}/deliveries',
        '/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/replay',
        '/v1/admin/users',
        '/v1/admin/users/{userId}/credits',
        '/v1/admin/users/{userId}/keys',
        '/v1/admin/keys/{keyId}',
        '/v1/admin/audit',
        '/v1/admin/organizations',
        '/v1/admin/organizations/{organizationId}',
        '/v1/admin/organizations/{organizationId}/members',
        '/v1/admin/organizations/{organizationId}/members/{userId}',
        '/v1/admin/organizations/{organizationId}/usage',
        '/v1/admin/users/{userId}/limits',
        // The operator console's reads (issue 41).
        '/v1/admin/users/{userId}',
        '/v1/admin/users/{userId}/usage',
        '/v1/admin/users/{userId}/generations',
        '/v1/admin/users/{userId}/generations/{id}',
        '/v1/admin/users/{userId}/webhook-endpoints',
        '/v1/admin/users/{userId}/webhook-endpoints/{id}/deliveries',
        '/v1/admin/users/{userId}/webhook-endpoints/{id}/deliveries/{deliveryId}/replay',
        '/v1/admin/queue',
      ].sort(),
    );
    const body = doc.paths['/v1/generations'].post.requestBody.content['application/json'].schema;
    expect(body.oneOf[0].properties.settings.required).toEqual(['prompt']);
  });
});

describe('HttpHandler with hostile bodies', () => {
  it('answers deeply nested JSON with 400, never a crash', async () => {
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    const big = createGenerationService({
      providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'prompt', title: 'P', fieldType: 'text' }], price: 1 }], generate: async () => ({ text: 'x' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'good-key', userId: 'u1' }] }),
      ledger: new MemoryLedger({ balances: { u1: 100 } }),
      limits: { bodyBytes: 4 * 1024 * 1024 },
    });
    for (const body of [deep, `{"modelId":"m","settings":{"prompt":${deep}}}`]) {
      const res = await big.handle(post(body));
      expect(res.status).toBe(400);
      expect(['invalid_json', 'invalid_request', 'invalid_settings']).toContain(parse(res.body).error.code);
    }
    const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, 1]));
    const res = await big.handle(post(JSON.stringify({ modelId: 'm', settings: many })));
    expect(res.status).toBe(400);
    const details = parse(res.body).error.details!;
    expect(details).toHaveLength(51);
    expect(details.at(-1)).toMatchObject({ code: 'too_many_errors' });
  });

  it('refuses a `__proto__` setting by name (kept as an own key, never the prototype of the settings)', async () => {
    const s = createGenerationService({
      providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'prompt', title: 'P', fieldType: 'text' }], price: 1 }], generate: async () => ({ text: 'x' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'good-key', userId: 'u1' }] }),
      ledger: new MemoryLedger({ balances: { u1: 100 } }),
    });
    const res = await s.handle(post('{"modelId":"m","settings":{"prompt":"a","__proto__":{"prompt":"b"}}}'));
    expect(res.status).toBe(400);
    const error = parse(res.body).error;
    expect(error.code).toBe('invalid_settings');
    expect(JSON.stringify(error)).toContain('__proto__');
  });
});

describe('HttpRequest.baseUrl', () => {
  it('is read only to build a file URL under trustRequestHost, never on other requests', async () => {
    let reads = 0;
    const baseUrl = (): string => {
      reads++;
      return 'http://host.test/api';
    };
    expect((await service.handle({ method: 'GET', path: '/v1/models', headers: auth, baseUrl })).status).toBe(200);
    const created = await service.handle({ ...post('{"modelId":"m","settings":{"prompt":"a"}}'), baseUrl });
    expect(created.status).toBe(201);
    const id = (JSON.parse(String(created.body)) as { generationId: string }).generationId;
    expect((await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: auth, baseUrl })).status).toBe(200);
    expect(reads).toBe(0);
  });
});
