/**
 * The MCP server against each adapter: real hosts on loopback (Express, Fastify, Koa), the demo models, and the
 * official SDK's Client over Streamable HTTP. Balances and generation lists are read from the service itself.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  McpError,
  TaskStatusNotificationSchema,
  type CallToolResult,
  type ContentBlock,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import type { GenerationService } from '@genservice/core';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { genserviceRouter } from '@genservice/express';
import { createMcpHandler } from '../src/index.js';
import { ADAPTERS, ALICE, BOB, connect, demoService, type Host, images, mount, newUser, POOR, rawPost, sseJson, startHost } from './helpers.js';

afterAll(() => images.close());

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const VIDEO = { prompt: 'waves at night', size: '160x120', duration: '2' };

/** A tool result (the SDK types a call's answer as a union with its legacy shape). */
function asResult(r: unknown): CallToolResult {
  return r as CallToolResult;
}

function block<T extends ContentBlock['type']>(r: unknown, type: T): Extract<ContentBlock, { type: T }> {
  const found = asResult(r).content.find((c) => c.type === type);
  if (!found) throw new Error(`no ${type} content in ${JSON.stringify(asResult(r).content)}`);
  return found as Extract<ContentBlock, { type: T }>;
}

function textOf(r: unknown): string {
  return asResult(r).content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');
}

function generationIdOf(r: unknown): string {
  return (asResult(r).structuredContent as { generationId: string }).generationId;
}

/** Reads of the service itself build file URLs from the host's origin (the services trust the request's host). */
function at(host: Host): { baseUrl: string } {
  return { baseUrl: `${host.origin}/api` };
}

async function priceOf(service: GenerationService, userId: string, modelId: string, settings: Record<string, unknown>): Promise<number> {
  return (await service.quote(userId, { modelId, settings })).price;
}

async function rpcCode(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof McpError) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('expected an MCP error');
}

