import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '@genservice/testing';
import { startHost, tempData, type RunningHost, type TempData } from './helpers.js';

const KEY = 'alice-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789';

// The README's curl session, walked against each example host started as `pnpm start` would.
describe.each(['express', 'fastify', 'koa'] as const)('%s-host', (kind) => {
  let host: RunningHost;
  let data: TempData;
  const auth = { authorization: `Bearer ${KEY}` };

  beforeAll(async () => {
    data = tempData([{ id: 'alice', apiKey: KEY, balance: 1000 }]);
    host = await startHost(kind, { USERS_FILE: data.usersFile, DATA_DIR: data.dir, DEMO_SPEED: '0.02', ADMIN_API_KEY: ADMIN_KEY });
  }, 60_000);

  afterAll(async () => {
    if (host) expect(await host.stop()).toBe(0);
    data?.cleanup();
  });

  it('serves its own route beside genservice', async () => {
    const res = await fetch(`${host.url}/`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ app: `${kind}-host` });
  });

  it('lists models, creates an image, polls it and serves the file', async () => {
    const models = (await (await fetch(`${host.api}/v1/models`, { headers: auth })).json()) as { models: Array<{ modelId: string; resultType: string; settings: Array<{ name: string; required?: boolean; options?: string[] }> }> };
    expect(new Set(models.models.map((m) => m.resultType))).toEqual(new Set(['image', 'video', 'text', 'audio', '3d']));
    const image = models.models.find((m) => m.resultType === 'image' && !m.settings.some((s) => ['image', 'video', 'audio', 'file'].includes((s as { fieldType?: string }).fieldType ?? '')))!;
    const settings: Record<string, unknown> = {};
    for (const s of image.settings) {
      if (s.options) settings[s.name] = s.options[0];
      else if (s.required) settings[s.name] = 'a red fox at dawn';
    }
    const created = await fetch(`${host.api}/v1/generations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: image.modelId, settings }),
    });
    expect(created.status).toBe(201);
    const { generationId } = (await created.json()) as { generationId: string };
    const done = await until(
      async () => (await (await fetch(`${host.api}/v1/generations/${generationId}`, { headers: auth })).json()) as { status: string; result?: string; price?: number },
      { accept: (g) => g.status === 'completed' || g.status === 'failed', timeoutMs: 30_000, intervalMs: 50 },
    );
    expect(done.status).toBe('completed');
    expect(done.price).toBeGreaterThan(0);
    expect(done.result!.startsWith(`${host.api}/v1/files/`)).toBe(true);
    const file = await fetch(done.result!);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    const bytes = new Uint8Array(await file.arrayBuffer());
    expect([...bytes.slice(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const balance = (await (await fetch(`${host.api}/v1/balance`, { headers: auth })).json()) as { balance: number };
    expect(balance.balance).toBe(1000 - done.price!);
  });

  it('runs demo-image-remix locally on uploads (raw and multipart) and on its own result ("use as input"), and names the input it could not use', async () => {
    const json = { ...auth, 'content-type': 'application/json' };
    const finished = (id: string) =>
      until(async () => (await (await fetch(`${host.api}/v1/generations/${id}/details`, { headers: auth })).json()) as { status: string; result?: string; error?: { code: string; message: string } }, {
        accept: (g) => g.status === 'completed' || g.status === 'failed',
        timeoutMs: 30_000,
        intervalMs: 50,
      });
    const start = async (modelId: string, settings: Record<string, unknown>) => {
      const res = await fetch(`${host.api}/v1/generations`, { method: 'POST', headers: json, body: JSON.stringify({ modelId, settings }) });
      expect(res.status).toBe(201);
      return ((await res.json()) as { generationId: string }).generationId;
    };
    // A picture to upload: one the demo makes (a real PNG), read back through its file URL.
    const source = await finished(await start('demo-image', { prompt: 'a lighthouse at dusk' }));
    expect(source.status).toBe('completed');
    const png = new Uint8Array(await (await fetch(source.result!)).arrayBuffer());
    const raw = await fetch(`${host.api}/v1/uploads`, { method: 'POST', headers: { ...auth, 'content-type': 'image/png' }, body: png });
    expect(raw.status).toBe(201);
    const form = new FormData();
    form.set('file', new File([png], 'lighthouse.png', { type: 'image/png' }));
    const multipart = await fetch(`${host.api}/v1/uploads`, { method: 'POST', headers: auth, body: form });
    expect(multipart.status).toBe(201);
    const uploads = [(await raw.json()) as { url: string }, (await multipart.json()) as { url: string }];
    // The host serves on a loopback address and ALLOW_PRIVATE_MEDIA is off: its own files are still inputs.
    const remix = await finished(await start('demo-image-remix', { prompt: 'posterized', images: [uploads[0]!.url, uploads[1]!.url, source.result], style: 'posterize' }));
    expect(remix).toMatchObject({ status: 'completed' });
    const out = new Uint8Array(await (await fetch(remix.result!)).arrayBuffer());
    expect([...out.slice(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    // Anything else on a private address is still refused, and the failure says which input.
    const refused = await finished(await start('demo-image-remix', { prompt: 'x', images: [uploads[0]!.url, 'http://127.0.0.1:9/secret.png'] }));
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/^Input image 2 could not be used: refusing to fetch http:\/\/127\.0\.0\.1:9\/secret\.png/) });
  });

  it('turns the admin routes on with ADMIN_API_KEY: a key issued there works, and only the admin key opens them', async () => {
    const admin = { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' };
    const issued = await fetch(`${host.api}/v1/admin/users/alice/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'reader', scopes: ['read'] }) });
    expect(issued.status).toBe(201);
    const { apiKey, keyId } = (await issued.json()) as { apiKey: string; keyId: string };
    expect((await fetch(`${host.api}/v1/balance`, { headers: { authorization: `Bearer ${apiKey}` } })).status).toBe(200);
    expect((await fetch(`${host.api}/v1/admin/audit`, { headers: auth })).status).toBe(401);
    expect((await fetch(`${host.api}/v1/balance`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status).toBe(401);
    expect((await fetch(`${host.api}/v1/admin/keys/${keyId}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status).toBe(204);
    expect((await fetch(`${host.api}/v1/balance`, { headers: { authorization: `Bearer ${apiKey}` } })).status).toBe(401);
  });

  it('serves the OpenAI-compatible surface (issue 39): an image in OpenAI\u2019s shape, its errors in OpenAI\u2019s', async () => {
    const models = (await (await fetch(`${host.api}/openai/v1/models`, { headers: auth })).json()) as { object: string; data: Array<{ id: string }> };
    expect(models.object).toBe('list');
    expect(models.data.map((m) => m.id)).toContain('demo-image');
    const image = await fetch(`${host.api}/openai/v1/images/generations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'demo-image', prompt: 'a fox', size: '256x256' }),
    });
    expect(image.status).toBe(200);
    const b64 = ((await image.json()) as { data: Array<{ b64_json: string }> }).data[0]!.b64_json;
    expect([...Buffer.from(b64, 'base64').subarray(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    const noKey = await fetch(`${host.api}/openai/v1/models`);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error', param: null } });
  });

  it('serves MCP at /api/mcp: the user\u2019s models as tools, a call answered and charged, a wrong key refused', async () => {
    const mcp = `${host.api}/mcp`;
    const post = (body: unknown, headers: Record<string, string>): Promise<Response> =>
      fetch(mcp, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...headers },
        body: JSON.stringify(body),
      });
    const messages = async (res: Response): Promise<Array<{ id?: number; result?: Record<string, unknown> }>> =>
      (await res.text())
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => JSON.parse(l.slice(5)));
    const init = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'hosts.test', version: '1' } } };
    expect((await post(init, { authorization: 'Bearer nobody' })).status).toBe(401);
    const opened = await post(init, auth);
    expect(opened.status).toBe(200);
    const session = { ...auth, 'mcp-session-id': opened.headers.get('mcp-session-id')! };
    await opened.text();
    const tools = (await messages(await post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, session)))[0]!.result!.tools as Array<{ name: string }>;
    expect(tools.map((t) => t.name)).toContain('demo-text');
    const before = ((await (await fetch(`${host.api}/v1/balance`, { headers: auth })).json()) as { balance: number }).balance;
    const called = await messages(await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'demo-text', arguments: { prompt: 'an agent says hello' } } }, session));
    const result = called.find((m) => m.id === 2)!.result!;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ modelId: 'demo-text', status: 'completed', price: 1 });
    const after = ((await (await fetch(`${host.api}/v1/balance`, { headers: auth })).json()) as { balance: number }).balance;
    expect(after).toBe(before - 1);
  });

  it('answers the contract errors through the host', async () => {
    expect((await fetch(`${host.api}/v1/models`)).status).toBe(401);
    const bad = await fetch(`${host.api}/v1/generations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{oops' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: 'invalid_json' } });
  });
});
