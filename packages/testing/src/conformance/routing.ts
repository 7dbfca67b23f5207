import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import type { User } from './fixture.js';
import { call, chunkedBody } from './http.js';
import { bodyOfSize, JSON_TYPE, mismatches, type ModeContext } from './kit.js';

/** The routes themselves: models, balance, 404 and 405, HEAD, health checks, request ids, the OpenAPI document. */
export function defineRoutingTests({ fx, mode }: ModeContext): void {
  describe('models, balance and routing', () => {
    it('GET /v1/models lists every model with exactly the contract fields', async () => {
      const user = await fx.user();
      const r = await fx.call('/v1/models', { headers: user.auth });
      expect(r.status).toBe(200);
      expect(r.contentType).toMatch(JSON_TYPE);
      const expected = fx.models.map((m) => ({
        modelId: m.modelId,
        title: m.title,
        resultType: m.resultType,
        estimatedGenerationTime: m.estimatedGenerationTime,
        settings: m.settings.map((s) => ({
          name: s.name,
          title: s.title,
          fieldType: s.fieldType,
          ...(s.required ? { required: true } : {}),
          ...(s.options ? { options: s.options } : {}),
        })),
      }));
      expect(r.body).toStrictEqual({ models: expected });
    });

    it('GET /v1/balance answers the caller balance', async () => {
      const user = await fx.user(123);
      const r = await fx.call('/v1/balance', { headers: user.auth });
      expect(r.status).toBe(200);
      expect(r.contentType).toMatch(JSON_TYPE);
      expect(r.body).toStrictEqual({ balance: 123 });
    });

    it('an unknown path under /v1 is a JSON 404', async () => {
      const user = await fx.user();
      for (const path of ['/v1/nope', '/v1', '/v1/', '/v1/generations/a/b/c', '/v1/models/extra']) {
        expectError(await fx.call(path, { headers: user.auth }), 404, 'not_found');
      }
    });

    it('a known path with another method is a JSON 405 naming the allowed method', async () => {
      const user = await fx.user();
      const cases: Array<[string, string, string]> = [
        ['DELETE', '/v1/models', 'GET'],
        ['PUT', '/v1/generations', 'POST'],
        ['DELETE', '/v1/generations', 'POST'],
        ['GET', '/v1/quotes', 'POST'],
        ['POST', '/v1/balance', 'GET'],
        ['PATCH', `/v1/generations/${'a'.repeat(22)}`, 'GET'],
      ];
      for (const [method, path, allowed] of cases) {
        const r = await fx.call(path, { method, headers: { ...user.auth, 'content-type': 'application/json' }, body: method === 'GET' ? undefined : '{}' });
        expectError(r, 405, 'method_not_allowed');
        expect(r.headers.get('allow') ?? '', `${method} ${path}`).toContain(allowed);
      }
    });

    it('HEAD is answered like GET without a body, and still needs a key', async () => {
      const user = await fx.user();
      const r = await fx.call('/v1/models', { method: 'HEAD', headers: user.auth });
      expect(r.status).toBe(200);
      expect(r.contentType).toMatch(JSON_TYPE);
      expect(r.text).toBe('');
      expect((await fx.call('/v1/models', { method: 'HEAD' })).status).toBe(401);
    });

    it('GET /healthz and /readyz answer without a key: 200 while the store, ledger and queue answer', async () => {
      const live = await fx.call('/healthz');
      expect(live.status).toBe(200);
      expect(live.contentType).toMatch(JSON_TYPE);
      expect(live.body).toStrictEqual({ status: 'ok' });
      const ready = await fx.call('/readyz');
      expect(ready.status, ready.text).toBe(200);
      expect(ready.contentType).toMatch(JSON_TYPE);
      expect(ready.body.status).toBe('ready');
      expect(ready.body.checks).toMatchObject({ store: 'ok', ledger: 'ok' });
      expect((await fx.call('/readyz', { method: 'HEAD' })).status).toBe(200);
      expectError(await fx.call('/readyz', { method: 'POST', body: '' }), 405, 'method_not_allowed');
    });

    it('every answer carries X-Request-Id: an acceptable one is echoed, anything else is replaced by a new one', async () => {
      const user = await fx.user();
      const given = 'req-1.2:3_abc';
      const answers = [
        await fx.call('/v1/models', { headers: { ...user.auth, 'x-request-id': given } }),
        await fx.call('/v1/models', { headers: { 'x-request-id': given } }),
        await fx.call('/v1/nope', { headers: { ...user.auth, 'x-request-id': given } }),
        await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json', 'x-request-id': given }, body: '{' }),
        await fx.call('/healthz', { headers: { 'x-request-id': given } }),
      ];
      expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 400, 200]);
      for (const r of answers) expect(r.headers.get('x-request-id')).toBe(given);
      const made = await fx.call('/v1/models', { headers: user.auth });
      expect(made.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9_-]{22}$/);
      for (const bad of ['a'.repeat(129), 'has space', 'semi;colon', '<script>']) {
        const r = await fx.call('/v1/models', { headers: { ...user.auth, 'x-request-id': bad } });
        const id = r.headers.get('x-request-id');
        expect(id, bad).toMatch(/^[A-Za-z0-9_-]{22}$/);
      }
      const other = await fx.call('/v1/models', { headers: user.auth });
      expect(other.headers.get('x-request-id')).not.toBe(made.headers.get('x-request-id'));
    });

    it('GET /v1/openapi.json serves the OpenAPI document', async () => {
      const r = await fx.call('/v1/openapi.json');
      expect(r.status).toBe(200);
      expect(r.contentType).toMatch(JSON_TYPE);
      expect(typeof r.body.openapi).toBe('string');
      expect(Object.keys(r.body.paths ?? {}).some((p) => p.includes('/v1/generations'))).toBe(true);
    });

    if (mode.prefix) {
      it('answers only under its prefix', async () => {
        const user = await fx.user();
        const outside = await call(`${fx.origin}/v1/models`, { headers: user.auth });
        expect(outside.status === 200 && Array.isArray(outside.body?.models)).toBe(false);
      });
    }
  });
}

