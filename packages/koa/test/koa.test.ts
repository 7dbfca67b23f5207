import Koa from 'koa';
import Router from '@koa/router';
import { bodyParser } from '@koa/bodyparser';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createRecordingService, disconnectMidBody, listen, loadBuiltPackage, runConformanceSuite, type MountedServer } from '@genservice/testing';
import { genserviceMiddleware, onBodyParserError } from '../src/index.js';

const servers: MountedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(app: Koa, prefix = ''): Promise<MountedServer> {
  const server = await listen(app.callback(), prefix);
  servers.push(server);
  return server;
}

const ALL_BYTES = Uint8Array.from({ length: 512 }, (_, i) => i % 256);

describe('koa middleware: translation', () => {
  it('hands core the method, the path below the prefix with its query, lower-case headers and the base URL', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service, { prefix: '/api/' }));
    const { baseUrl } = await serve(app, '/api');
    const r = await call(`${baseUrl}/v1/generations/abc%2Fdef?x=1&y=%20`, { headers: { 'X-Custom': 'yes' } });
    expect(r.status).toBe(200);
    const req = rec.last();
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/v1/generations/abc%2Fdef?x=1&y=%20');
    expect(req.baseUrl).toBe(baseUrl);
    expect(req.headers['x-custom']).toBe('yes');
  });

  it('takes forwarded headers for the base URL when the app trusts its proxy', async () => {
    const rec = createRecordingService();
    const app = new Koa({ proxy: true });
    app.use(genserviceMiddleware(rec.service, { prefix: 'api' }));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/api/v1/models`, { headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gen.example.com' } });
    expect(rec.last().baseUrl).toBe('https://gen.example.com/api');
  });

  it('adds the path a koa-mount style mount recorded in ctx.mountPath to the base URL', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    // What koa-mount('/m', sub) does before the sub-app runs.
    app.use((ctx, next) => {
      if (!ctx.path.startsWith('/m/')) return next();
      (ctx as unknown as { mountPath: string }).mountPath = '/m';
      ctx.path = ctx.path.slice(2);
      return next();
    });
    app.use(genserviceMiddleware(rec.service, { prefix: '/api' }));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/m/api/v1/models?x=1`);
    expect(rec.last().path).toBe('/v1/models?x=1');
    expect(rec.last().baseUrl).toBe(`${baseUrl}/m/api`);
  });

  it('hands core the raw bytes when it runs before any body parser', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service));
    app.use(bodyParser());
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: ALL_BYTES });
    expect(Buffer.from(rec.last().body as Uint8Array).equals(Buffer.from(ALL_BYTES))).toBe(true);
  });

  it('after @koa/bodyparser, hands core the text it parsed; a body it rejects stays with the host', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.silent = true; // Koa would log the parser's SyntaxError
    app.use(bodyParser());
    app.use(genserviceMiddleware(rec.service));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/v1/generations`, { method: 'POST', json: { modelId: 'm' } });
    expect(rec.last().body).toBe('{"modelId":"m"}');
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'modelId=m' });
    expect(rec.last().body).toBe('modelId=m');
    const count = rec.requests.length;
    // The documented limit of this order (see docs/adapters.md): mount genservice first to answer this itself.
    const bad = await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    expect(bad.status).toBe(400);
    expect(rec.requests).toHaveLength(count);
  });

  it('with onBodyParserError, hands core what the parser rejected on API paths and rethrows elsewhere', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.silent = true;
    app.use(bodyParser({ jsonLimit: 50, onError: onBodyParserError({ prefix: '/api' }) }));
    app.use(genserviceMiddleware(rec.service, { prefix: '/api' }));
    app.use((ctx) => {
      ctx.body = { host: true };
    });
    const { baseUrl } = await serve(app);
    const json = { 'content-type': 'application/json' };
    await call(`${baseUrl}/api/v1/generations`, { method: 'POST', headers: json, body: '{bad' });
    expect(rec.last().body).toBe('{bad');
    await call(`${baseUrl}/api/v1/generations`, { method: 'POST', headers: json, body: '"text"' });
    expect(rec.last().body).toBe('"text"');
    await call(`${baseUrl}/api/v1/generations`, { method: 'POST', headers: json, body: JSON.stringify({ pad: 'a'.repeat(100) }) });
    expect(rec.last().bodyError).toBe('payload_too_large');
    const elsewhere = await call(`${baseUrl}/host`, { method: 'POST', headers: json, body: '{bad' });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body).toBeUndefined();
    expect(rec.requests).toHaveLength(3);
  });

  it('stops reading at its body limit and tells core the body was too large', async () => {
    const rec = createRecordingService({ bodyLimit: 10 });
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(11) });
    expect(rec.last().bodyError).toBe('payload_too_large');
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(10) });
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('x'.repeat(10));
  });

  it("writes core's status, headers and binary body exactly", async () => {
    const rec = createRecordingService({
      respond: () => ({ status: 207, headers: { 'content-type': 'application/octet-stream', 'x-gen': 'a' }, body: ALL_BYTES }),
    });
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service));
    const { baseUrl } = await serve(app);
    const r = await call(`${baseUrl}/v1/files/k`);
    expect(r.status).toBe(207);
    expect(r.contentType).toBe('application/octet-stream');
    expect(r.headers.get('x-gen')).toBe('a');
    expect(r.bytes.equals(Buffer.from(ALL_BYTES))).toBe(true);
  });

  it("keeps core's JSON content type on error answers", async () => {
    const rec = createRecordingService({
      respond: () => ({ status: 404, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{"error":{"code":"not_found","message":"x"}}' }),
    });
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service));
    const { baseUrl } = await serve(app);
    const r = await call(`${baseUrl}/v1/nope`);
    expect(r.status).toBe(404);
    expect(r.contentType).toBe('application/json; charset=utf-8');
    expect(r.body.error.code).toBe('not_found');
  });
});

describe('koa middleware: living beside the host', () => {
  it('gives up on a body whose client disconnected, and keeps serving', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.silent = true;
    app.use(genserviceMiddleware(rec.service));
    const { baseUrl } = await serve(app);
    await disconnectMidBody(`${baseUrl}/v1/generations`);
    expect(rec.requests).toHaveLength(0);
    expect((await call(`${baseUrl}/v1/models`)).status).toBe(200);
  });

  it('passes every request outside <prefix>/v1 on to the next middleware', async () => {
    const rec = createRecordingService();
    const app = new Koa();
    app.use(genserviceMiddleware(rec.service, { prefix: '/api' }));
    app.use(bodyParser());
    app.use((ctx) => {
      ctx.body = { host: ctx.path, body: ctx.request.body ?? null };
    });
    const { baseUrl } = await serve(app);
    for (const path of ['/api/health', '/api/v1x', '/apiv1/models', '/v1/models', '/API/v1/models']) {
      expect((await call(`${baseUrl}${path}`)).body.host, path).toBe(path);
    }
    expect((await call(`${baseUrl}/host`, { method: 'POST', json: { a: 1 } })).body).toEqual({ host: '/host', body: { a: 1 } });
    expect(rec.requests).toHaveLength(0);
  });

  it("works under @koa/router as router.all('<prefix>/v1{/*path}', ...) beside other routes", async () => {
    const rec = createRecordingService();
    const app = new Koa();
    const router = new Router();
    router.get('/health', (ctx) => {
      ctx.body = { ok: true };
    });
    // Not router.use('/api', ...): @koa/router runs use() middleware only when some route matches the path.
    router.all('/api/v1{/*path}', genserviceMiddleware(rec.service, { prefix: '/api' }));
    app.use(router.routes()).use(router.allowedMethods());
    const { baseUrl } = await serve(app);
    expect((await call(`${baseUrl}/health`)).body).toEqual({ ok: true });
    await call(`${baseUrl}/api/v1/generations/x?y=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(rec.last().method).toBe('POST');
    expect(rec.last().path).toBe('/v1/generations/x?y=1');
    expect(rec.last().baseUrl).toBe(`${baseUrl}/api`);
    await call(`${baseUrl}/api/v1`);
    expect(rec.last().path).toBe('/v1');
    expect((await call(`${baseUrl}/api/other`)).status).toBe(404);
  });

  it('rejects a missing service at once', () => {
    // @ts-expect-error: the service is required
    expect(() => genserviceMiddleware(undefined)).toThrow(TypeError);
  });
});