describe.each(ADAPTERS)('MCP server on %s', (adapter) => {
  let host: Host;
  const clients: Client[] = [];
  const client = async (apiKey: string): Promise<Client> => {
    const c = await connect(host.mcpUrl, apiKey);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    host = await startHost(adapter);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await host.close();
  });

  it('lists one tool per model the key may use, its settings as the input schema and its price in the description', async () => {
    const u = await newUser(host.service, 100);
    const { tools } = await (await client(u.apiKey)).listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['demo-image', 'demo-text', 'demo-video']);
    const image = tools.find((t) => t.name === 'demo-image')!;
    expect(image.title).toBe(host.service.getModel('demo-image')!.title);
    expect(image.inputSchema).toEqual({
      type: 'object',
      properties: {
        prompt: { type: 'string', maxLength: 10000, description: 'Prompt', title: 'Prompt' },
        size: { type: 'string', enum: ['256x256', '512x512'], description: 'Size', title: 'Size' },
        style: { type: 'string', enum: ['abstract', 'landscape', 'mosaic', 'pixel-art'], description: 'Style', title: 'Style' },
      },
      required: ['prompt'],
      additionalProperties: false,
    });
    expect(image.execution?.taskSupport).toBe('optional');
    expect(tools.find((t) => t.name === 'demo-text')!.description).toContain('Price: 1 token,');
    expect(tools.find((t) => t.name === 'demo-video')!.description).toContain('Price: 20 tokens with the default settings');

    // A key with a model allow-list sees and calls its models only, as on the API.
    const limited = await host.service.accounts.createKey(u.userId, { name: 'text only', models: ['demo-text'] });
    const narrow = await client(limited.apiKey);
    expect((await narrow.listTools()).tools.map((t) => t.name)).toEqual(['demo-text']);
    const refused = await rpcCode(narrow.callTool({ name: 'demo-image', arguments: { prompt: 'a fox' } }));
    expect(refused.code).toBe(-32602);
    expect(refused.message).toContain('Unknown tool: demo-image');
    expect(await host.service.balance(u.userId)).toBe(100);
  });

  it('calls demo-text: the text as text content, one generation, charged once', async () => {
    const u = await newUser(host.service, 100);
    const r = await (await client(u.apiKey)).callTool({ name: 'demo-text', arguments: { prompt: 'a red fox in the snow', length: 'short' } });
    expect(r.isError).toBeFalsy();
    const id = generationIdOf(r);
    const done = await host.service.get(u.userId, id, at(host));
    expect(done.status).toBe('completed');
    expect(block(r, 'text').text).toBe(done.status === 'completed' ? done.result : '');
    expect(block(r, 'text').text).toContain('fox');
    expect(r.structuredContent).toMatchObject({ generationId: id, modelId: 'demo-text', status: 'completed', price: 1 });
    expect((await host.service.list(u.userId, at(host))).data.map((g) => g.generationId)).toEqual([id]);
    expect(await host.service.balance(u.userId)).toBe(99);
  });

  it('calls demo-image: a small image inline as image content (base64 PNG), charged once; a larger one as a link', async () => {
    const u = await newUser(host.service, 100);
    const settings = { prompt: 'a lighthouse', size: '256x256' };
    const price = await priceOf(host.service, u.userId, 'demo-image', settings);
    const r = await (await client(u.apiKey)).callTool({ name: 'demo-image', arguments: settings });
    expect(r.isError).toBeFalsy();
    const image = block(r, 'image');
    expect(image.mimeType).toBe('image/png');
    const bytes = Buffer.from(image.data, 'base64');
    expect([...bytes.subarray(0, 8)]).toEqual(PNG);
    // The same bytes as the signed file URL serves.
    const url = (r.structuredContent as { result: string }).result;
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(bytes)).toBe(true);
    expect(await host.service.balance(u.userId)).toBe(100 - price);
    expect((await host.service.list(u.userId, at(host))).data).toHaveLength(1);

    // Above the handler's inline bound the same result is a resource_link to the signed URL, with type and size.
    const small = await mount(adapter, host.service, { apiPrefix: '/api', inlineMaxBytes: 100 });
    try {
      const c = await connect(small.mcpUrl, u.apiKey);
      const linked = await c.callTool({ name: 'demo-image', arguments: settings });
      const link = block(linked, 'resource_link');
      expect(link).toMatchObject({ mimeType: 'image/png', size: bytes.byteLength });
      expect(link.uri).toBe((linked.structuredContent as { result: string }).result);
      const res = await fetch(link.uri);
      expect(res.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
      await c.close();
    } finally {
      await small.close();
    }
  });

  it('a call sent again (same session, same JSON-RPC id) is the same generation, charged once', async () => {
    const u = await newUser(host.service, 100);
    const auth = { authorization: `Bearer ${u.apiKey}` };
    const init = async (): Promise<string> => {
      const res = await rawPost(host.mcpUrl, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }, auth);
      expect(res.status).toBe(200);
      await res.text();
      return res.headers.get('mcp-session-id')!;
    };
    const call = async (session: string): Promise<string> => {
      const res = await rawPost(host.mcpUrl, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'demo-text', arguments: { prompt: 'say it twice' } } }, { ...auth, 'mcp-session-id': session });
      const messages = sseJson(await res.text());
      const result = messages.find((m) => m.id === 7)?.result as CallToolResult;
      return generationIdOf(result);
    };
    const session = await init();
    expect(session).toMatch(/^[\x21-\x7e]+$/);
    const first = await call(session);
    expect(await call(session)).toBe(first);
    expect((await host.service.list(u.userId, at(host))).data).toHaveLength(1);
    expect(await host.service.balance(u.userId)).toBe(99);
    // Another session's request 7 is another call.
    const other = await call(await init());
    expect(other).not.toBe(first);
    expect(await host.service.balance(u.userId)).toBe(98);
  });

  it('sends progress notifications while demo-video generates, then answers with a link to the video', async () => {
    const u = await newUser(host.service, 100);
    const progress: Array<{ progress: number; total?: number; message?: string }> = [];
    const r = await (await client(u.apiKey)).callTool({ name: 'demo-video', arguments: VIDEO }, undefined, { onprogress: (p) => void progress.push(p) });
    expect(r.isError).toBeFalsy();
    expect(progress.length).toBeGreaterThan(0);
    for (const [i, p] of progress.entries()) {
      expect(p.total).toBe(100);
      expect(p.progress).toBeLessThan(100);
      if (i > 0) expect(p.progress).toBeGreaterThan(progress[i - 1]!.progress);
    }
    // The model's own progress came through (its first report is at the start, the next a second later).
    expect(progress.some((p) => p.progress > 0)).toBe(true);
    const link = block(r, 'resource_link');
    expect(link.mimeType).toBe('video/mp4');
    const file = await fetch(link.uri);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('video/mp4');
    expect((await file.arrayBuffer()).byteLength).toBe(link.size);
    expect(await host.service.balance(u.userId)).toBe(100 - (await priceOf(host.service, u.userId, 'demo-video', VIDEO)));
  });

  it('a task-augmented demo-video call: the task at once (its id the generation id), status updates, then the result', async () => {
    const u = await newUser(host.service, 100);
    const c = await client(u.apiKey);
    await c.listTools(); // the SDK learns which tools take tasks
    const messages = [];
    for await (const m of c.experimental.tasks.callToolStream({ name: 'demo-video', arguments: VIDEO })) messages.push(m);
    expect(messages[0]!.type).toBe('taskCreated');
    const taskId = messages[0]!.type === 'taskCreated' ? messages[0]!.task.taskId : '';
    expect(messages[0]).toMatchObject({ task: { status: 'working', pollInterval: 50, ttl: null } });
    const statuses = messages.flatMap((m) => (m.type === 'taskStatus' ? [m.task] : []));
    expect(statuses[0]!.status).toBe('working');
    expect(statuses.at(-1)!.status).toBe('completed');
    expect(statuses.every((t, i) => i === statuses.length - 1 || t.status === 'working')).toBe(true);
    expect(statuses.some((t) => /^(Waiting|Generating)/.test(t.statusMessage ?? ''))).toBe(true);
    const last = messages.at(-1)!;
    expect(last.type).toBe('result');
    const result = last.type === 'result' ? (last.result as CallToolResult) : ({} as CallToolResult);
    expect(block(result, 'resource_link').mimeType).toBe('video/mp4');
    expect(result._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId });
    // The task is the generation: the API knows it by the same id, charged once.
    const generation = await host.service.get(u.userId, taskId, at(host));
    expect(generation).toMatchObject({ status: 'completed', price: 20 });
    expect(await host.service.balance(u.userId)).toBe(80);
  });

  it('a task outlives its client: tasks/get, tasks/result and tasks/list from a second client; another user does not find it', async () => {
    const u = await newUser(host.service, 100);
    const first = await connect(host.mcpUrl, u.apiKey);
    const created = await first.request({ method: 'tools/call', params: { name: 'demo-video', arguments: VIDEO, task: {} } }, CreateTaskResultSchema);
    const { taskId } = created.task;
    expect(created.task.status).toBe('working');
    await first.close();

    const second = await client(u.apiKey);
    const notified: Task[] = [];
    second.setNotificationHandler(TaskStatusNotificationSchema, (n) => void notified.push(n.params));
    const seen = await second.experimental.tasks.getTask(taskId);
    expect(seen.taskId).toBe(taskId);
    expect(['working', 'completed']).toContain(seen.status);
    // tasks/result waits for the end, telling the status as it goes on its own stream.
    const result = await second.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(block(result, 'resource_link').mimeType).toBe('video/mp4');
    expect(notified.at(-1)).toMatchObject({ taskId, status: 'completed' });
    expect(notified.slice(0, -1).every((t) => t.taskId === taskId && t.status === 'working')).toBe(true);
    expect((await second.experimental.tasks.getTask(taskId)).status).toBe('completed');
    const { tasks } = await second.experimental.tasks.listTasks();
    expect(tasks.map((t) => [t.taskId, t.status])).toEqual([[taskId, 'completed']]);

    const bob = await client(BOB.apiKey);
    const notFound = await rpcCode(bob.experimental.tasks.getTask(taskId));
    expect(notFound.code).toBe(-32602);
    expect(notFound.message).toContain('Task not found');
    expect((await rpcCode(bob.experimental.tasks.cancelTask(taskId))).code).toBe(-32602);
    expect(await host.service.balance(u.userId)).toBe(80);
  });

  it('refuses bad arguments, missing funds and a spent budget as tool errors naming why, with nothing charged', async () => {
    const u = await newUser(host.service, 100);
    const c = await client(u.apiKey);
    const bad = await c.callTool({ name: 'demo-image', arguments: { prompt: 'x', size: '999x999', colour: 'red' } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toContain('size:');
    expect(textOf(bad)).toContain('invalid_option');
    expect(textOf(bad)).toContain('colour:');
    expect(textOf(bad)).toContain('Nothing was charged.');
    expect(bad.structuredContent).toMatchObject({ error: { status: 400, code: 'invalid_settings' } });
    const missing = await c.callTool({ name: 'demo-text', arguments: {} });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/prompt: .*\(required\)/);
    // A task-augmented call with bad arguments creates no task: the protocol error of the same words.
    const asTask = await rpcCode(c.request({ method: 'tools/call', params: { name: 'demo-image', arguments: { prompt: 'x', size: 'huge' }, task: {} } }, CreateTaskResultSchema));
    expect(asTask.code).toBe(-32602);
    expect(asTask.message).toContain('size:');
    expect(await host.service.balance(u.userId)).toBe(100);
    expect((await host.service.list(u.userId, at(host))).data).toHaveLength(0);

    const poor = await (await client(POOR.apiKey)).callTool({ name: 'demo-text', arguments: { prompt: 'please' } });
    expect(poor.isError).toBe(true);
    expect(textOf(poor)).toContain('insufficient_funds');
    expect((await host.service.list(POOR.userId, at(host))).data).toHaveLength(0);

    const budgeted = await host.service.accounts.createKey(u.userId, { name: 'small budget', budget: { amount: 2, period: 'day' } });
    const spent = await (await client(budgeted.apiKey)).callTool({ name: 'demo-image', arguments: { prompt: 'too dear' } });
    expect(spent.isError).toBe(true);
    expect(textOf(spent)).toContain('budget_exceeded');
    // A key that may only read lists the tools, but a call is the API's 403, as a tool error.
    const reader = await host.service.accounts.createKey(u.userId, { name: 'read only', scopes: ['read'] });
    const readOnly = await client(reader.apiKey);
    expect((await readOnly.listTools()).tools).toHaveLength(3);
    const forbidden = await readOnly.callTool({ name: 'demo-text', arguments: { prompt: 'no' } });
    expect(forbidden.isError).toBe(true);
    expect(textOf(forbidden)).toContain('(forbidden)');
    expect(await host.service.balance(u.userId)).toBe(100);
    expect((await host.service.list(u.userId, at(host))).data).toHaveLength(0);
  });

  it('refuses a wrong or missing key with the API 401, before any session', async () => {
    const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    for (const headers of [{ authorization: 'Bearer not-a-key-of-anyone' }, {}] as Array<Record<string, string>>) {
      const res = await rawPost(host.mcpUrl, initialize, headers);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(res.headers.get('mcp-session-id')).toBeNull();
      expect(await res.json()).toMatchObject({ error: { code: 'unauthorized' } });
    }
    await expect(connect(host.mcpUrl, 'not-a-key-of-anyone')).rejects.toMatchObject({ code: 401 });
    // A key that may not read (tools/list, results) gets the API's 403 on every request.
    const u = await newUser(host.service, 10);
    const writer = await host.service.accounts.createKey(u.userId, { name: 'generate only', scopes: ['generate'] });
    const refused = await rawPost(host.mcpUrl, initialize, { authorization: `Bearer ${writer.apiKey}` });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: { code: 'forbidden' } });
    expect((await fetch(host.mcpUrl, { headers: { accept: 'text/event-stream' } })).status).toBe(401);
    // With a good key: no standalone stream and no session to delete on this stateless endpoint.
    const get = await fetch(host.mcpUrl, { headers: { accept: 'text/event-stream', authorization: `Bearer ${ALICE.apiKey}` } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('lists the user\u2019s generations as resources and reads each one\u2019s result', async () => {
    const u = await newUser(host.service, 100);
    const c = await client(u.apiKey);
    const text = await c.callTool({ name: 'demo-text', arguments: { prompt: 'an owl' } });
    const image = await c.callTool({ name: 'demo-image', arguments: { prompt: 'an owl' } });
    const { resources } = await c.listResources();
    expect(resources.map((r) => r.uri)).toEqual([`genservice://generations/${generationIdOf(image)}`, `genservice://generations/${generationIdOf(text)}`]);
    const readText = await c.readResource({ uri: resources[1]!.uri });
    expect(readText.contents[0]).toEqual({ uri: resources[1]!.uri, mimeType: 'text/plain', text: block(text, 'text').text });
    const readImage = await c.readResource({ uri: resources[0]!.uri });
    expect(readImage.contents[0]).toMatchObject({ mimeType: 'image/png', blob: block(image, 'image').data });
    expect((await c.listResourceTemplates()).resourceTemplates[0]!.uriTemplate).toBe('genservice://generations/{generationId}');
    expect((await rpcCode(c.readResource({ uri: 'genservice://generations/nothing-here' }))).code).toBe(-32002);
    // Another user's generation reads as missing, exactly like one that never existed.
    expect((await rpcCode((await client(BOB.apiKey)).readResource({ uri: resources[0]!.uri }))).code).toBe(-32002);
  });
});

describe('behind a host body parser', () => {
  it('takes the body express.json() already read from req.body', async () => {
    const service = demoService();
    await service.start();
    const mcp = createMcpHandler(service, { apiPrefix: '/api' });
    const app = express();
    app.use(express.json());
    app.use('/api/mcp', mcp);
    app.use('/api', genserviceRouter(service));
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    try {
      const c = await connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/mcp`, ALICE.apiKey);
      expect((await c.listTools()).tools).toHaveLength(3);
      const r = await c.callTool({ name: 'demo-text', arguments: { prompt: 'parsed first' } });
      expect(r.isError).toBeFalsy();
      await c.close();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await service.stop();
    }
  });
});

describe.each(ADAPTERS)('cancelling on %s', (adapter) => {
  // Slow demo models (demo-video takes 30 s): a cancel always reaches a generation that is still running. One
  // generation in flight per user, for the 429.
  let host: Host;
  beforeAll(async () => {
    host = await startHost(adapter, { speed: 5, service: { limits: { inFlightPerUser: 1 } } });
  });
  afterAll(async () => {
    await host.close();
  });

  async function processing(service: GenerationService, userId: string, id: string): Promise<void> {
    await vi.waitFor(async () => expect((await service.get(userId, id, at(host))).status).toBe('processing'), { timeout: 10_000, interval: 20 });
  }

  it('tasks/cancel cancels the generation and refunds it as the API does; a finished task cannot be cancelled', async () => {
    const u = await newUser(host.service, 100);
    const c = await connect(host.mcpUrl, u.apiKey);
    const created = await c.request({ method: 'tools/call', params: { name: 'demo-video', arguments: VIDEO, task: {} } }, CreateTaskResultSchema);
    const { taskId } = created.task;
    expect(await host.service.balance(u.userId)).toBe(80); // reserved
    await processing(host.service, u.userId, taskId);
    const cancelled = await c.experimental.tasks.cancelTask(taskId);
    expect(cancelled).toMatchObject({ taskId, status: 'cancelled' });
    // Once processing a cancel costs the model's failure fee: none for demo-video.
    expect(await host.service.balance(u.userId)).toBe(100);
    expect(await host.service.get(u.userId, taskId, at(host))).toMatchObject({ status: 'failed', price: 0 });
    expect((await c.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
    const result = await c.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('(cancelled)');
    const again = await rpcCode(c.experimental.tasks.cancelTask(taskId));
    expect(again.code).toBe(-32602);
    expect(again.message).toContain('terminal status: cancelled');
    await c.close();
  });

  it('a 429 (too many generations in flight) is a tool error saying when to retry, with nothing charged', async () => {
    const u = await newUser(host.service, 100);
    const c = await connect(host.mcpUrl, u.apiKey);
    const created = await c.request({ method: 'tools/call', params: { name: 'demo-video', arguments: VIDEO, task: {} } }, CreateTaskResultSchema);
    const busy = await c.callTool({ name: 'demo-text', arguments: { prompt: 'one more' } });
    expect(busy.isError).toBe(true);
    expect(textOf(busy)).toContain('(rate_limited)');
    expect(textOf(busy)).toMatch(/Retry after \d+ s\./);
    expect(busy.structuredContent).toMatchObject({ error: { status: 429, code: 'rate_limited' } });
    expect(await host.service.balance(u.userId)).toBe(80); // the video's reserve only
    await c.experimental.tasks.cancelTask(created.task.taskId);
    expect(await host.service.balance(u.userId)).toBe(100);
    await c.close();
  });

  it('a tool call the client cancels (notifications/cancelled) cancels its generation, refunded', async () => {
    const u = await newUser(host.service, 100);
    const c = await connect(host.mcpUrl, u.apiKey);
    const abort = new AbortController();
    const call = c.callTool({ name: 'demo-video', arguments: VIDEO }, undefined, { signal: abort.signal });
    const settled = call.then(
      () => 'answered',
      () => 'rejected',
    );
    let id = '';
    await vi.waitFor(
      async () => {
        const [g] = (await host.service.list(u.userId, at(host))).data;
        expect(g?.status).toBe('processing');
        id = g!.generationId;
      },
      { timeout: 10_000, interval: 20 },
    );
    abort.abort('changed my mind');
    expect(await settled).toBe('rejected');
    await vi.waitFor(async () => expect(await host.service.details(u.userId, id, at(host))).toMatchObject({ status: 'failed', error: { code: 'cancelled' } }), { timeout: 10_000, interval: 20 });
    expect(await host.service.balance(u.userId)).toBe(100);
    await c.close();
  });
});
