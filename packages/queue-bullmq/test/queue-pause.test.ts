import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, silentLogger, type GenerationService, type ModelProvider } from '@genservice/core';
import { until } from '@genservice/testing';
import { BullMQQueue } from '../src/index.js';
import { freshStores, generationRows, randomName, seedUsers, type FreshStores } from './helpers.js';

// Issue 37 item 5: a queue slower than its enqueue timeout must not turn accepted work into failures. Two service
// instances share Postgres stores and one private redis-server, which the test pauses with CLIENT PAUSE for longer
// than the enqueue timeout while creates come in.
const ENQUEUE_TIMEOUT_MS = 300;
const PAUSE_MS = 1500;
const CREATES = 40;
const PRICE = 3;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function redisCli(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', () => resolve(out.trim()));
  });
}

let port: number;
let redis: ChildProcess;
let stores: FreshStores;
const services: GenerationService[] = [];
const runs = new Map<string, number>();
let refusedEnqueues = 0;

const provider: ModelProvider = {
  models: [{ modelId: 'fake', title: 'Fake', resultType: 'text', estimatedGenerationTime: 0.05, settings: [], price: PRICE }],
  async generate(_settings, ctx) {
    runs.set(ctx.generationId, (runs.get(ctx.generationId) ?? 0) + 1);
    return { text: 'ok' };
  },
};

beforeAll(async () => {
  port = await freePort();
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await until(async () => (await redisCli(port, 'ping')) === 'PONG', { what: 'the private redis-server', timeoutMs: 10_000 });
  stores = await freshStores();
  await seedUsers(stores, { u: 10_000 });
  const prefix = randomName('gsq');
  for (let i = 0; i < 2; i++) {
    const queue = new BullMQQueue({ connection: `redis://127.0.0.1:${port}`, prefix, enqueueTimeoutMs: ENQUEUE_TIMEOUT_MS, lockDurationMs: 3000, stalledIntervalMs: 1000 });
    // Counts the enqueues the queue refused: the proof the pause hit the creates.
    const enqueue = queue.enqueue.bind(queue);
    queue.enqueue = async (...args) => {
      try {
        return await enqueue(...args);
      } catch (err) {
        refusedEnqueues++;
        throw err;
      }
    };
    services.push(
      createGenerationService({
        providers: [provider],
        store: stores.store,
        ledger: stores.ledger,
        apiKeys: stores.apiKeys,
        idempotency: stores.idempotency,
        queue,
        logger: silentLogger,
        instanceId: `pause-${i}`,
        runner: { leaseMs: 3000 },
        recovery: { onStart: false, intervalMs: 2000 },
      }),
    );
  }
  for (const s of services) await s.start();
}, 60_000);

afterAll(async () => {
  await Promise.all(services.map((s) => s.stop({ timeoutMs: 1000 }).catch(() => undefined)));
  redis?.kill('SIGKILL');
  await stores?.drop();
});

async function post(service: GenerationService, prompt: string): Promise<{ status: number; body: { generationId?: string; error?: { code: string } } }> {
  const res = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: 'Bearer key-u', 'content-type': 'application/json' },
    body: JSON.stringify({ modelId: 'fake', metadata: { prompt } }),
  });
  return { status: res.status, body: JSON.parse(String(res.body)) as never };
}

describe('creates while Redis is paused (CLIENT PAUSE) longer than the enqueue timeout, two instances', () => {
  it('every create is 201 (or 503 with nothing stored), and every 201 completes exactly once after Redis resumes', async () => {
    expect(await redisCli(port, 'CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('OK');
    const answers = await Promise.all(Array.from({ length: CREATES }, (_, i) => post(services[i % 2]!, `p${i}`)));
    // The pause did refuse enqueues (each waited past the timeout), so the rule under test was exercised.
    expect(refusedEnqueues).toBeGreaterThan(0);
    const accepted = answers.filter((a) => a.status === 201).map((a) => a.body.generationId!);
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect(a.status).toBe(503);
      expect(a.body.error?.code).toBe('unavailable');
    }
    const rows = await generationRows(stores);
    // 503 only when nothing was stored: every stored generation is one a client was told about.
    expect(rows.map((r) => r.id).sort()).toEqual([...accepted].sort());
    expect(accepted.length).toBe(CREATES);
    // Nothing failed meanwhile; once Redis answers again the service enqueues the refused jobs itself.
    expect(rows.filter((r) => r.status === 'failed')).toEqual([]);
    await until(() => generationRows(stores), { accept: (rs) => rs.every((r) => r.status === 'completed'), what: 'every accepted generation to complete', timeoutMs: 30_000, intervalMs: 200 });
    for (const id of accepted) expect(runs.get(id)).toBe(1);
    const done = await generationRows(stores);
    for (const r of done) expect(r).toMatchObject({ status: 'completed', price: PRICE, reserveState: 'settled', charged: PRICE });
    expect(await stores.ledger.account('u')).toEqual({ balance: 10_000 - CREATES * PRICE, reserved: 0, settled: CREATES * PRICE });
  }, 60_000);
});
