import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from '@genservice/testing';
import { fakeFal, fakeReplicate, type Fake } from '../../packages/providers/test/fakes.js';
import { startHost, tempData, type RunningHost } from './helpers.js';

const users = [{ id: 'alice', apiKey: 'alice-key-0123456789abcdef', balance: 100 }];
const auth = { authorization: `Bearer ${users[0]!.apiKey}` };

// issue 12: the example hosts enable real providers when their keys are in the environment, beside the demo models.
describe('example host with REPLICATE_API_TOKEN, FAL_KEY and OPENAI_API_KEY set (fake upstreams on this machine)', () => {
  const data = tempData(users);
  let host: RunningHost | undefined;
  const fakes: Fake[] = [];
  afterAll(async () => {
    await host?.stop();
    for (const f of fakes) await f.close();
    data.cleanup();
  });

  it('lists the configured models beside the demo ones and runs them', async () => {
    const replicate = await fakeReplicate('r8_host_token');
    const fal = await fakeFal('fal_host_key');
    fakes.push(replicate, fal);
    // OpenAI's chat completions, as the AI SDK's OpenAI provider calls them: server-sent chunks when the request asks
    // to stream (the bridge streams language models), one JSON answer otherwise.
    const openai: Server = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        if (req.url !== '/v1/chat/completions' || req.headers.authorization !== 'Bearer sk-host') return void res.writeHead(404).end();
        if ((JSON.parse(Buffer.concat(parts).toString('utf8')) as { stream?: boolean }).stream) {
          const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: unknown): string =>
            `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ role: 'assistant', content: '' }, null));
          for (const word of ['hi', ' from', ' openai']) res.write(chunk({ content: word }, null));
          res.write(chunk({}, 'stop', { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 }));
          return void res.end('data: [DONE]\n\n');
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'hi from openai' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }),
        );
      });
    });
    await new Promise<void>((r) => openai.listen(0, '127.0.0.1', r));
    fakes.push({ close: () => new Promise<void>((r) => openai.close(() => r())) } as Fake);
    host = await startHost('fastify', {
      USERS_FILE: data.usersFile,
      DATA_DIR: data.dir,
      ALLOW_PRIVATE_MEDIA: '1',
      REPLICATE_API_TOKEN: 'r8_host_token',
      REPLICATE_BASE_URL: replicate.url,
      FAL_KEY: 'fal_host_key',
      FAL_BASE_URL: fal.url,
      OPENAI_API_KEY: 'sk-host',
      OPENAI_BASE_URL: `http://127.0.0.1:${(openai.address() as { port: number }).port}/v1`,
    });
    const models = ((await (await fetch(`${host.api}/v1/models`, { headers: auth })).json()) as { models: Array<{ modelId: string }> }).models.map((m) => m.modelId);
    expect(models).toEqual(expect.arrayContaining(['demo-image', 'replicate-flux-schnell', 'fal-flux-schnell', 'openai-image', 'openai-tts', 'openai-chat']));
    const chat = await fetch(`${host.api}/v1/generations`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: 'openai-chat', settings: { prompt: 'hello' } }),
    });
    const chatId = ((await chat.json()) as { generationId: string }).generationId;
    const answered = await until(
      async () => (await (await fetch(`${host!.api}/v1/generations/${chatId}`, { headers: auth })).json()) as { status: string; result?: string },
      { accept: (g) => g.status === 'completed' || g.status === 'failed', timeoutMs: 30_000, intervalMs: 50 },
    );
    expect(answered).toMatchObject({ status: 'completed', result: 'hi from openai' });
    for (const modelId of ['replicate-flux-schnell', 'fal-flux-schnell']) {
      const r = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId, settings: { prompt: `a lighthouse by ${modelId}` } }),
      });
      expect(r.status).toBe(201);
      const { generationId } = (await r.json()) as { generationId: string };
      const done = await until(
        async () => (await (await fetch(`${host!.api}/v1/generations/${generationId}`, { headers: auth })).json()) as { status: string; result?: string },
        { accept: (g) => g.status === 'completed' || g.status === 'failed', timeoutMs: 30_000, intervalMs: 50 },
      );
      expect(done.status, JSON.stringify(done)).toBe('completed');
      const file = await fetch(done.result!);
      expect(file.headers.get('content-type')).toBe('image/png');
    }
    expect(replicate.creates).toBe(1);
    expect(fal.creates).toBe(1);
  });
});
