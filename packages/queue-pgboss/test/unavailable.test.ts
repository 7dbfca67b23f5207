import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  MemoryApiKeyStore,
  MemoryLedger,
  UnavailableError,
  createGenerationService,
  type GenerationService,
  type ModelProvider,
} from '@genservice/core';
import { PgBossQueue } from '../src/index.js';
import { createTestDatabase, randomName, sleep, type TestDatabase } from './helpers.js';
import { until } from '@genservice/testing';

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

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('gs_pgboss_down');
}, 60_000);
afterAll(async () => {
  await db?.drop();
});

interface Subject {
  service: GenerationService;
  ledger: MemoryLedger;
  queue: PgBossQueue;
}

/** The same service shape each time: in-memory store and ledger, one user `u` with key `k` and 100 tokens. */
async function build(connectionString: string): Promise<Subject> {
  const ledger = new MemoryLedger();
  const apiKeys = new MemoryApiKeyStore();
  await apiKeys.addKey('k', 'u');
  await ledger.credit('u', 100);
  const queue = new PgBossQueue({ connectionString, queueName: randomName('q'), poolSize: 2, pollIntervalMs: 100 });
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

/**
 * A TCP hop between the queue and the real Postgres server that can be cut (every connection dropped, new ones
 * refused) and restored on the same port: Postgres going away and coming back, as the queue sees it.
 */
class Link {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  async up(): Promise<void> {
    const target = new URL(db.url);
    const server = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  url(): string {
    const u = new URL(db.url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

describe('PgBossQueue while Postgres is unreachable', () => {
  it('enqueue rejects with UnavailableError, and once a connection attempt failed, without waiting for its timeout', async () => {
    const queue = new PgBossQueue({ connectionString: 'postgres://postgres@127.0.0.1:1/none', queueName: randomName('q') });
    cleanups.push(() => queue.stop({ timeoutMs: 100 }));
    // Once the first connection attempt failed, the answer comes from the fail-fast branch, which names the unreachable
    // Postgres, not from the enqueue timeout ("no answer from Postgres within ..."): the mechanism, not a stopwatch.
    let n = 0;
    await until(async () => {
        const error = await queue.enqueue({ generationId: `g${n++}`, modelId: 'fake' }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(UnavailableError);
        return /Postgres is unreachable/.test((error as Error).message);
      }, { what: 'the fail-fast answer', timeoutMs: 10_000 });
  });

  it('a create answers 201 and its generation waits pending, reserve held; the same service shape works against a reachable Postgres', async () => {
    const down = await build('postgres://postgres@127.0.0.1:1/none');
    cleanups.push(() => down.service.stop({ timeoutMs: 100 }));
    await down.service.start(); // must not hang or throw while Postgres is down
    const res = await post(down.service);
    // The row was stored (the store is in memory): the create has succeeded, and the service enqueues its job once
    // the queue's Postgres answers (issue 37: a slow or absent queue never turns accepted work into a failure).
    expect(res.status).toBe(201);
    expect(await statusOf(down.service, res.body.generationId!)).toBe('pending');
    expect(await down.ledger.account('u')).toEqual({ balance: 97, reserved: 3, settled: 0 });

    const up = await build(db.url);
    cleanups.push(() => up.service.stop({ timeoutMs: 1000 }));
    await up.service.start();
    const ok = await post(up.service);
    expect(ok.status).toBe(201);
    await until(async () => (await statusOf(up.service, ok.body.generationId!)) === 'completed', { what: 'the generation to complete', timeoutMs: 10_000 });
    expect(await up.ledger.account('u')).toEqual({ balance: 97, reserved: 0, settled: 3 });
  });

  it('accepts creates while the queue\'s Postgres is down, and runs them (and new ones) by itself once it is back', async () => {
    const link = new Link();
    await link.up();
    cleanups.push(() => link.down());
    const s = await build(link.url());
    cleanups.push(() => s.service.stop({ timeoutMs: 500 }));
    await s.service.start();

    const first = await post(s.service);
    expect(first.status).toBe(201);
    await until(async () => (await statusOf(s.service, first.body.generationId!)) === 'completed', { what: 'the first generation', timeoutMs: 10_000 });

    await link.down();
    // The pool learns of the cut only when its sockets are used or closed; no event says when.
    await sleep(200);
    const during = await post(s.service);
    expect(during.status).toBe(201);
    expect(await statusOf(s.service, during.body.generationId!)).toBe('pending');
    expect(await s.ledger.account('u')).toEqual({ balance: 94, reserved: 3, settled: 3 });
    expect(await s.queue.ping().then(() => 'answered', () => 'refused')).toBe('refused');

    await link.up();
    // The pool reconnects on its own: creates succeed again within a few seconds...
    let after: Awaited<ReturnType<typeof post>> | undefined;
    await until(async () => {
        after = await post(s.service);
        return after.status === 201;
      }, { what: 'a create to succeed after Postgres came back', timeoutMs: 15_000, intervalMs: 250 });
    // ...and so does the worker: the job accepted during the outage (enqueued again by the service) and the one after
    // it both run, without anyone restarting anything.
    for (const id of [during.body.generationId!, after!.body.generationId!]) {
      await until(async () => (await statusOf(s.service, id)) === 'completed', { what: `the job ${id} after the outage`, timeoutMs: 15_000 });
    }
    const account = await s.ledger.account('u');
    expect(account.reserved).toBe(0);
    expect(account.balance + account.settled).toBe(100);
    expect(account.settled).toBe(9);
  });
});
