import { randomBytes } from 'node:crypto';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { FileUrlSigner } from '@genservice/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gzipSync } from 'node:zlib';
import { defineBatchTests } from './batches.js';
import { expectError } from './expect-error.js';
import { chunkedBody, call, rawExchange, type Reply } from './http.js';
import { CORS_ORIGIN, createFixture, IMAGE_BYTES, PREVIEW_BYTES, VIDEO_BYTES, type Fixture, type User } from './fixture.js';
import type { MountFn, MountOptions } from './types.js';

const JSON_TYPE = /^application\/json\b/i;
const STATUS_RANK: Record<string, number> = { pending: 0, processing: 1, completed: 2, failed: 2 };

export { expectError } from './expect-error.js';

/** `settings.refs.0` and `refs[0]` both name the setting `refs`. */
function settingOf(field: string): string {
  return field.replace(/^settings\./, '').split(/[.[]/)[0]!;
}

/** A create body of exactly `size` bytes, valid JSON for the `noop` model (core ignores unknown top-level keys). */
function bodyOfSize(size: number): string {
  const head = '{"modelId":"noop","pad":"';
  const tail = '"}';
  return head + 'a'.repeat(size - head.length - tail.length) + tail;
}

async function inPool<T, R>(items: T[], width: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await work(items[i]!, i);
      }
    }),
  );
  return out;
}

/** Mismatches of a list of checks, so one failing case names itself instead of hiding the rest. */
function mismatches(results: Array<{ label: string; reply: Reply; status: number; code?: string }>): string[] {
  return results
    .filter((r) => r.reply.status !== r.status || (r.code !== undefined && r.reply.body?.error?.code !== r.code) || !JSON_TYPE.test(r.reply.contentType))
    .map((r) => `${r.label}: expected ${r.status}${r.code ? ` ${r.code}` : ''}, got ${r.reply.status} ${r.reply.text.slice(0, 200)}`);
}

