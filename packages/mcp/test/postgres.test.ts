/**
 * A task outlives the instance that created it: three services on one Postgres database (a throwaway one, small
 * pools) and one directory of result files, each behind its own framework. A task made on the first is read on the
 * second while it runs, its result taken there, and after the first instance has stopped a third, new one still
 * answers for it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CallToolResultSchema, CreateTaskResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createGenerationService, DiskBlobStore, type GenerationService } from '@genservice/core';
import { createDemoProvider } from '@genservice/demo-models';
import { createPostgresStores, type PostgresStores } from '@genservice/store-postgres';
import { type AdapterName, connect, DEMO_SPEED, images, mount } from './helpers.js';

const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `genservice_mcp_${randomBytes(6).toString('hex')}`;
const files = mkdtempSync(join(tmpdir(), 'genservice-mcp-'));
const secret = randomBytes(24).toString('base64url');
const USER = { userId: 'carol', apiKey: 'carol-key-0123456789abcdef' };
const VIDEO = { prompt: 'a comet over the sea', size: '160x120', duration: '2' };

interface Instance {
  service: GenerationService;
  stores: PostgresStores;
  mcpUrl: string;
  origin: string;
  stop(): Promise<void>;
}

async function admin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

function dbUrl(): string {
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  return url.toString();
}

async function instance(adapter: AdapterName): Promise<Instance> {
  const stores = await createPostgresStores({ connectionString: dbUrl(), poolSize: 3 });
  const service = createGenerationService({
    providers: [createDemoProvider({ speed: DEMO_SPEED, models: ['demo-video'], imageWorkers: images })],
    store: stores.store,
    ledger: stores.ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    webhookStore: stores.webhookStore,
    auditLog: stores.auditLog,
    blobs: new DiskBlobStore({ directory: files }),
    fileUrlSecret: secret,
    trustRequestHost: true,
    // Other instances' events are read from the database's event log: look often.
    push: { pollIntervalMs: 100 },
  });
  await service.start();
  const mounted = await mount(adapter, service);
  let stopped = false;
  return {
    service,
    stores,
    mcpUrl: mounted.mcpUrl,
    origin: mounted.origin,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await mounted.close();
      await service.stop({ timeoutMs: 10_000 });
      await stores.close();
    },
  };
}

const instances: Instance[] = [];

beforeAll(async () => {
  await admin((c) => c.query(`CREATE DATABASE "${dbName}"`));
});

afterAll(async () => {
  for (const i of instances) await i.stop();
  await admin((c) => c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
  rmSync(files, { recursive: true, force: true });
  await images.close();
});

it('another instance on the same Postgres answers tasks/get, tasks/result and tasks/list, also after the first has stopped', async () => {
  const a = await instance('express');
  instances.push(a);
  await a.stores.apiKeys.addKey(USER.apiKey, USER.userId);
  await a.stores.ledger.credit(USER.userId, 100);
  const b = await instance('fastify');
  instances.push(b);

  const onA = await connect(a.mcpUrl, USER.apiKey);
  const created = await onA.request({ method: 'tools/call', params: { name: 'demo-video', arguments: VIDEO, task: {} } }, CreateTaskResultSchema);
  const { taskId } = created.task;
  await onA.close();

  const onB = await connect(b.mcpUrl, USER.apiKey);
  const seen = await onB.experimental.tasks.getTask(taskId);
  expect(seen.taskId).toBe(taskId);
  expect(['working', 'completed']).toContain(seen.status);
  const result = (await onB.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
  const link = result.content.find((c) => c.type === 'resource_link');
  expect(link).toMatchObject({ mimeType: 'video/mp4' });
  // The link is B's own: B serves the file A's worker wrote.
  expect(link?.type === 'resource_link' && link.uri.startsWith(b.origin)).toBe(true);
  const file = await fetch(link?.type === 'resource_link' ? link.uri : '');
  expect(file.headers.get('content-type')).toBe('video/mp4');
  await onB.close();

  // The first instance goes away; a new third one, on another framework, still knows the task.
  await a.stop();
  const c = await instance('koa');
  instances.push(c);
  const onC = await connect(c.mcpUrl, USER.apiKey);
  expect(await onC.experimental.tasks.getTask(taskId)).toMatchObject({ taskId, status: 'completed' });
  expect((await onC.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([taskId]);
  const again = (await onC.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
  expect(again.structuredContent).toMatchObject({ generationId: taskId, status: 'completed', price: 20 });
  await onC.close();
  // Charged once, whichever instance was asked.
  expect(await c.service.balance(USER.userId)).toBe(80);
});
