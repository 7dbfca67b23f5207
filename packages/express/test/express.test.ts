import express, { type ErrorRequestHandler } from 'express';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { call, createRecordingService, disconnectMidBody, listen, loadBuiltPackage, type MountedServer } from '@genservice/testing';
import { genserviceRouter } from '../src/index.js';

const servers: MountedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(app: express.Express, prefix = ''): Promise<MountedServer> {
  const server = await listen(app, prefix);
  servers.push(server);
  return server;
}

const ALL_BYTES = Uint8Array.from({ length: 512 }, (_, i) => i % 256);

describe('express adapter: translation', () => {
  it('hands core the method, the path below the mount with its query, lower-case headers and the base URL', async () => {
    const rec = createRecordingService();
    const app = express();
    app.use('/api', genserviceRouter(rec.service));
    const { baseUrl } = await serve(app, '/api');
    const r = await call(`${baseUrl}/v1/generations/abc%2Fdef?x=1&y=%20`, { headers: { 'X-Custom': 'yes', authorization: 'Bearer k' } });
    expect(r.status).toBe(200);
    const req = rec.last();
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/v1/generations/abc%2Fdef?x=1&y=%20');
    expect(req.baseUrl).toBe(baseUrl);
    expect(req.headers['x-custom']).toBe('yes');
    expect(req.headers.authorization).toBe('Bearer k');
  });

  it('builds the base URL from nested mounts and, with trust proxy, from forwarded headers', async () => {
    const rec = createRecordingService();
    const app = express();
    app.set('trust proxy', true);
    const outer = express.Router();
    outer.use('/api', genserviceRouter(rec.service));
    app.use('/outer', outer);
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/outer/api/v1/models`);
    expect(rec.last().baseUrl).toBe(`${baseUrl}/outer/api`);
    await call(`${baseUrl}/outer/api/v1/models`, { headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gen.example.com' } });
    expect(rec.last().baseUrl).toBe('https://gen.example.com/outer/api');
  });

  it('hands core the raw bytes when no host parser ran', async () => {
    const rec = createRecordingService();
    const app = express();
    app.use(genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: ALL_BYTES });
    const req = rec.last();
    expect(Buffer.from(req.body as Uint8Array).equals(Buffer.from(ALL_BYTES))).toBe(true);
    expect(req.parsedBody).toBeUndefined();
  });

  it("hands core the host parser's value, or its raw bytes from express.raw()", async () => {
    const rec = createRecordingService();
    const app = express();
    app.use('/json', express.json(), genserviceRouter(rec.service));
    app.use('/raw', express.raw({ type: '*/*' }), genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);

    await call(`${baseUrl}/json/v1/generations`, { method: 'POST', json: { modelId: 'm', settings: { a: 1 } } });
    expect(rec.last().parsedBody).toEqual({ modelId: 'm', settings: { a: 1 } });
    expect(rec.last().body).toBeUndefined();

    // body-parser turns an empty JSON body into {}; core must see it was empty.
    await call(`${baseUrl}/json/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' });
    expect(rec.last().body).toBe('');

    await call(`${baseUrl}/raw/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: ALL_BYTES });
    expect(Buffer.from(rec.last().body as Uint8Array).equals(Buffer.from(ALL_BYTES))).toBe(true);
  });

  it('answers a body rejected by the host parser through core: raw text for bad JSON, bodyError for too large', async () => {
    const rec = createRecordingService();
    const app = express();
    app.use(express.json({ limit: 100 }));
    app.use(genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);

    const bad = await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"modelId":' });
    expect(bad.status).toBe(200);
    expect(rec.last().body).toBe('{"modelId":');

    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ pad: 'a'.repeat(200) }) });
    expect(rec.last().bodyError).toBe('payload_too_large');
    // The limit that refused it is the host parser's, and core is told so (its 413 names that one).
    expect(rec.last().bodyLimitApplied).toBe(100);

    // A compressed body the host parser could not inflate still reaches core, which answers it (415).
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: '{}' });
    expect(rec.last().headers['content-encoding']).toBe('gzip');

    // An unsupported charset is refused before the host parser reads anything: core gets the raw bytes.
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json; charset=koi8-r' }, body: '{}' });
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('{}');
  });

  it('stops reading at its body limit and tells core the body was too large', async () => {
    const rec = createRecordingService({ bodyLimit: 10 });
    const app = express();
    app.use(genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(11) });
    expect(rec.last().bodyError).toBe('payload_too_large');
    expect(rec.last().body).toBeUndefined();
    await call(`${baseUrl}/v1/generations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(10) });
    expect(rec.last().bodyError).toBeUndefined();
    expect(Buffer.from(rec.last().body as Uint8Array).toString()).toBe('x'.repeat(10));
  });

  it("writes core's status, headers and binary body exactly", async () => {
    const rec = createRecordingService({
      respond: () => ({ status: 207, headers: { 'content-type': 'application/octet-stream', 'x-gen': 'a' }, body: ALL_BYTES }),
    });
    const app = express();
    app.use(genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);
    const r = await call(`${baseUrl}/v1/files/k`);
    expect(r.status).toBe(207);
    expect(r.contentType).toBe('application/octet-stream');
    expect(r.headers.get('x-gen')).toBe('a');
    expect(r.headers.get('etag')).toBeNull();
    expect(r.bytes.equals(Buffer.from(ALL_BYTES))).toBe(true);
  });
});