export function defineModeTests(mount: MountFn, mode: MountOptions, options: { heavy: boolean }): void {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await createFixture(mount, mode);
  });
  afterAll(async () => {
    await fx?.close();
  });

  /** Runs `work` with the `held` model's gate, and leaves no held generation behind. */
  async function withHeld<T>(user: User, work: () => Promise<T>, ids: string[]): Promise<T> {
    try {
      return await work();
    } finally {
      fx.gate.open();
      for (const id of ids) await fx.terminal(user, id).catch(() => undefined);
      fx.gate.close();
    }
  }

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

  describe('POST /v1/generations', () => {
    it('answers 201 with only { generationId }, a URL-safe id of at least 122 random bits', async () => {
      const user = await fx.user();
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) {
        const r = await fx.create(user, { modelId: 'noop' });
        expect(r.status, r.text).toBe(201);
        expect(r.contentType).toMatch(JSON_TYPE);
        expect(Object.keys(r.body)).toEqual(['generationId']);
        expect(r.body.generationId).toMatch(/^[A-Za-z0-9_-]{21,}$/);
        ids.add(r.body.generationId);
      }
      expect(ids.size).toBe(5);
    });

    it('answers before the provider has finished, and the work goes on in the background', async () => {
      const user = await fx.user();
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          expect(r.status, r.text).toBe(201);
          ids.push(r.body.generationId);
          // The gate is closed, so the provider cannot have returned before this answer.
          const first = await fx.get(user, r.body.generationId);
          expect(first.body).toStrictEqual({ status: expect.stringMatching(/^(pending|processing)$/) });
          await fx.gate.reached(before + 1);
          fx.gate.release();
          const done = await fx.terminal(user, r.body.generationId);
          expect(done).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
        },
        ids,
      );
    });

    it('accepts a charset parameter, and omitted or empty settings when none are required', async () => {
      const user = await fx.user();
      const withCharset = await fx.call('/v1/generations', {
        method: 'POST',
        headers: { ...user.auth, 'content-type': 'application/json; charset=utf-8' },
        body: '{"modelId":"noop"}',
      });
      expect(withCharset.status, withCharset.text).toBe(201);
      expect((await fx.create(user, { modelId: 'noop', settings: {} })).status).toBe(201);
    });

    it('reserves the price at once', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'echo', settings: { prompt: 'x' } });
      expect(r.status).toBe(201);
      expect(await fx.balance(user)).toBe(90);
      await fx.terminal(user, r.body.generationId);
      expect(await fx.balance(user)).toBe(90);
    });

    it('passes Idempotency-Key through: a repeat returns the same generation and charges once', async () => {
      const user = await fx.user(100);
      const key = randomBytes(8).toString('hex');
      const send = (): Promise<Reply> =>
        fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'idempotency-key': key }, json: { modelId: 'echo', settings: { prompt: 'p' } } });
      const a = await send();
      const b = await send();
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.body.generationId).toBe(a.body.generationId);
      expect(await fx.balance(user)).toBe(90);
    });

    it('Idempotency-Key: racing repeats make one generation (201 or 409), another body is 422, keys are per user', async () => {
      const user = await fx.user(100);
      const other = await fx.user(100);
      const key = randomBytes(8).toString('hex');
      const send = (u: User, prompt: string): Promise<Reply> =>
        fx.call('/v1/generations', { method: 'POST', headers: { ...u.auth, 'idempotency-key': key }, json: { modelId: 'echo', settings: { prompt } } });
      const replies = await Promise.all(Array.from({ length: 10 }, () => send(user, 'same')));
      for (const r of replies) expect([201, 409], r.text).toContain(r.status);
      for (const r of replies.filter((x) => x.status === 409)) expectError(r, 409, 'idempotency_conflict');
      const ids = new Set(replies.filter((r) => r.status === 201).map((r) => r.body.generationId as string));
      expect(ids.size).toBe(1);
      expect(await fx.balance(user)).toBe(90);
      expectError(await send(user, 'different'), 422, 'idempotency_mismatch');
      const theirs = await send(other, 'same');
      expect(theirs.status).toBe(201);
      expect(ids.has(theirs.body.generationId as string)).toBe(false);
      const bad = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'idempotency-key': 'x'.repeat(300) }, json: { modelId: 'echo', settings: { prompt: 'p' } } });
      expectError(bad, 400, 'invalid_request');
    });
  });

  describe('request validation', () => {
    it('answers 400 invalid_json to a body that is not JSON', async () => {
      const user = await fx.user(100);
      const bodies: Array<[string, string | Uint8Array]> = [
        ['garbage', '{bad'],
        ['truncated', '{"modelId":'],
        ['empty', ''],
        ['trailing brace', '{"modelId":"noop"}}'],
        ['single quotes', "{'modelId':'noop'}"],
        ['invalid UTF-8', Uint8Array.from([0x7b, 0xff, 0xfe, 0x7d])],
      ];
      const results = [];
      for (const [label, body] of bodies) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
        results.push({ label, reply, status: 400, code: 'invalid_json' });
      }
      expect(mismatches(results)).toEqual([]);
      expectError(results[0]!.reply, 400, 'invalid_json');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 400 invalid_request to JSON that is not an object with a string modelId and object settings', async () => {
      const user = await fx.user(100);
      const bodies = [
        '[]',
        '[{"modelId":"noop"}]',
        '"noop"',
        '42',
        'null',
        'true',
        '{}',
        '{"settings":{}}',
        '{"modelId":5}',
        '{"modelId":null}',
        '{"modelId":""}',
        '{"modelId":["noop"]}',
        '{"modelId":{"id":"noop"}}',
        '{"modelId":"noop","settings":"x"}',
        '{"modelId":"noop","settings":[]}',
        '{"modelId":"noop","settings":5}',
        '{"modelId":"noop","settings":null}',
      ];
      const results = [];
      for (const body of bodies) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
        results.push({ label: body, reply, status: 400, code: 'invalid_request' });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 400, 'invalid_request');
      const missing = results.find((r) => r.label === '{}')!.reply;
      expect(missing.body.error.details?.map((d: { field: string }) => d.field)).toContain('modelId');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 400 invalid_settings listing every bad field, and charges nothing', async () => {
      const user = await fx.user(50);
      const url = (n: number): string => `https://example.com/ref-${n}.png`;
      const cases: Array<[string, Record<string, unknown>, string[]]> = [
        ['missing required setting', {}, ['prompt']],
        ['empty required text', { prompt: '' }, ['prompt']],
        ['value outside the select options', { prompt: 'a', style: 'neon' }, ['style']],
        ['number for a text setting', { prompt: 5 }, ['prompt']],
        ['number for a select setting', { prompt: 'a', style: 1 }, ['style']],
        ['object for a text setting', { prompt: { a: 1 } }, ['prompt']],
        ['unknown setting name', { prompt: 'a', colour: 'red' }, ['colour']],
        ['media setting as a string', { prompt: 'a', refs: url(1) }, ['refs']],
        ['ftp media URL', { prompt: 'a', refs: ['ftp://example.com/a.png'] }, ['refs']],
        ['javascript: media URL', { prompt: 'a', refs: ['javascript:alert(1)'] }, ['refs']],
        ['file: media URL', { prompt: 'a', refs: ['file:///etc/passwd'] }, ['refs']],
        ['data: media URL', { prompt: 'a', refs: ['data:image/png;base64,AAAA'] }, ['refs']],
        ['relative media URL', { prompt: 'a', refs: ['/images/a.png'] }, ['refs']],
        ['non-string media URL', { prompt: 'a', refs: [42] }, ['refs']],
        ['too many media URLs', { prompt: 'a', refs: Array.from({ length: 11 }, (_, i) => url(i)) }, ['refs']],
        ['too long media URL', { prompt: 'a', refs: [`https://example.com/${'a'.repeat(2100)}`] }, ['refs']],
        ['too long text', { prompt: 'a'.repeat(10_001) }, ['prompt']],
        ['every kind at once', { prompt: 5, style: 'neon', colour: 'red', refs: ['ftp://example.com/a.png'] }, ['prompt', 'style', 'colour', 'refs']],
      ];
      const problems: string[] = [];
      for (const [label, settings, fields] of cases) {
        const r = await fx.create(user, { modelId: 'settings', settings });
        try {
          expectError(r, 400, 'invalid_settings');
        } catch {
          problems.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
          continue;
        }
        const named = new Set<string>((r.body.error.details ?? []).map((d: { field: string }) => settingOf(d.field)));
        const absent = fields.filter((f) => !named.has(f));
        if (absent.length > 0) problems.push(`${label}: details do not name ${absent.join(', ')} (${r.text.slice(0, 200)})`);
      }
      expect(problems).toEqual([]);
      expect(await fx.balance(user)).toBe(50);
      const ok = await fx.create(user, {
        modelId: 'settings',
        settings: { prompt: 'a', style: 'vivid', refs: [url(1), 'http://example.com/b.jpg'], notes: 'n' },
      });
      expect(ok.status, ok.text).toBe(201);
    });

    it('answers 404 model_not_found to an unknown model, and charges nothing', async () => {
      const user = await fx.user(100);
      expectError(await fx.create(user, { modelId: 'no-such-model' }), 404, 'model_not_found');
      expectError(await fx.create(user, { modelId: 'NOOP' }), 404, 'model_not_found');
      expect(await fx.balance(user)).toBe(100);
    });

    it('answers 402 insufficient_funds when the balance cannot cover the price', async () => {
      const broke = await fx.user(0);
      expectError(await fx.create(broke, { modelId: 'noop' }), 402, 'insufficient_funds');
      const short = await fx.user(9);
      expectError(await fx.create(short, { modelId: 'echo', settings: { prompt: 'x' } }), 402, 'insufficient_funds');
      expect(await fx.balance(short)).toBe(9);
      const exact = await fx.user(10);
      expect((await fx.create(exact, { modelId: 'echo', settings: { prompt: 'x' } })).status).toBe(201);
      expect(await fx.balance(exact)).toBe(0);
    });

    it('answers 415 unsupported_media_type to a body that is not declared JSON', async () => {
      const user = await fx.user(100);
      const json = '{"modelId":"noop"}';
      const cases: Array<[string, Record<string, string>, string | Uint8Array]> = [
        ['text/plain', { 'content-type': 'text/plain' }, json],
        ['no Content-Type', {}, new TextEncoder().encode(json)],
        ['form', { 'content-type': 'application/x-www-form-urlencoded' }, 'modelId=noop'],
        ['text/json', { 'content-type': 'text/json' }, json],
        ['application/jsonx', { 'content-type': 'application/jsonx' }, json],
        ['multipart', { 'content-type': 'multipart/form-data; boundary=x' }, `--x\r\nContent-Disposition: form-data; name="modelId"\r\n\r\nnoop\r\n--x--\r\n`],
      ];
      const results = [];
      for (const [label, headers, body] of cases) {
        const reply = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, ...headers }, body });
        results.push({ label, reply, status: 415, code: 'unsupported_media_type' });
      }
      expect(mismatches(results)).toEqual([]);
      expectError(results[0]!.reply, 415, 'unsupported_media_type');
      expect(await fx.balance(user)).toBe(100);
    });
  });

  describe('body size limit', () => {
    it('answers 413 payload_too_large above the limit, with or without Content-Length', async () => {
      const user = await fx.user(100);
      const limit = fx.service.bodyLimit;
      const headers = { ...user.auth, 'content-type': 'application/json' };
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(limit + 1) }), 413, 'payload_too_large');
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(limit + 1)) }), 413, 'payload_too_large');
      expectError(await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(8 * limit) }), 413, 'payload_too_large');
      // The connection (or the server) still serves the next request.
      expect((await fx.create(user, { modelId: 'noop' })).status).toBe(201);
    });

    if (!mode.hostParsers) {
      // A host parser applies its own limit first (express.json(): 100 kB), so only without one is the edge exact.
      it('accepts a body of exactly the limit', async () => {
        const user = await fx.user(100);
        const headers = { ...user.auth, 'content-type': 'application/json' };
        const r = await fx.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(fx.service.bodyLimit) });
        expect(r.status, r.text.slice(0, 200)).toBe(201);
        const chunked = await fx.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(fx.service.bodyLimit)) });
        expect(chunked.status, chunked.text.slice(0, 200)).toBe(201);
      });
    }

    describe('with a configured limit of 2048 bytes', () => {
      let small: Fixture;
      beforeAll(async () => {
        small = await createFixture(mount, mode, { limits: { bodyBytes: 2048 } });
      });
      afterAll(async () => {
        await small?.close();
      });

      it('uses the service limit, not a default of its own', async () => {
        const user = await small.user(100);
        const headers = { ...user.auth, 'content-type': 'application/json' };
        expect(small.service.bodyLimit).toBe(2048);
        expectError(await small.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(2049) }), 413, 'payload_too_large');
        if (!mode.hostParsers) {
          // With a host parser in front, a chunked body has no declared size and the host read it, not genservice.
          expectError(await small.call('/v1/generations', { method: 'POST', headers, body: chunkedBody(bodyOfSize(2049), 512) }), 413, 'payload_too_large');
          const atLimit = await small.call('/v1/generations', { method: 'POST', headers, body: bodyOfSize(2048) });
          expect(atLimit.status, atLimit.text).toBe(201);
        }
      });
    });
  });

  describe('GET /v1/generations/:id', () => {
    it('shows pending and processing as { status } only, and completed as { status, result, price }', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const a = await fx.create(user, { modelId: 'held' });
          expect(a.status).toBe(201);
          ids.push(a.body.generationId);
          await fx.gate.reached(before + 1);
          // `held` runs one at a time, so the second one waits in the queue.
          const b = await fx.create(user, { modelId: 'held' });
          expect(b.status).toBe(201);
          ids.push(b.body.generationId);

          const processing = await fx.get(user, a.body.generationId);
          expect(processing.status).toBe(200);
          expect(processing.contentType).toMatch(JSON_TYPE);
          expect(processing.body).toStrictEqual({ status: 'processing' });
          const pending = await fx.get(user, b.body.generationId);
          expect(pending.body).toStrictEqual({ status: 'pending' });

          fx.gate.open();
          expect(await fx.terminal(user, a.body.generationId)).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
          expect(await fx.terminal(user, b.body.generationId)).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
        },
        ids,
      );
    });

    it('gives a text model its text as the result, and the settled price', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'echo', settings: { prompt: 'hello, wörld ✓' } });
      expect(await fx.terminal(user, r.body.generationId)).toStrictEqual({ status: 'completed', result: 'echo: hello, wörld ✓', price: 10 });
      const cheaper = await fx.create(user, { modelId: 'discount' });
      expect(await fx.terminal(user, cheaper.body.generationId)).toStrictEqual({ status: 'completed', result: 'cheap', price: 6 });
      expect(await fx.balance(user)).toBe(100 - 10 - 6);
    });

    it('shows a failed generation as { status, price } with the failure fee', async () => {
      const user = await fx.user(100);
      const failed = await fx.create(user, { modelId: 'fail' });
      expect(await fx.terminal(user, failed.body.generationId)).toStrictEqual({ status: 'failed', price: 2 });
      const crashed = await fx.create(user, { modelId: 'crash' });
      expect(await fx.terminal(user, crashed.body.generationId)).toStrictEqual({ status: 'failed', price: 0 });
      expect(await fx.balance(user)).toBe(98);
    });

    it('retries a retryable provider error and completes', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'flaky' });
      expect(await fx.terminal(user, r.body.generationId)).toStrictEqual({ status: 'completed', result: 'recovered', price: 3 });
      expect(fx.provider.callsFor(r.body.generationId)).toHaveLength(3);
    });

    it('answers a missing or malformed id with a JSON 404', async () => {
      const user = await fx.user();
      const ids = ['a'.repeat(22), 'x', 'a'.repeat(300), '..%2F..%2Fv1%2Fbalance', '%00', 'null', '%ZZ', '%E0%A4%A'];
      const results = [];
      for (const id of ids) {
        results.push({ label: `GET ${id}`, reply: await fx.call(`/v1/generations/${id}`, { headers: user.auth }), status: 404, code: 'not_found' });
        results.push({
          label: `cancel ${id}`,
          reply: await fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth }),
          status: 404,
          code: 'not_found',
        });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 404, 'not_found');
    });
  });

  describe('result files', () => {
    async function fileResult(user: User, modelId: string): Promise<string> {
      const r = await fx.create(user, { modelId });
      expect(r.status).toBe(201);
      const view = await fx.terminal(user, r.body.generationId);
      expect(view.status).toBe('completed');
      expect(Object.keys(view).sort()).toEqual(['price', 'result', 'status']);
      expect(view.price).toBe(5);
      return view.result!;
    }

    it('gives an image its absolute URL, which downloads the bytes with their content type and no key', async () => {
      const user = await fx.user();
      for (const [modelId, bytes, type] of [
        ['image', IMAGE_BYTES, 'image/png'],
        ['video-put', VIDEO_BYTES, 'video/mp4'],
      ] as const) {
        const url = await fileResult(user, modelId);
        expect(url.startsWith(`${fx.baseUrl}/v1/files/`), url).toBe(true);
        const file = await call(url);
        expect(file.status).toBe(200);
        expect(file.contentType).toBe(type);
        expect(Buffer.compare(file.bytes, Buffer.from(bytes))).toBe(0);
      }
    });

    it('never serves the file from a tampered or expired URL', async () => {
      const user = await fx.user();
      const good = new URL(await fileResult(user, 'image'));
      const key = decodeURIComponent(good.pathname.slice(good.pathname.lastIndexOf('/') + 1));
      const flip = (s: string): string => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
      const exp = good.searchParams.get('exp')!;
      const sig = good.searchParams.get('sig')!;
      const base = `${good.origin}${good.pathname}`;
      const signer = new FileUrlSigner(fx.secret, 60);
      const expiredPath = signer.sign(key, Date.now() - 2 * 3600_000);
      const bad: Array<[string, string]> = [
        ['signature changed', `${base}?exp=${exp}&sig=${flip(sig)}`],
        ['expiry moved', `${base}?exp=${Number(exp) + 3600}&sig=${sig}`],
        ['expiry in the past', `${base}?exp=${Number(exp) - 7200}&sig=${sig}`],
        ['no signature', `${base}?exp=${exp}`],
        ['no query', base],
        ['another key', `${fx.baseUrl}/v1/files/${encodeURIComponent(flip(key))}?exp=${exp}&sig=${sig}`],
        ['validly signed but expired', `${fx.baseUrl}${expiredPath}`],
      ];
      const problems: string[] = [];
      for (const [label, url] of bad) {
        const r = await call(url);
        if (![403, 404].includes(r.status) || !JSON_TYPE.test(r.contentType) || r.body?.error === undefined) {
          problems.push(`${label}: ${r.status} ${r.contentType}`);
        }
        if (Buffer.from(IMAGE_BYTES).equals(r.bytes)) problems.push(`${label}: served the file`);
      }
      expect(problems).toEqual([]);
      // The same signer with a current time works: the URL above failed for its expiry alone.
      const fresh = await call(`${fx.baseUrl}${signer.sign(key, Date.now())}`);
      expect(fresh.status).toBe(200);
      expect(Buffer.from(IMAGE_BYTES).equals(fresh.bytes)).toBe(true);
    });
  });

  describe('ownership', () => {
    it("answers another user's generation exactly like a missing one", async () => {
      const alice = await fx.user();
      const bob = await fx.user();
      const created = await fx.create(alice, { modelId: 'noop' });
      await fx.terminal(alice, created.body.generationId);
      const missingId = randomBytes(16).toString('base64url');

      const theirs = await fx.get(bob, created.body.generationId);
      const missing = await fx.get(bob, missingId);
      expectError(theirs, 404, 'not_found');
      expect(theirs.status).toBe(missing.status);
      expect(theirs.contentType).toBe(missing.contentType);
      expect(theirs.text).toBe(missing.text);

      const cancelTheirs = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: bob.auth });
      const cancelMissing = await fx.call(`/v1/generations/${missingId}/cancel`, { method: 'POST', headers: bob.auth });
      expectError(cancelTheirs, 404, 'not_found');
      expect(cancelTheirs.text).toBe(cancelMissing.text);

      expect((await fx.get(alice, created.body.generationId)).status).toBe(200);
    });
  });

  describe('cancel', () => {
    it("cancel of a missing or another user's generation is the same JSON 404 as GET", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const created = await fx.create(alice, { modelId: 'echo', settings: { prompt: 'x' } });
      await fx.terminal(alice, created.body.generationId);
      const theirs = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: bob.auth });
      const missing = await fx.call(`/v1/generations/${'B'.repeat(22)}/cancel`, { method: 'POST', headers: bob.auth });
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
      expect((await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST' })).status).toBe(401);
      // A finished generation is unchanged, and the answer says so.
      const finished = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: alice.auth });
      expect(finished.status).toBe(200);
      expect(finished.body).toMatchObject({ status: 'completed', cancelled: false });
    });

    it('cancels a running generation: it fails with the failure fee and stays failed', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          const cancelled = await fx.call(`/v1/generations/${r.body.generationId}/cancel`, { method: 'POST', headers: user.auth });
          expect(cancelled.status, cancelled.text).toBe(200);
          expect(cancelled.contentType).toMatch(JSON_TYPE);
          expect(cancelled.body).toStrictEqual({ status: 'failed', price: 1, cancelled: true });
          expect((await fx.get(user, r.body.generationId)).body).toStrictEqual({ status: 'failed', price: 1 });
          const again = await fx.call(`/v1/generations/${r.body.generationId}/cancel`, { method: 'POST', headers: user.auth });
          expect(again.body).toStrictEqual({ status: 'failed', price: 1, cancelled: false });
          expect(await fx.balance(user)).toBe(99);
        },
        ids,
      );
    });
  });

  describe('expiresAfterSeconds on create', () => {
    it('is kept and shown as expiresAt once finished; a bad value is the JSON 400 naming the field, and nothing is created', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'noop', expiresAfterSeconds: 3600 });
      expect(r.status, r.text).toBe(201);
      await fx.terminal(user, r.body.generationId);
      const details = await fx.call(`/v1/generations/${r.body.generationId}?include=details`, { headers: user.auth });
      expect(details.body.expiresAt).toBe(new Date(Date.parse(details.body.finishedAt) + 3_600_000).toISOString());
      for (const bad of [0, -5, 1.5, '60', null]) {
        const refused = await fx.create(user, { modelId: 'noop', expiresAfterSeconds: bad });
        expectError(refused, 400, 'invalid_request');
        expect(refused.body.error.details.map((d: { field: string }) => d.field)).toEqual(['expiresAfterSeconds']);
      }
      const list = await fx.call('/v1/generations', { headers: user.auth });
      expect(list.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([r.body.generationId]);
      expect(await fx.balance(user)).toBe(99);
    });
  });

  describe('DELETE /v1/generations/:id', () => {
    const del = (user: User, id: string, options: { body?: string; headers?: Record<string, string> } = {}): Promise<Reply> =>
      fx.call(`/v1/generations/${id}`, { method: 'DELETE', headers: { ...user.auth, ...options.headers }, ...(options.body !== undefined ? { body: options.body } : {}) });

    it('answers 204 and removes everything a client could read; the charge stays; a second DELETE is 404', async () => {
      const user = await fx.user(100);
      const kept = await fx.create(user, { modelId: 'noop' });
      const r = await fx.create(user, { modelId: 'image', metadata: { project: 'x' } });
      const id = r.body.generationId as string;
      const view = await fx.terminal(user, id);
      await fx.terminal(user, kept.body.generationId);
      expect((await call(view.result!)).status).toBe(200);

      const deleted = await del(user, id);
      expect(deleted.status, deleted.text).toBe(204);
      expect(deleted.text).toBe('');

      const reads: Array<[string, Promise<Reply>]> = [
        ['poll', fx.get(user, id)],
        ['details', fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth })],
        ['stream', fx.call(`/v1/generations/${id}/events`, { headers: user.auth })],
        ['deliveries', fx.call(`/v1/generations/${id}/webhook-deliveries`, { headers: user.auth })],
        ['cancel', fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth })],
        ['file', call(view.result!)],
        ['again', del(user, id)],
      ];
      const problems: string[] = [];
      for (const [label, reply] of reads) {
        const got = await reply;
        if (got.status !== 404 || got.body?.error?.code !== 'not_found') problems.push(`${label}: ${got.status} ${got.text.slice(0, 120)}`);
      }
      expect(problems).toEqual([]);
      const list = await fx.call('/v1/generations', { headers: user.auth });
      expect(list.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([kept.body.generationId]);
      // Money records are never deleted: the image's 5 and the noop's 1 stay charged.
      expect(await fx.balance(user)).toBe(94);
      expect((await fx.get(user, kept.body.generationId)).status).toBe(200);
    });

    it('cancels a running generation first, charged as a cancel', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          const deleted = await del(user, r.body.generationId);
          expect(deleted.status, deleted.text).toBe(204);
          expectError(await fx.get(user, r.body.generationId), 404, 'not_found');
          // The held model's failure fee, as a cancel of a running generation costs.
          expect(await fx.balance(user)).toBe(99);
        },
        [],
      );
    });

    it("another user's, a missing or a malformed id answers the GET's 404; a body is 400; neither deletes", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const created = await fx.create(alice, { modelId: 'noop' });
      const id = created.body.generationId as string;
      await fx.terminal(alice, id);
      const missing = await fx.get(bob, 'B'.repeat(22));
      const theirs = await del(bob, id);
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
      for (const bad of ['x', 'a'.repeat(300), '..%2F..%2Fv1%2Fbalance', '%00', '%ZZ', 'B'.repeat(22)]) {
        const reply = await del(alice, bad);
        expectError(reply, 404, 'not_found');
        expect(reply.text, bad).toBe(missing.text);
      }
      expect((await fx.call(`/v1/generations/${id}`, { method: 'DELETE' })).status).toBe(401);
      for (const body of ['{}', '{"force":true}', 'not json']) {
        expectError(await del(alice, id, { body, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
      }
      expect((await fx.get(alice, id)).status).toBe(200);
      expect((await del(alice, id)).status).toBe(204);
    });
  });

  describe('list, details, quotes and metadata', () => {
    const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

    it("GET /v1/generations lists only the caller's generations, newest first, in pages", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await fx.create(alice, { modelId: 'noop' })).body.generationId);
        // Distinct creation times make "newest first" the reverse of creation order.
        await new Promise((r) => setTimeout(r, 3));
      }
      await fx.create(bob, { modelId: 'noop' });
      for (const id of ids) await fx.terminal(alice, id);

      const all = await fx.call('/v1/generations', { headers: alice.auth });
      expect(all.status, all.text).toBe(200);
      expect(all.contentType).toMatch(JSON_TYPE);
      expect(Object.keys(all.body).sort()).toEqual(['data', 'nextCursor']);
      expect(all.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([...ids].reverse());
      expect(all.body.nextCursor).toBeNull();
      for (const item of all.body.data) {
        expect(item).toStrictEqual({
          generationId: item.generationId,
          modelId: 'noop',
          status: 'completed',
          createdAt: expect.stringMatching(ISO),
          startedAt: expect.stringMatching(ISO),
          finishedAt: expect.stringMatching(ISO),
          result: expect.any(String),
          price: 1,
        });
      }

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: Reply = await fx.call(`/v1/generations?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers: alice.auth });
        expect(page.status, page.text).toBe(200);
        expect(page.body.data.length).toBeLessThanOrEqual(2);
        seen.push(...page.body.data.map((g: { generationId: string }) => g.generationId));
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor !== null && pages < 10);
      expect(seen).toEqual([...ids].reverse());
      expect(pages).toBe(3);
      expectError(await fx.call('/v1/generations', {}), 401, 'unauthorized');
    });

    it('filters the list by status and model', async () => {
      const user = await fx.user(100);
      const ok = (await fx.create(user, { modelId: 'noop' })).body.generationId;
      const failed = (await fx.create(user, { modelId: 'fail' })).body.generationId;
      await fx.terminal(user, ok);
      await fx.terminal(user, failed);
      const byStatus = await fx.call('/v1/generations?status=failed', { headers: user.auth });
      expect(byStatus.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([failed]);
      const byModel = await fx.call('/v1/generations?modelId=noop', { headers: user.auth });
      expect(byModel.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([ok]);
      const none = await fx.call('/v1/generations?modelId=fail&status=completed', { headers: user.auth });
      expect(none.body).toStrictEqual({ data: [], nextCursor: null });
    });

    it('answers a bad limit, status or cursor with 400 invalid_request', async () => {
      const user = await fx.user(100);
      const bad = ['limit=0', 'limit=101', 'limit=-1', 'limit=1.5', 'limit=abc', 'limit=', 'limit=1&limit=2', 'status=done', 'status=', 'cursor=abc', 'cursor=%00', `cursor=${'A'.repeat(300)}`, 'cursor=eyJhIjoxfQ'];
      const results = [];
      for (const q of bad) results.push({ label: q, reply: await fx.call(`/v1/generations?${q}`, { headers: user.auth }), status: 400, code: 'invalid_request' });
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 400, 'invalid_request');
      expect((await fx.call('/v1/generations?limit=100', { headers: user.auth })).status).toBe(200);
    });

    it('/details (and ?include=details) gives the list item; without it the exact contract shape', async () => {
      const user = await fx.user(100);
      const created = await fx.create(user, { modelId: 'echo', settings: { prompt: 'hi' }, metadata: { order: 'A-1' } });
      const id = created.body.generationId;
      const plain = await fx.terminal(user, id);
      expect(Object.keys(plain).sort()).toEqual(['price', 'result', 'status']);
      const details = await fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth });
      expect(details.status, details.text).toBe(200);
      expect(details.body).toStrictEqual({
        generationId: id,
        modelId: 'echo',
        status: 'completed',
        createdAt: expect.stringMatching(ISO),
        startedAt: expect.stringMatching(ISO),
        finishedAt: expect.stringMatching(ISO),
        result: plain.result,
        price: plain.price,
        metadata: { order: 'A-1' },
      });
      const path = await fx.call(`/v1/generations/${id}/details`, { headers: user.auth });
      expect(path.status, path.text).toBe(200);
      expect(path.body).toStrictEqual(details.body);
      expectError(await fx.call(`/v1/generations/${id}?include=everything`, { headers: user.auth }), 400, 'invalid_request');
      const other = await fx.user(100);
      const theirsByPath = await fx.call(`/v1/generations/${id}/details`, { headers: other.auth });
      expectError(theirsByPath, 404, 'not_found');
      expect(theirsByPath.text).toBe((await fx.call(`/v1/generations/${'C'.repeat(22)}/details`, { headers: other.auth })).text);
      const theirs = await fx.call(`/v1/generations/${id}?include=details`, { headers: other.auth });
      const missing = await fx.call(`/v1/generations/${'C'.repeat(22)}?include=details`, { headers: other.auth });
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
    });

    it('a failed generation says why in words safe for its owner, never the internal message', async () => {
      const user = await fx.user(100);
      const failed = (await fx.create(user, { modelId: 'fail' })).body.generationId;
      const crashed = (await fx.create(user, { modelId: 'crash' })).body.generationId;
      await fx.terminal(user, failed);
      await fx.terminal(user, crashed);
      for (const id of [failed, crashed]) {
        const d = await fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth });
        expect(d.body.status).toBe('failed');
        expect(d.body.error.code).toBe('provider_error');
        expect(typeof d.body.error.message).toBe('string');
        expect(d.text).not.toContain('the fake model failed');
        expect(d.text).not.toContain('a provider bug');
        expect(d.text).not.toMatch(/at .*\.ts:\d+/);
      }
    });

    it('a cancelled generation fails with the reason cancelled', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          await fx.call(`/v1/generations/${r.body.generationId}/cancel`, { method: 'POST', headers: user.auth });
          const d = await fx.call(`/v1/generations/${r.body.generationId}?include=details`, { headers: user.auth });
          expect(d.body).toMatchObject({ status: 'failed', price: 1, error: { code: 'cancelled' } });
        },
        ids,
      );
    });

    it('POST /v1/quotes answers price and balance and reserves nothing', async () => {
      const user = await fx.user(50);
      const q = await fx.call('/v1/quotes', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId: 'echo', settings: { prompt: 'x' } }) });
      expect(q.status, q.text).toBe(200);
      expect(q.contentType).toMatch(JSON_TYPE);
      expect(q.body).toStrictEqual({ price: 10, balance: 50 });
      expect(await fx.balance(user)).toBe(50);
      expect((await fx.call('/v1/generations', { headers: user.auth })).body.data).toEqual([]);
      const post = (body: string): Promise<Reply> => fx.call('/v1/quotes', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
      expectError(await post('{"modelId":"nope"}'), 404, 'model_not_found');
      expectError(await post('{"modelId":"echo","settings":{}}'), 400, 'invalid_settings');
      expectError(await post('{"settings":{}}'), 400, 'invalid_request');
      expectError(await post('{'), 400, 'invalid_json');
      expectError(await fx.call('/v1/quotes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"modelId":"echo"}' }), 401, 'unauthorized');
      // A quote for more than the balance is still a quote: the create is what answers 402.
      const poor = await fx.user(1);
      expect((await fx.call('/v1/quotes', { method: 'POST', headers: { ...poor.auth, 'content-type': 'application/json' }, body: '{"modelId":"echo","settings":{"prompt":"x"}}' })).body).toStrictEqual({ price: 10, balance: 1 });
    });

    it('checks metadata: at most 16 string values with bounded keys and values', async () => {
      const user = await fx.user(100);
      const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
      const bad: unknown[] = [many, { '': 'v' }, { ['k'.repeat(65)]: 'v' }, { k: 'v'.repeat(513) }, { k: 1 }, { k: null }, { k: ['v'] }, ['v'], 'v', 7];
      for (const metadata of bad) {
        const r = await fx.create(user, { modelId: 'noop', metadata });
        expectError(r, 400, 'invalid_request');
        expect(r.body.error.details?.[0]?.field ?? '', JSON.stringify(metadata).slice(0, 80)).toMatch(/^metadata/);
      }
      expect(await fx.balance(user)).toBe(100);
      const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`.padEnd(64, 'x'), 'v'.repeat(512)]));
      const ok = await fx.create(user, { modelId: 'noop', metadata: sixteen });
      expect(ok.status, ok.text).toBe(201);
      await fx.terminal(user, ok.body.generationId);
      const d = await fx.call(`/v1/generations/${ok.body.generationId}?include=details`, { headers: user.auth });
      expect(d.body.metadata).toStrictEqual(sixteen);
    });

    it('makes metadata part of the Idempotency-Key request', async () => {
      const user = await fx.user(100);
      const send = (metadata: unknown): Promise<Reply> =>
        fx.call('/v1/generations', {
          method: 'POST',
          headers: { ...user.auth, 'content-type': 'application/json', 'idempotency-key': 'meta-1' },
          body: JSON.stringify({ modelId: 'noop', metadata }),
        });
      const first = await send({ a: '1' });
      expect(first.status).toBe(201);
      expect((await send({ a: '1' })).body).toStrictEqual(first.body);
      expectError(await send({ a: '2' }), 422, 'idempotency_mismatch');
    });

    it('refuses a required text setting of only white space, charging nothing', async () => {
      const user = await fx.user(100);
      for (const prompt of [' ', '\n\t ', '\u00a0\u2003']) {
        const r = await fx.create(user, { modelId: 'echo', settings: { prompt } });
        expectError(r, 400, 'invalid_settings');
        expect(r.body.error.details).toEqual([expect.objectContaining({ field: 'settings.prompt', code: 'required' })]);
      }
      expect(await fx.balance(user)).toBe(100);
    });
  });

  describe('headers, HEAD, ranges and CORS', () => {
    it('sends X-Content-Type-Options: nosniff with every JSON answer, errors included', async () => {
      const user = await fx.user();
      for (const [path, init] of [
        ['/v1/models', { headers: user.auth }],
        ['/v1/balance', { headers: user.auth }],
        ['/v1/generations', { headers: user.auth }],
        ['/v1/models', {}],
        ['/v1/nope', { headers: user.auth }],
      ] as const) {
        const r = await fx.call(path, init);
        expect(r.headers.get('x-content-type-options'), `${path} ${r.status}`).toBe('nosniff');
      }
    });

    it('answers HEAD with the Content-Length a GET sends, and no body', async () => {
      const user = await fx.user(77);
      for (const path of ['/v1/models', '/v1/balance', '/v1/openapi.json']) {
        const get = await fx.call(path, { headers: user.auth });
        const head = await fx.call(path, { method: 'HEAD', headers: user.auth });
        expect(head.status, path).toBe(200);
        expect(head.bytes.length).toBe(0);
        expect(head.headers.get('content-length'), path).toBe(String(get.bytes.length));
      }
      const unauth = await fx.call('/v1/models', { method: 'HEAD' });
      const unauthGet = await fx.call('/v1/models');
      expect(unauth.status).toBe(401);
      expect(unauth.headers.get('content-length')).toBe(String(unauthGet.bytes.length));
    });

    it('serves byte ranges of a file (206, Accept-Ranges, Content-Range) and names it in Content-Disposition', async () => {
      const user = await fx.user();
      const r = await fx.create(user, { modelId: 'image' });
      const url = (await fx.terminal(user, r.body.generationId)).result!;
      const whole = await call(url);
      expect(whole.status).toBe(200);
      expect(whole.headers.get('accept-ranges')).toBe('bytes');
      expect(whole.headers.get('content-disposition')).toMatch(/^inline; filename="[A-Za-z0-9_.-]+\.png"$/);
      const size = IMAGE_BYTES.length;
      const cases: Array<[string, number, number]> = [
        ['bytes=0-99', 0, 99],
        ['bytes=100-', 100, size - 1],
        ['bytes=-50', size - 50, size - 1],
        [`bytes=10-${size + 500}`, 10, size - 1],
      ];
      for (const [range, first, last] of cases) {
        const part = await call(url, { headers: { range } });
        expect(part.status, range).toBe(206);
        expect(part.headers.get('content-range'), range).toBe(`bytes ${first}-${last}/${size}`);
        expect(part.headers.get('content-length'), range).toBe(String(last - first + 1));
        expect(Buffer.compare(part.bytes, Buffer.from(IMAGE_BYTES.subarray(first, last + 1))), range).toBe(0);
      }
      const beyond = await call(url, { headers: { range: `bytes=${size}-` } });
      expect(beyond.status).toBe(416);
      expect(beyond.headers.get('content-range')).toBe(`bytes */${size}`);
      // Several ranges, another unit or garbage: the whole file.
      for (const range of ['bytes=0-1,5-6', 'items=0-1', 'bytes=abc', 'bytes=9-3']) {
        const full = await call(url, { headers: { range } });
        expect(full.status, range).toBe(200);
        expect(full.bytes.length).toBe(size);
      }
      // A tampered URL is refused whatever the range.
      const tampered = url.replace(/sig=(.)/, (_m, c: string) => `sig=${c === 'A' ? 'B' : 'A'}`);
      expect((await call(tampered, { headers: { range: 'bytes=0-1' } })).status).toBe(403);
    });

    it('answers a CORS preflight from an allowed origin, and adds the CORS headers to its requests', async () => {
      const user = await fx.user(5);
      const pre = await fx.call('/v1/generations', {
        method: 'OPTIONS',
        headers: { origin: CORS_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
      expect(pre.status, pre.text).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
      expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
      expect(pre.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
      expect(pre.headers.get('access-control-max-age')).toMatch(/^\d+$/);
      const get = await fx.call('/v1/balance', { headers: { ...user.auth, origin: CORS_ORIGIN } });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
      expect(get.headers.get('vary')).toMatch(/Origin/);
      const denied = await fx.call('/v1/balance', { headers: { origin: CORS_ORIGIN } });
      expect(denied.status).toBe(401);
      expect(denied.headers.get('access-control-allow-origin')).toBe(CORS_ORIGIN);
    });

    it('gives an origin it does not allow no CORS headers, preflight or not', async () => {
      const user = await fx.user();
      for (const origin of ['https://evil.example', 'null', `${CORS_ORIGIN}.evil.example`, CORS_ORIGIN.toUpperCase()]) {
        const pre = await fx.call('/v1/generations', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
        expect(pre.headers.get('access-control-allow-origin'), origin).toBeNull();
        const get = await fx.call('/v1/balance', { headers: { ...user.auth, origin } });
        expect(get.status).toBe(200);
        expect(get.headers.get('access-control-allow-origin'), origin).toBeNull();
      }
    });
  });

  describe('live status: event stream, long-poll', () => {
    /** Reads SSE messages from a fetch response until it ends or `count` are read. */
    async function readSse(res: Response, count = Infinity): Promise<Array<{ id?: string; event?: string; data?: any; comment?: string }>> {
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      const out: Array<{ id?: string; event?: string; data?: any; comment?: string }> = [];
      let buffer = '';
      while (out.length < count) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let i: number;
        while ((i = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const msg: { id?: string; event?: string; data?: any; comment?: string } = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) msg.comment = line.slice(1).trim();
            else if (line.startsWith('id: ')) msg.id = line.slice(4);
            else if (line.startsWith('event: ')) msg.event = line.slice(7);
            else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
          }
          out.push(msg);
        }
      }
      await reader.cancel().catch(() => undefined);
      return out;
    }

    it('streams a generation live through the adapter and ends after its terminal event', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          const res = await fetch(`${fx.baseUrl}/v1/generations/${r.body.generationId}/events`, { headers: user.auth });
          expect(res.status).toBe(200);
          expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
          const reading = readSse(res);
          await new Promise((resolve) => setTimeout(resolve, 50));
          fx.gate.open();
          const messages = await reading;
          fx.gate.close();
          expect(messages.map((m) => m.event)).toEqual(['processing', 'completed']);
          expect(messages[1]!.data).toMatchObject({ generationId: r.body.generationId, status: 'completed', price: 4 });
          expect(Number(messages[1]!.id)).toBeGreaterThan(Number(messages[0]!.id));
        },
        ids,
      );
    });

    it('streams partial output (output deltas, a preview as a signed file URL) through the adapter; the poll shape stays exact', async () => {
      const user = await fx.user(100);
      const before = fx.streamGate.total;
      const r = await fx.create(user, { modelId: 'streamed' });
      const id = r.body.generationId as string;
      await fx.streamGate.reached(before + 1);
      const res = await fetch(`${fx.baseUrl}/v1/generations/${id}/events`, { headers: user.auth });
      expect(res.status).toBe(200);
      const reading = readSse(res);
      // The preview is in the log once the details show it (it is written a window after the first delta).
      for (let i = 0; i < 500; i++) {
        const d = await fx.call(`/v1/generations/${id}/details`, { headers: user.auth });
        if (d.body.output?.preview) {
          expect(d.body.output).toEqual({ text: 'Hello', preview: { url: expect.stringContaining('/v1/files/'), mimeType: 'image/png' } });
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // The contract's poll, plain and long: nothing of the partial output.
      const poll = await fx.get(user, id);
      expect(poll.body).toEqual({ status: 'processing' });
      const longPoll = await fx.call(`/v1/generations/${id}`, { headers: { ...user.auth, prefer: 'wait=0' } });
      expect(longPoll.body).toEqual({ status: 'processing' });
      fx.streamGate.release();
      const messages = (await reading).filter((m) => m.comment === undefined);
      expect(messages[0]!.event).toBe('processing');
      expect(messages[messages.length - 1]!.event).toBe('completed');
      const outputs = messages.filter((m) => m.event === 'output');
      expect(outputs.map((m) => m.data.delta).join('')).toBe('Hello, world');
      for (const m of outputs) expect(Object.keys(m.data)).toEqual(['delta']);
      const previews = messages.filter((m) => m.event === 'preview');
      expect(previews).toHaveLength(1);
      expect(Object.keys(previews[0]!.data).sort()).toEqual(['mimeType', 'url']);
      expect(previews[0]!.data.mimeType).toBe('image/png');
      // The preview's URL is the service's own signed file URL, served through the adapter.
      const file = await fetch(previews[0]!.data.url);
      expect(file.status).toBe(200);
      expect(new Uint8Array(await file.arrayBuffer())).toEqual(PREVIEW_BYTES);
      // Messages in log order: the preview and the last delta come before the completion.
      expect(messages.findIndex((m) => m.event === 'preview')).toBeLessThan(messages.length - 1);
      const done = await fx.get(user, id);
      expect(Object.keys(done.body).sort()).toEqual(['price', 'result', 'status']);
      expect(done.body).toMatchObject({ status: 'completed', price: 2 });
    });

    it('answers 401 and 404 as JSON before any stream, and releases a stream whose client went away', async () => {
      const user = await fx.user(100);
      const other = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          const path = `/v1/generations/${r.body.generationId}/events`;
          expectError(await fx.call(path, {}), 401, 'unauthorized');
          const theirs = await fx.call(path, { headers: other.auth });
          expectError(theirs, 404, 'not_found');
          expect(theirs.text).toBe((await fx.call(`/v1/generations/${'Q'.repeat(22)}/events`, { headers: other.auth })).text);
          const watchersBefore = fx.service.stats().watchers;
          for (let i = 0; i < 5; i++) {
            const controller = new AbortController();
            const res = await fetch(`${fx.baseUrl}${path}`, { headers: user.auth, signal: controller.signal });
            const first = await readSse(res, 1).catch(() => []);
            expect(first[0]?.event).toBe('processing');
            controller.abort();
          }
          for (let i = 0; i < 200 && fx.service.stats().watchers > watchersBefore; i++) await new Promise((resolve) => setTimeout(resolve, 10));
          expect(fx.service.stats().watchers).toBe(watchersBefore);
        },
        ids,
      );
    });

    it('Prefer: wait=N answers as soon as the status changes, with Preference-Applied', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(
        user,
        async () => {
          const before = fx.gate.total;
          const r = await fx.create(user, { modelId: 'held' });
          ids.push(r.body.generationId);
          await fx.gate.reached(before + 1);
          const waiting = fx.call(`/v1/generations/${r.body.generationId}`, { headers: { ...user.auth, prefer: 'wait=20' } });
          await new Promise((resolve) => setTimeout(resolve, 50));
          fx.gate.open();
          const res = await waiting;
          fx.gate.close();
          expect(res.status).toBe(200);
          expect(res.headers.get('preference-applied')).toBe('wait=20');
          expect(res.body).toMatchObject({ status: 'completed', price: 4 });
          expect(Object.keys(res.body).sort()).toEqual(['price', 'result', 'status']);
        },
        ids,
      );
    });
  });

  describe('hostile bodies and paths', () => {
    it('answers 415 to a compressed body (Content-Encoding), and charges nothing', async () => {
      const user = await fx.user(100);
      const json = JSON.stringify({ modelId: 'noop', settings: {} });
      for (const [encoding, body] of [
        ['gzip', gzipSync(json)],
        ['gzip', Buffer.from(json)],
        ['br', Buffer.from(json)],
      ] as const) {
        const r = await fx.call('/v1/generations', {
          method: 'POST',
          headers: { ...user.auth, 'content-type': 'application/json', 'content-encoding': encoding },
          body: new Uint8Array(body),
        });
        expectError(r, 415, 'unsupported_media_type');
      }
      expect(await fx.balance(user)).toBe(100);
    });

    it("answers URLs with broken percent-encoding with the service's own JSON answer, never the framework's (issue 24, item 8)", async () => {
      const user = await fx.user();
      const results = [];
      for (const [method, path, status, code] of [
        ['GET', '/v1/generations/%', 404, 'not_found'],
        ['GET', '/v1/generations/%ZZ', 404, 'not_found'],
        ['POST', '/v1/generations/%ZZ/cancel', 404, 'not_found'],
        ['GET', '/v1/generations/%E0%A4%A/events', 404, 'not_found'],
        // A file URL without a valid signature: the files route's own answer.
        ['GET', '/v1/files/%E0%A4%A', 403, 'forbidden'],
        ['GET', '/v1/files/%', 403, 'forbidden'],
      ] as const) {
        results.push({ label: `${method} ${path}`, reply: await fx.call(path, { method, headers: user.auth }), status, code });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, r.status, r.code);
    });

    if (mode.prefix !== '') {
      it('answers a path under the prefix that is not an API route with the JSON 404', async () => {
        const user = await fx.user();
        for (const path of ['/nope', '/v2/generations', '/playgroundx']) {
          expectError(await fx.call(path, { headers: user.auth }), 404, 'not_found');
        }
      });
    }

    if (!mode.hostParsers) {
      // A host body parser in front reads (and drains) the body by its own rules before genservice sees the request;
      // mount genservice before it for these (docs/adapters.md).
      it('answers 400 invalid_json to invalid UTF-8 inside a JSON string (not replaced by U+FFFD and accepted)', async () => {
        const user = await fx.user(100);
        const body = Buffer.concat([Buffer.from('{"modelId":"echo","settings":{"prompt":"caf'), Buffer.from([0xe9, 0xff]), Buffer.from('"}}')]);
        const r = await fx.call('/v1/generations', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body: new Uint8Array(body) });
        expectError(r, 400, 'invalid_json');
        expect(await fx.balance(user)).toBe(100);
      });

      it('answers a huge declared Content-Length at once, without reading the body: 401 without a key, 413 with one', async () => {
        const user = await fx.user(100);
        const path = `${new URL(fx.baseUrl).pathname.replace(/\/+$/, '')}/v1/generations`;
        const head = (auth: string): string =>
          `POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999${auth}\r\nConnection: close`;
        const anonymous = await rawExchange(fx.baseUrl, head(''), '{"model');
        expect(anonymous.status, anonymous.text).toBe(401);
        const keyed = await rawExchange(fx.baseUrl, head(`\r\nAuthorization: Bearer ${user.key}`), '{"model');
        expect(keyed.status, keyed.text).toBe(413);
        expect(JSON.parse(keyed.text).error.code).toBe('payload_too_large');
        expect(await fx.balance(user)).toBe(100);
      });

      describe('with limits.bodyTimeoutMs of 300', () => {
        let slow: Fixture;
        beforeAll(async () => {
          slow = await createFixture(mount, mode, { limits: { bodyTimeoutMs: 300 } });
        });
        afterAll(async () => {
          await slow?.close();
        });

        it('answers 408 to a body that stops arriving, closes the connection, and charges nothing', async () => {
          const user = await slow.user(100);
          expect(slow.service.bodyTimeoutMs).toBe(300);
          const path = `${new URL(slow.baseUrl).pathname.replace(/\/+$/, '')}/v1/generations`;
          // 100 bytes declared, 12 sent, then nothing: the deadline ends it (the test's own wait is far longer).
          const r = await rawExchange(
            slow.baseUrl,
            `POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\nAuthorization: Bearer ${user.key}`,
            '{"modelId":"',
            20_000,
          );
          expect(r.status, r.text).toBe(408);
          expect(JSON.parse(r.text).error.code).toBe('request_timeout');
          expect(r.headers.connection).toBe('close');
          expect(r.closedByServer).toBe(true);
          expect(await slow.balance(user)).toBe(100);
          // A body that arrives in time is unaffected.
          expect((await slow.create(user, { modelId: 'noop' })).status).toBe(201);
        });
      });
    }
  });

  describe('stream caps (issue 24, item 1)', () => {
    let capped: Fixture;
    beforeAll(async () => {
      capped = await createFixture(mount, mode, { limits: { streamsPerUser: 2 } });
    });
    afterAll(async () => {
      await capped?.close();
    });

    it('answers the stream past limits.streamsPerUser with 429 and Retry-After; a client that goes away frees its slot', async () => {
      const user = await capped.user(100);
      const id = (await capped.create(user, { modelId: 'held' })).body.generationId as string;
      const url = new URL(`${capped.baseUrl}/v1/generations/${id}/events`);
      // Plain node:http with its own socket each, so that going away closes the socket as a closed browser tab does.
      const clients: ClientRequest[] = [];
      const open = (): Promise<{ status: number; retryAfter?: string; body: string }> =>
        new Promise((resolve, reject) => {
          const req = httpRequest(url, { headers: user.auth, agent: false }, (res) => {
            if (res.statusCode === 200) return resolve({ status: 200, body: '' });
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
          });
          req.on('error', reject);
          req.end();
          clients.push(req);
        });
      try {
        expect((await open()).status).toBe(200);
        expect((await open()).status).toBe(200);
        const third = await open();
        expect(third.status).toBe(429);
        expect(third.retryAfter).toMatch(/^[1-9]\d*$/);
        expect((JSON.parse(third.body) as { error: { code: string } }).error.code).toBe('rate_limited');
        // The first client goes away: once the server has seen it, that stream's slot is free again.
        clients[0]!.destroy();
        let status = 429;
        for (let i = 0; i < 500 && status === 429; i++) {
          status = (await open()).status;
          if (status === 429) await new Promise((r) => setTimeout(r, 10));
        }
        expect(status).toBe(200);
        expect((await open()).status).toBe(429);
      } finally {
        for (const c of clients) c.destroy();
        capped.gate.open();
        await capped.terminal(user, id).catch(() => undefined);
        capped.gate.close();
      }
    });
  });

  describe('the playground page (issue 24, item 3)', () => {
    let page: Fixture;
    beforeAll(async () => {
      page = await createFixture(mount, mode, { playground: true });
    });
    afterAll(async () => {
      await page?.close();
    });

    it('may connect to its own origin only: its CSP connect-src names no other origin and no scheme', async () => {
      const r = await page.call('/playground/');
      expect(r.status).toBe(200);
      const csp = r.headers.get('content-security-policy') ?? '';
      const connect = csp.split(';').map((d) => d.trim().split(/\s+/)).find((d) => d[0] === 'connect-src');
      // No publicUrl here: the page's own origin is the only one it may reach (with a publicUrl, that origin too).
      expect(connect).toEqual(['connect-src', "'self'"]);
      expect(csp).toMatch(/script-src 'self'/);
    });

    it('takes no API address from its URL: the key never leaves for another origin', async () => {
      const r = await page.call('/playground/api.js');
      expect(r.status).toBe(200);
      // The page's API base is its own mount point, whatever the query says.
      expect(r.text).not.toMatch(/searchParams|URLSearchParams|location\.search/);
      expect(r.text).toMatch(/new URL\('\.\.\/', location\.href\)/);
    });
  });

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

  defineBatchTests(() => fx);

  describe('billing under concurrency', () => {
    it('40 concurrent creates on a balance that covers 3 give exactly 3 x 201 and 37 x 402', async () => {
      const user = await fx.user(30);
      const replies = await Promise.all(Array.from({ length: 40 }, () => fx.create(user, { modelId: 'echo', settings: { prompt: 'race' } })));
      const created = replies.filter((r) => r.status === 201);
      const refused = replies.filter((r) => r.status === 402);
      expect(created).toHaveLength(3);
      expect(refused).toHaveLength(37);
      for (const r of refused) expectError(r, 402, 'insufficient_funds');
      expect(await fx.balance(user)).toBe(0);
      for (const r of created) expect((await fx.terminal(user, r.body.generationId)).status).toBe('completed');
      expect(await fx.balance(user)).toBe(0);
    });
  });

  describe('lifecycle', () => {
    it('never shows a generation moving backwards, and a terminal state never changes', async () => {
      const user = await fx.user(1000);
      const created = await Promise.all(
        Array.from({ length: 12 }, (_, i) => fx.create(user, { modelId: i % 3 === 0 ? 'slow' : 'flaky-slow' })),
      );
      const problems: string[] = [];
      await Promise.all(
        created.map(async (c) => {
          const id = c.body.generationId as string;
          const seen: string[] = [];
          let terminalText: string | undefined;
          let after = 0;
          const until = Date.now() + 15_000;
          while (after < 5 && Date.now() < until) {
            const r = await fx.get(user, id);
            seen.push(r.body.status);
            const last = seen.length > 1 ? seen[seen.length - 2]! : 'pending';
            if (STATUS_RANK[r.body.status]! < STATUS_RANK[last]!) problems.push(`${id}: ${seen.join(' -> ')}`);
            if (terminalText !== undefined) {
              after++;
              if (r.text !== terminalText) problems.push(`${id}: terminal body changed from ${terminalText} to ${r.text}`);
            } else if (STATUS_RANK[r.body.status] === 2) {
              terminalText = r.text;
            }
          }
          if (terminalText === undefined) problems.push(`${id}: not terminal after 15 s (${seen.at(-1)})`);
        }),
      );
      expect(problems).toEqual([]);
    });

    if (options.heavy) {
      it('runs 500 generations to a terminal state, each with the right shape and price', { timeout: 120_000 }, async () => {
        const user = await fx.user(1_000_000);
        const plan = ['noop', 'fail', 'flaky', 'slow', 'image', 'discount', 'crash', 'echo', 'video-put', 'flaky-slow'];
        const expected: Record<string, { status: string; price: number }> = {
          noop: { status: 'completed', price: 1 },
          fail: { status: 'failed', price: 2 },
          flaky: { status: 'completed', price: 3 },
          slow: { status: 'completed', price: 1 },
          image: { status: 'completed', price: 5 },
          discount: { status: 'completed', price: 6 },
          crash: { status: 'failed', price: 0 },
          echo: { status: 'completed', price: 10 },
          'video-put': { status: 'completed', price: 5 },
          'flaky-slow': { status: 'completed', price: 1 },
        };
        const models = Array.from({ length: 500 }, (_, i) => plan[i % plan.length]!);
        const ids = await inPool(models, 25, async (modelId) => {
          const r = await fx.create(user, modelId === 'echo' ? { modelId, settings: { prompt: 'p' } } : { modelId });
          if (r.status !== 201) throw new Error(`create ${modelId}: ${r.status} ${r.text}`);
          return r.body.generationId as string;
        });
        expect(new Set(ids).size).toBe(500);
        const views = await inPool(ids, 25, (id) => fx.terminal(user, id, 60_000));
        const problems: string[] = [];
        let spent = 0;
        views.forEach((view, i) => {
          const want = expected[models[i]!]!;
          spent += view.price ?? 0;
          if (view.status !== want.status || view.price !== want.price) problems.push(`${models[i]}: ${JSON.stringify(view)}`);
          if (view.status === 'failed' && 'result' in view) problems.push(`${models[i]}: failed with a result`);
          if (view.status === 'completed' && typeof view.result !== 'string') problems.push(`${models[i]}: completed without a result`);
        });
        expect(problems.slice(0, 10)).toEqual([]);
        expect(await fx.balance(user)).toBe(1_000_000 - spent);
      });
    }
  });
}
