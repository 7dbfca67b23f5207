import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createRecordingService, disconnectMidBody, loadBuiltPackage } from '@genservice/testing';
import { RawHostBody } from '@genservice/core/adapter';
import { genserviceFrameworkErrors, genservicePlugin } from '../src/index.js';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

async function serve(app: FastifyInstance): Promise<string> {
  apps.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

const ALL_BYTES = Uint8Array.from({ length: 512 }, (_, i) => i % 256);

describe('fastify plugin: translation', () => {
  it('hands core the method, the path below the prefix with its query, lower-case headers and the base URL', async () => {
    const rec = createRecordingService();
    const app = Fastify();
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    const origin = await serve(app);
    const r = await call(`${origin}/api/v1/generations/abc%2Fdef?x=1&y=%20`, { headers: { 'X-Custom': 'yes' } });
    expect(r.status).toBe(200);
    const req = rec.last();
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/v1/generations/abc%2Fdef?x=1&y=%20');
    expect(req.baseUrl).toBe(`${origin}/api`);
    expect(req.headers['x-custom']).toBe('yes');
    await call(`${origin}/api/v1`);
    expect(rec.last().path).toBe('/v1');
  });

  it('takes the full prefix of nested registrations for the base URL, and forwarded headers with trustProxy', async () => {
    const rec = createRecordingService();
    const app = Fastify({ trustProxy: true });
    await app.register(
      async (outer) => {
        await outer.register(genservicePlugin, { service: rec.service, prefix: '/api' });
      },
      { prefix: '/outer' },
    );
    const origin = await serve(app);
    await call(`${origin}/outer/api/v1/models`);
    expect(rec.last().baseUrl).toBe(`${origin}/outer/api`);
    expect(rec.last().path).toBe('/v1/models');
    await call(`${origin}/outer/api/v1/models`, { headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gen.example.com' } });
    expect(rec.last().baseUrl).toBe('https://gen.example.com/outer/api');
  });

  it('hands core the raw bytes of every content type, and of a body with none', async () => {
    const rec = createRecordingService();
    const app = Fastify();
    await app.register(genservicePlugin, { service: rec.service });
    const origin = await serve(app);
    for (const type of ['application/json', 'text/plain', 'application/x-www-form-urlencoded', 'image/png', undefined]) {
      await call(`${origin}/v1/generations`, { method: 'POST', headers: type ? { 'content-type': type } : {}, body: ALL_BYTES });
      const req = rec.last();
      expect(Buffer.from(req.body as Uint8Array).equals(Buffer.from(ALL_BYTES)), String(type)).toBe(true);
      expect(req.parsedBody).toBeUndefined();
    }
    await call(`${origin}/v1/models`);
    expect(Buffer.from(rec.last().body as Uint8Array).length).toBe(0);
  });

  it('hands Fastify the body it read as a RawHostBody, an object made with new, never a literal V8 may pretenure (issue 36)', async () => {
    const rec = createRecordingService();
    const app = Fastify();
    const bodies: unknown[] = [];
    app.addHook('preHandler', async (request) => {
      bodies.push(request.body);
    });
    await app.register(genservicePlugin, { service: rec.service });
    const origin = await serve(app);
    await call(`${origin}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"modelId":"m"}' });
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toBeInstanceOf(RawHostBody);
    expect(Buffer.from((bodies[0] as RawHostBody).raw as Buffer).toString()).toBe('{"modelId":"m"}');
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('{"modelId":"m"}');
  });

  it("applies the service's body limit, not Fastify's bodyLimit", async () => {
    const rec = createRecordingService({ bodyLimit: 4096 });
    const app = Fastify({ bodyLimit: 100 });
    await app.register(genservicePlugin, { service: rec.service });
    const origin = await serve(app);
    await call(`${origin}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(4096) });
    expect(Buffer.from(rec.last().body as Uint8Array).length).toBe(4096);
    await call(`${origin}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(4097) });
    expect(rec.last().bodyError).toBe('payload_too_large');
  });

  it("writes core's status, headers and binary body exactly; HEAD gets no body", async () => {
    const rec = createRecordingService({
      respond: () => ({ status: 207, headers: { 'content-type': 'application/octet-stream', 'x-gen': 'a' }, body: ALL_BYTES }),
    });
    const app = Fastify();
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    const origin = await serve(app);
    const r = await call(`${origin}/api/v1/files/k`);
    expect(r.status).toBe(207);
    expect(r.contentType).toBe('application/octet-stream');
    expect(r.headers.get('x-gen')).toBe('a');
    expect(r.bytes.equals(Buffer.from(ALL_BYTES))).toBe(true);
    const head = await call(`${origin}/api/v1/files/k`, { method: 'HEAD' });
    expect(head.status).toBe(207);
    expect(head.bytes.length).toBe(0);
  });
});

describe('fastify plugin: URLs Fastify cannot route', () => {
  it('with genserviceFrameworkErrors, hands a broken URL under the prefix to core and leaves others to Fastify', async () => {
    const rec = createRecordingService();
    const app = Fastify({ frameworkErrors: genserviceFrameworkErrors });
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    const origin = await serve(app);
    const r = await call(`${origin}/api/v1/generations/%ZZ/cancel?x=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(r.status).toBe(200);
    expect(rec.last().method).toBe('POST');
    expect(rec.last().path).toBe('/v1/generations/%ZZ/cancel?x=1');
    expect(rec.last().baseUrl).toBe(`${origin}/api`);
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('{}');
    const outside = await call(`${origin}/other/%ZZ`);
    expect(outside.status).toBe(400);
    expect(outside.body.code).toBe('FST_ERR_BAD_URL');
    expect(rec.requests).toHaveLength(1);
  });

  it('without it, the plugin routes such a URL under its prefix to core itself; others get Fastify\'s own answer (issue 24, item 8)', async () => {
    const rec = createRecordingService();
    const app = Fastify();
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    const origin = await serve(app);
    for (const path of ['/v1/generations/%', '/v1/generations/%ZZ/cancel', '/v1/files/%E0%A4%A']) {
      const r = await call(`${origin}/api${path}`);
      expect(r.status, path).toBe(200);
      expect(rec.last().path).toBe(path);
    }
    expect(rec.requests).toHaveLength(3);
    // Outside the prefix: exactly what Fastify answers without a frameworkErrors of anyone's.
    const bare = Fastify();
    const bareOrigin = await serve(bare);
    for (const path of ['/other/%ZZ', '/other/%']) {
      const mine = await call(`${origin}${path}`);
      const fastifys = await call(`${bareOrigin}${path}`);
      expect(mine.status).toBe(fastifys.status);
      expect(mine.text).toBe(fastifys.text);
      expect(mine.contentType).toBe(fastifys.contentType);
    }
    expect(rec.requests).toHaveLength(3);
  });

  it('leaves a host\'s own frameworkErrors in place', async () => {
    const rec = createRecordingService();
    const seen: string[] = [];
    const app = Fastify({
      frameworkErrors: (error, _request, reply) => {
        seen.push(error.code);
        void (reply as FastifyReply).code(418).send('host');
      },
    });
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    const origin = await serve(app);
    const r = await call(`${origin}/api/v1/generations/%ZZ`);
    expect(r.status).toBe(418);
    expect(seen).toEqual(['FST_ERR_BAD_URL']);
    expect(rec.requests).toHaveLength(0);
  });
});

describe('fastify plugin: encapsulation', () => {
  it('gives up on a body whose client disconnected, and keeps serving', async () => {
    const rec = createRecordingService();
    const app = Fastify();
    await app.register(genservicePlugin, { service: rec.service });
    const origin = await serve(app);
    await disconnectMidBody(`${origin}/v1/generations`);
    expect(rec.requests).toHaveLength(0);
    expect((await call(`${origin}/v1/models`)).status).toBe(200);
  });

  it("leaves the host's parsers, error handler and routes as they were", async () => {
    const rec = createRecordingService();
    const app = Fastify();
    app.setErrorHandler((err: Error, _req, reply) => reply.code(599).send({ host: err.message }));
    app.post('/host/json', async (req) => ({ got: req.body }));
    app.get('/host/fail', async () => {
      throw new Error('host route failed');
    });
    const handlerBefore = app.errorHandler;
    await app.register(genservicePlugin, { service: rec.service, prefix: '/api' });
    app.get('/api/health', async () => ({ ok: true }));
    const origin = await serve(app);

    expect(app.errorHandler).toBe(handlerBefore);
    expect(app.hasContentTypeParser('application/json')).toBe(true);
    expect((await call(`${origin}/host/json`, { method: 'POST', json: { a: 1 } })).body).toEqual({ got: { a: 1 } });
    const badJson = await call(`${origin}/host/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    expect(badJson.status).toBe(599);
    const fail = await call(`${origin}/host/fail`);
    expect(fail.status).toBe(599);
    expect(fail.body).toEqual({ host: 'host route failed' });
    expect((await call(`${origin}/api/health`)).body).toEqual({ ok: true });
    expect(rec.requests).toHaveLength(0);
    // A path under the prefix that no route serves goes to core (its JSON 404), not to Fastify's own 404 body...
    await call(`${origin}/api/v1x?q=1`);
    expect(rec.last().path).toBe('/v1x?q=1');
    // ...while the host's 404s outside the prefix stay Fastify's.
    const outside = await call(`${origin}/elsewhere`);
    expect(outside.status).toBe(404);
    expect(outside.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    expect(rec.requests).toHaveLength(1);

    // And the API itself got the raw body the host's JSON parser would have taken.
    await call(`${origin}/api/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('{bad');
  });

  it('refuses to register without a service', async () => {
    const app = Fastify();
    apps.push(app);
    // @ts-expect-error: the service is required
    await expect(app.register(genservicePlugin, {}).ready()).rejects.toThrow(/service/);
  });
});

describe('fastify plugin: the built package', () => {
  it('loads with require() from a CommonJS host and with import from an ES module host', { timeout: 240_000 }, () => {
    const { cjs, esm } = loadBuiltPackage({ packageDir: fileURLToPath(new URL('..', import.meta.url)), name: '@genservice/fastify' });
    expect(cjs).toEqual(expect.arrayContaining(['genservicePlugin', 'genserviceFrameworkErrors', 'default']));
    expect(esm).toEqual(expect.arrayContaining(['genservicePlugin', 'genserviceFrameworkErrors', 'default']));
  });
});