describe('express adapter: living beside the host', () => {
  it('gives up on a body whose client disconnected, and keeps serving', async () => {
    const rec = createRecordingService();
    const app = express();
    app.use(genserviceRouter(rec.service));
    const { baseUrl } = await serve(app);
    await disconnectMidBody(`${baseUrl}/v1/generations`);
    expect(rec.requests).toHaveLength(0);
    expect((await call(`${baseUrl}/v1/models`)).status).toBe(200);
  });

  it('leaves host routes and paths outside <mount>/v1 to the host', async () => {
    const rec = createRecordingService();
    const app = express();
    app.use(express.json());
    app.use('/api', genserviceRouter(rec.service));
    app.get('/api/health', (_req, res) => res.json({ ok: true }));
    app.post('/echo', (req, res) => res.json(req.body));
    const { baseUrl } = await serve(app);

    expect((await call(`${baseUrl}/api/health`)).body).toEqual({ ok: true });
    expect((await call(`${baseUrl}/echo`, { method: 'POST', json: { a: 1 } })).body).toEqual({ a: 1 });
    expect((await call(`${baseUrl}/api/v1x`)).status).toBe(404);
    expect((await call(`${baseUrl}/v1/models`)).status).toBe(404);
    expect(rec.requests).toHaveLength(0);
  });

  it("leaves the host's errors to the host: bad JSON outside the API, and errors that are not a body parser's", async () => {
    const rec = createRecordingService();
    const app = express();
    app.use(express.json());
    app.use('/api/v1/boom', () => {
      throw new Error('host middleware failed');
    });
    app.use('/api', genserviceRouter(rec.service));
    app.post('/host', (_req, res) => res.json({ reached: true }));
    const hostErrors: ErrorRequestHandler = (err: Error & { type?: string }, _req, res, _next) => {
      res.status(599).json({ host: err.type ?? err.message });
    };
    app.use(hostErrors);
    const { baseUrl } = await serve(app);

    const outside = await call(`${baseUrl}/host`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    expect(outside.status).toBe(599);
    expect(outside.body).toEqual({ host: 'entity.parse.failed' });
    const thrown = await call(`${baseUrl}/api/v1/boom`);
    expect(thrown.status).toBe(599);
    expect(thrown.body).toEqual({ host: 'host middleware failed' });
    expect(rec.requests).toHaveLength(0);
  });
});

describe('express adapter: the built package', () => {
  it('loads with require() from a CommonJS host and with import from an ES module host', { timeout: 240_000 }, () => {
    const { cjs, esm } = loadBuiltPackage({ packageDir: fileURLToPath(new URL('..', import.meta.url)), name: '@genservice/express' });
    expect(cjs).toContain('genserviceRouter');
    expect(esm).toContain('genserviceRouter');
  });
});
