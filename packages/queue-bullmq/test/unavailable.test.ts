import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MemoryApiKeyStore,
  MemoryLedger,
  UnavailableError,
  createGenerationService,
  silentLogger,
  type GenerationService,
  type Logger,
  type ModelProvider,
} from '@genservice/core';
import { until } from '@genservice/testing';
import { BullMQQueue } from '../src/index.js';
import { REDIS_URL, obliterate, randomName } from './helpers.js';

const provider: ModelProvider = {
  models: [
    {
      modelId: 'fake',
      title: 'Fake',
      resultType: 'text',
      estimatedGenerationTime: 1,
      settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
      price: 3,
    },
  ],
  async generate() {
    return { text: 'ok' };
  },
};

interface Subject {
  service: GenerationService;
  ledger: MemoryLedger;
  queue: BullMQQueue;
}

/** The same service shape each time: in-memory store and ledger, one user `u` with key `k` and 100 tokens. */
async function build(connection: string, prefix: string, logger?: Logger): Promise<Subject> {
  const ledger = new MemoryLedger();
  const apiKeys = new MemoryApiKeyStore();
  await apiKeys.addKey('k', 'u');
  await ledger.credit('u', 100);
  const queue = new BullMQQueue({ connection, prefix, lockDurationMs: 2000, stalledIntervalMs: 1000, ...(logger ? { logger } : {}) });
  const service = createGenerationService({ providers: [provider], ledger, apiKeys, queue, runner: { leaseMs: 1500 }, recovery: { intervalMs: 500 } });
  return { service, ledger, queue };
}

async function post(service: GenerationService): Promise<{ status: number; body: { generationId?: string; error?: { code: string; message: string } } }> {
  const res = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
    body: JSON.stringify({ modelId: 'fake', settings: { prompt: 'hello' } }),
  });
  return { status: res.status, body: JSON.parse(String(res.body)) as never };
}

async function statusOf(service: GenerationService, id: string): Promise<string> {
  const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { authorization: 'Bearer k' } });
  return (JSON.parse(String(res.body)) as { status: string }).status;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function startRedis(port: number): ChildProcess {
  return spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
}

async function redisUp(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'ping'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', () => resolve(out.includes('PONG')));
  });
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

describe('BullMQQueue while Redis is unreachable', () => {
  it('enqueue rejects with UnavailableError, and once a connection attempt failed, without waiting for its timeout', async () => {
    const queue = new BullMQQueue({ connection: 'redis://127.0.0.1:1', prefix: randomName('gsq') });
    cleanups.push(() => queue.stop({ timeoutMs: 100 }));
    // Once the first connection attempt failed, the answer comes from the fail-fast branch, which names the unreachable
    // Redis, not from the enqueue timeout ("no answer from Redis within ..."): the mechanism, not a stopwatch.
    let n = 0;
    await until(async () => {
      const error = await queue.enqueue({ generationId: `g${n++}`, modelId: 'fake' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnavailableError);
      return /Redis is unreachable/.test((error as Error).message);
    }, { what: 'the fail-fast answer', timeoutMs: 10_000, intervalMs: 100 });
  });

  it('a create answers 201 and its generation waits pending, reserve held; the same service shape works against a reachable Redis', async () => {
    const down = await build('redis://127.0.0.1:1', randomName('gsq'));
    cleanups.push(() => down.service.stop({ timeoutMs: 100 }));
    await down.service.start(); // must not hang or throw while Redis is down
    const res = await post(down.service);
    // The row was stored: the create has succeeded, and the service enqueues its job once the queue answers.
    expect(res.status).toBe(201);
    expect(await statusOf(down.service, res.body.generationId!)).toBe('pending');
    expect(await down.ledger.account('u')).toEqual({ balance: 97, reserved: 3, settled: 0 });

    const prefix = randomName('gsq');
    const up = await build(REDIS_URL, prefix);
    cleanups.push(async () => {
      await up.service.stop({ timeoutMs: 1000 });
      await obliterate(prefix);
    });
    await up.service.start();
    const ok = await post(up.service);
    expect(ok.status).toBe(201);
    await until(async () => (await statusOf(up.service, ok.body.generationId!)) === 'completed', { what: 'the generation to complete', timeoutMs: 10_000, intervalMs: 100 });
    expect(await up.ledger.account('u')).toEqual({ balance: 97, reserved: 0, settled: 3 });
  });

  it('accepts creates while Redis is down, and runs them (and new ones) by itself once it is back', async () => {
    const port = await freePort();
    let redis = startRedis(port);
    cleanups.push(async () => {
      redis.kill('SIGKILL');
    });
    await until(() => redisUp(port), { what: 'the private redis-server', timeoutMs: 10_000 });
    // Which of the queue's connections reported a Redis error ('queue' is the producer's).
    const reported: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (obj) => void reported.push(String((obj as { source?: string }).source)) };
    const s = await build(`redis://127.0.0.1:${port}`, randomName('gsq'), logger);
    cleanups.push(() => s.service.stop({ timeoutMs: 500 }));
    await s.service.start();

    const first = await post(s.service);
    expect(first.status).toBe(201);
    await until(async () => (await statusOf(s.service, first.body.generationId!)) === 'completed', { what: 'the first generation', timeoutMs: 10_000, intervalMs: 100 });

    redis.kill('SIGKILL');
    await until(async () => !(await redisUp(port)), { what: 'redis to go away', timeoutMs: 5000 });
    // The producer's connection has seen it go (a create now fails at once instead of writing to a dead socket).
    await until(() => reported.includes('queue'), { what: 'the producer to report Redis gone', timeoutMs: 5000, intervalMs: 10 });
    const during = await post(s.service);
    expect(during.status).toBe(201);
    expect(await statusOf(s.service, during.body.generationId!)).toBe('pending');
    expect(await s.ledger.account('u')).toEqual({ balance: 94, reserved: 3, settled: 3 });

    redis = startRedis(port);
    await until(() => redisUp(port), { what: 'redis to come back', timeoutMs: 10_000, intervalMs: 100 });
    const after = await post(s.service);
    expect(after.status).toBe(201);
    // The producer reconnects on its own, and the worker too: the job accepted during the outage (enqueued again by
    // the service) and the one after it both run, without anyone restarting anything.
    for (const id of [during.body.generationId!, after.body.generationId!]) {
      await until(async () => (await statusOf(s.service, id)) === 'completed', { what: `the job ${id} after the outage`, timeoutMs: 15_000, intervalMs: 100 });
    }
    const account = await s.ledger.account('u');
    expect(account.reserved).toBe(0);
    expect(account.balance + account.settled).toBe(100);
    expect(account.settled).toBe(9);
  });
});
