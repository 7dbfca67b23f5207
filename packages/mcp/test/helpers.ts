/**
 * Real hosts on loopback for the MCP tests: a genservice service with the demo models, mounted at /api on Express,
 * Fastify or Koa beside the MCP endpoint at /api/mcp, exactly as docs/mcp.md shows; and MCP clients of the official SDK.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import Koa from 'koa';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryLedger,
  type GenerationService,
  type GenerationServiceOptions,
} from '@genservice/core';
import { createDemoProvider, ImageWorkerPool } from '@genservice/demo-models';
import { genserviceRouter } from '@genservice/express';
import { genservicePlugin } from '@genservice/fastify';
import { genserviceMiddleware } from '@genservice/koa';
import { createMcpHandler, type McpHandlerOptions } from '../src/index.js';

export const ADAPTERS = ['express', 'fastify', 'koa'] as const;
export type AdapterName = (typeof ADAPTERS)[number];

export const ALICE = { userId: 'alice', apiKey: 'alice-key-0123456789abcdef', balance: 1000 };
export const BOB = { userId: 'bob', apiKey: 'bob-key-0123456789abcdef00', balance: 1000 };
export const POOR = { userId: 'poor', apiKey: 'poor-key-0123456789abcdef0', balance: 0 };

/**
 * The demo models' speed in these tests: a fraction of each model's `estimatedGenerationTime` (demo-video's 6 s becomes
 * about 1.2 s), long enough for a progress report between the first and the last, short enough for a quick suite.
 */
export const DEMO_SPEED = 0.2;

/** One image worker thread for every service of a test file (each service would start its own pool otherwise). */
export const images = new ImageWorkerPool({ size: 1 });

export interface Host {
  service: GenerationService;
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** The MCP endpoint. */
  mcpUrl: string;
  close(): Promise<void>;
}

/** Mounts the API at /api and the MCP endpoint at /api/mcp on a fresh app of the framework, listening on loopback. */
export async function mount(adapter: AdapterName, service: GenerationService, options: McpHandlerOptions = {}): Promise<Omit<Host, 'service'>> {
  const mcp = createMcpHandler(service, { apiPrefix: '/api', taskPollIntervalMs: 50, ...options });
  let server: import('node:http').Server;
  let closeApp: () => Promise<void>;
  if (adapter === 'express') {
    const app = express();
    // Before the API's router, which answers every other path under /api with its JSON 404.
    app.use('/api/mcp', mcp);
    app.use('/api', genserviceRouter(service, { notFound: true }));
    server = app.listen(0, '127.0.0.1');
    closeApp = async () => undefined;
  } else if (adapter === 'fastify') {
    const app = Fastify();
    // Before Fastify parses the body: the handler reads the raw request itself.
    app.route({
      method: ['GET', 'POST', 'DELETE'],
      url: '/api/mcp',
      onRequest: async (request, reply) => {
        reply.hijack();
        await mcp(request.raw, reply.raw);
      },
      handler: async () => undefined,
    });
    await app.register(genservicePlugin, { service, prefix: '/api' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    server = app.server;
    closeApp = () => app.close();
  } else {
    const app = new Koa();
    app.use(async (ctx, next) => {
      if (ctx.path !== '/api/mcp') return next();
      ctx.respond = false;
      await mcp(ctx.req, ctx.res);
    });
    app.use(genserviceMiddleware(service, { prefix: '/api' }));
    server = app.listen(0, '127.0.0.1');
    closeApp = async () => undefined;
  }
  if (!server.listening) await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    mcpUrl: `${origin}/api/mcp`,
    close: async () => {
      server.closeAllConnections();
      await Promise.all([closeApp(), new Promise<void>((resolve) => server.close(() => resolve()))]);
    },
  };
}

/** A service with the demo models (text, image, video), alice, bob and a user without tokens, in memory. */
export function demoService(extra: Partial<GenerationServiceOptions> = {}, speed = DEMO_SPEED): GenerationService {
  const users = [ALICE, BOB, POOR];
  return createGenerationService({
    providers: [createDemoProvider({ speed, models: ['demo-text', 'demo-image', 'demo-video'], imageWorkers: images })],
    apiKeys: new MemoryApiKeyStore({ keys: users.map((u) => ({ apiKey: u.apiKey, userId: u.userId })) }),
    ledger: new MemoryLedger({ balances: Object.fromEntries(users.map((u) => [u.userId, u.balance])) }),
    // File URLs from the request's own origin: the MCP handler passes its `apiPrefix` below it.
    trustRequestHost: true,
    ...extra,
  });
}

export interface HostSpec {
  /** Service options beside the demo defaults. */
  service?: Partial<GenerationServiceOptions>;
  /** The MCP handler's options beside the tests' defaults. */
  mcp?: McpHandlerOptions;
  /** The demo models' speed (default DEMO_SPEED). */
  speed?: number;
}

export async function startHost(adapter: AdapterName, spec: HostSpec = {}): Promise<Host> {
  const service = demoService(spec.service, spec.speed);
  await service.start();
  const mounted = await mount(adapter, service, spec.mcp);
  return {
    service,
    ...mounted,
    close: async () => {
      await mounted.close();
      await service.stop({ timeoutMs: 5000 });
    },
  };
}

/** An MCP client of the official SDK over Streamable HTTP, with the key as `Authorization: Bearer`. */
export async function connect(mcpUrl: string, apiKey: string): Promise<Client> {
  const client = new Client({ name: 'genservice-mcp-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${apiKey}` } } });
  await client.connect(transport);
  return client;
}

/** The messages of an SSE answer to a POST (the JSON-RPC messages, in order). */
export function sseJson(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n\n')
    .map((block) => block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n'))
    .filter((data) => data !== '')
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

/** A raw JSON-RPC POST to the endpoint, as a client would send it. */
export async function rawPost(mcpUrl: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...headers },
    body: JSON.stringify(body),
  });
}

let users = 0;

/** A user of its own for one test (so that balances and lists are that test's alone), with a key. */
export async function newUser(service: GenerationService, balance: number, key: { models?: string[]; budget?: { amount: number; period: 'day' | 'month' } } = {}): Promise<{ userId: string; apiKey: string }> {
  const userId = `user-${process.pid}-${++users}`;
  await service.accounts.createUser({ userId, balance });
  const { apiKey } = await service.accounts.createKey(userId, { name: 'mcp test', ...key });
  return { userId, apiKey };
}
