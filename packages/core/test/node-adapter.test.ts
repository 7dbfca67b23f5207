import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, type GenerationService, type ModelDefinition } from '@genservice/core';
import { bodyLimitsOf, handleNodeRequest, isApiPath, toHttpRequest, writeNodeResponse, type HttpRequest } from '@genservice/core/adapter';

const models: ModelDefinition[] = [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 0 }];

function newService(): GenerationService {
  return createGenerationService({
    providers: [{ models, generate: async () => ({ text: 'done' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    runner: { enabled: false },
  });
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** The module's own example: a plain node:http mount, handing core every request either way. */
async function mount(service: GenerationService, via: 'handleNodeRequest' | 'toHttpRequest', seen?: HttpRequest[]): Promise<string> {
  const server = createServer(async (req: IncomingMessage, res) => {
    if (!isApiPath((req.url ?? '/').split('?')[0]!)) return void res.writeHead(404).end();
    const options = { limits: bodyLimitsOf(service), remoteAddress: req.socket.remoteAddress };
    const handle = seen ? { handle: (r: HttpRequest) => (seen.push(r), service.handle(r)) } : service;
    const answer = via === 'handleNodeRequest' ? await handleNodeRequest(handle, req, options) : await handle.handle(await toHttpRequest(req, options));
    await writeNodeResponse(res, answer);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('@genservice/core/adapter: a Node request to core and back', () => {
  it('handleNodeRequest answers exactly as service.handle of toHttpRequest (GET, POST with a body, a too-large body)', async () => {
    const answers: Record<string, unknown[]> = {};
    for (const via of ['handleNodeRequest', 'toHttpRequest'] as const) {
      const service = newService();
      const base = await mount(service, via);
      const auth = { authorization: 'Bearer k' };
      const created = await fetch(`${base}/v1/generations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId: 'm' }) });
      const { generationId } = (await created.json()) as { generationId: string };
      const polled = await fetch(`${base}/v1/generations/${generationId}`, { headers: auth });
      const big = await fetch(`${base}/v1/generations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: 'x'.repeat(service.bodyLimit + 1) });
      const bad = await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer nope' } });
      answers[via] = [created.status, polled.status, await polled.json(), big.status, ((await big.json()) as { error: { code: string } }).error.code, bad.status];
      await service.stop();
    }
    expect(answers.handleNodeRequest).toEqual([201, 200, { status: 'pending' }, 413, 'payload_too_large', 401]);
    expect(answers.handleNodeRequest).toEqual(answers.toHttpRequest);
  });

  it('a bodiless GET reaches core with an empty body at once; a body sent in chunks is read first', async () => {
    const service = newService();
    const seen: HttpRequest[] = [];
    const base = await mount(service, 'handleNodeRequest', seen);
    await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer k' } });
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"modelId":'));
        c.enqueue(new TextEncoder().encode('"m"}'));
        c.close();
      },
    });
    const res = await fetch(`${base}/v1/generations`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: stream, duplex: 'half' } as RequestInit);
    expect(res.status).toBe(201);
    expect(seen.map((r) => [r.method, r.path, r.body === undefined ? undefined : Buffer.from(r.body as Uint8Array).toString()])).toEqual([
      ['GET', '/v1/models', ''],
      ['POST', '/v1/generations', '{"modelId":"m"}'],
    ]);
    await service.stop();
  });

  it('a request stream that fails while its body is read rejects (the adapter hands the error to its framework), and so does a throwing read', async () => {
    const service = newService();
    const handle = vi.fn(service.handle.bind(service));
    const failing = Object.assign(new (await import('node:stream')).PassThrough(), {
      method: 'POST',
      url: '/v1/generations',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      rawHeaders: [],
    }) as unknown as IncomingMessage;
    const answer = handleNodeRequest({ handle }, failing, { limits: bodyLimitsOf(service) });
    failing.destroy(new Error('connection reset'));
    await expect(answer).rejects.toThrow(/connection reset|closed before its body ended/);
    const broken = { get method(): string { throw new Error('no method'); } } as unknown as IncomingMessage;
    await expect(handleNodeRequest({ handle }, broken, { limits: bodyLimitsOf(service) })).rejects.toThrow('no method');
    await expect(toHttpRequest(broken, { limits: bodyLimitsOf(service) })).rejects.toThrow('no method');
    expect(handle).not.toHaveBeenCalled();
    await service.stop();
  });
});