// The whole contract again, mounted the @koa/router way behind a global body parser with the onError recipe.
runConformanceSuite(
  'koa with @koa/router after @koa/bodyparser',
  async (service, { prefix, hostParsers }) => {
    const app = new Koa();
    if (hostParsers) app.use(bodyParser({ enableTypes: ['json', 'form', 'text'], onError: onBodyParserError({ prefix }) }));
    const router = new Router();
    router.get('/health', (ctx) => {
      ctx.body = { ok: true };
    });
    // The whole prefix (not only /v1): unknown paths under it then get genservice's JSON 404; routes of the host
    // registered under it after this one still answer (the middleware passes them on).
    router.all(`${prefix}{/*path}`, genserviceMiddleware(service, { prefix }));
    router.get(`${prefix}/host-route`, (ctx) => {
      ctx.body = { host: true };
    });
    app.use(router.routes()).use(router.allowedMethods());
    return listen(app.callback(), prefix);
  },
  { modes: [{ prefix: '/api', hostParsers: true }] },
);

describe('koa middleware: the built package', () => {
  it('loads with require() from a CommonJS host and with import from an ES module host', { timeout: 240_000 }, () => {
    const { cjs, esm } = loadBuiltPackage({ packageDir: fileURLToPath(new URL('..', import.meta.url)), name: '@genservice/koa' });
    expect(cjs).toEqual(expect.arrayContaining(['genserviceMiddleware', 'onBodyParserError']));
    expect(esm).toEqual(expect.arrayContaining(['genserviceMiddleware', 'onBodyParserError']));
  });
});