/** Every route refuses a missing, malformed or unknown key, before it looks at the body. */
export function defineAuthenticationTests({ fx }: ModeContext): void {
  describe('authentication', () => {
    let owner: User;
    let generationId: string;
    const validCreate = JSON.stringify({ modelId: 'noop' });

    beforeAll(async () => {
      owner = await fx.user();
      const r = await fx.create(owner, { modelId: 'noop' });
      expect(r.status).toBe(201);
      generationId = r.body.generationId;
    });

    function badHeaders(): Array<[string, Record<string, string>]> {
      return [
        ['no Authorization header', {}],
        ['an empty Authorization header', { authorization: '' }],
        ['"Bearer" alone', { authorization: 'Bearer' }],
        ['"Bearer" and blanks', { authorization: 'Bearer    ' }],
        ['a Basic credential', { authorization: `Basic ${Buffer.from(`${owner.userId}:${owner.key}`).toString('base64')}` }],
        ['the key without a scheme', { authorization: owner.key }],
        ['the key under another scheme', { authorization: `Token ${owner.key}` }],
        ['an unknown key', { authorization: `Bearer gs_test_${randomBytes(18).toString('base64url')}` }],
        ['the key with a character added', { authorization: `Bearer ${owner.key}x` }],
        ['the key with a character removed', { authorization: `Bearer ${owner.key.slice(0, -1)}` }],
        ['the key and another word', { authorization: `Bearer ${owner.key} ${owner.key}` }],
      ];
    }

    const endpoints: Array<[string, () => { method: string; path: string; body?: string }]> = [
      ['GET /v1/models', () => ({ method: 'GET', path: '/v1/models' })],
      ['POST /v1/generations', () => ({ method: 'POST', path: '/v1/generations', body: validCreate })],
      ['GET /v1/generations/:id', () => ({ method: 'GET', path: `/v1/generations/${generationId}` })],
      ['POST /v1/generations/:id/cancel', () => ({ method: 'POST', path: `/v1/generations/${generationId}/cancel` })],
      ['GET /v1/balance', () => ({ method: 'GET', path: '/v1/balance' })],
    ];

    for (const [name, endpoint] of endpoints) {
      it(`${name} answers 401 unauthorized to every missing, malformed, non-Bearer or unknown key`, async () => {
        const { method, path, body } = endpoint();
        const results = [];
        for (const [label, headers] of badHeaders()) {
          const reply = await fx.call(path, {
            method,
            headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
            body,
          });
          results.push({ label, reply, status: 401, code: 'unauthorized' });
        }
        expect(mismatches(results)).toEqual([]);
        expectError(results[0]!.reply, 401, 'unauthorized');
      });
    }

    it('a revoked key is refused on its next request', async () => {
      const user = await fx.user();
      expect((await fx.call('/v1/balance', { headers: user.auth })).status).toBe(200);
      await fx.keys.revokeKey(user.key);
      expectError(await fx.call('/v1/balance', { headers: user.auth }), 401, 'unauthorized');
    });

    it('checks the key before looking at the body', async () => {
      const limit = fx.service.bodyLimit;
      const unknown = { authorization: `Bearer gs_test_${randomBytes(18).toString('base64url')}` };
      const cases: Array<[string, Record<string, string>, string | Uint8Array | ReadableStream<Uint8Array>]> = [
        ['invalid JSON, no key', { 'content-type': 'application/json' }, '{"modelId":'],
        ['invalid JSON, unknown key', { ...unknown, 'content-type': 'application/json' }, '{bad'],
        ['a JSON array, no key', { 'content-type': 'application/json' }, '[]'],
        ['a body over the limit, no key', { 'content-type': 'application/json' }, bodyOfSize(limit + 1)],
        ['a chunked body over the limit, no key', { 'content-type': 'application/json' }, chunkedBody(bodyOfSize(limit + 1))],
        ['a text/plain body, no key', { 'content-type': 'text/plain' }, '{"modelId":"noop"}'],
        ['no content type, no key', {}, new TextEncoder().encode('{"modelId":"noop"}')],
        ['invalid settings, unknown key', { ...unknown, 'content-type': 'application/json' }, '{"modelId":"settings","settings":{"x":1}}'],
      ];
      const results = [];
      for (const [label, headers, body] of cases) {
        results.push({ label, reply: await fx.call('/v1/generations', { method: 'POST', headers, body }), status: 401, code: 'unauthorized' });
      }
      expect(mismatches(results)).toEqual([]);
    });
  });
}

/** Two Authorization headers are refused, whatever they hold. */
export function defineRepeatedAuthorizationTests({ fx }: ModeContext): void {
  describe('repeated Authorization headers', () => {
    it('refuses a request with two Authorization headers, even when both are valid', async () => {
      const user = await fx.user(10);
      const url = new URL(`${fx.baseUrl}/v1/balance`);
      const { Socket } = await import('node:net');
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = new Socket();
        let text = '';
        socket.on('data', (d) => (text += d.toString('latin1')));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
        socket.connect(Number(url.port), url.hostname, () => {
          socket.write(
            `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${user.key}\r\nAuthorization: Bearer ${user.key}\r\nConnection: close\r\n\r\n`,
          );
        });
      });
      expect(answer.split('\r\n')[0]).toMatch(/^HTTP\/1\.1 401 /);
      expect((await fx.call('/v1/balance', { headers: user.auth })).status).toBe(200);
    });
  });
}
