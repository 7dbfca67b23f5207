import { createServer, type Server, type Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createGenerationService, type GenerationService } from '@genservice/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '@genservice/testing';
import { createPostgresStores, type PostgresStores } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './helpers.js';

/** A TCP proxy to the database that the test can cut (every connection dropped, the port closed) and restore. */
class Proxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async up(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

async function readyz(service: GenerationService): Promise<{ status: number; body: { status: string; failing?: string[]; checks: Record<string, string> } }> {
  const r = await service.handle({ method: 'GET', path: '/readyz', headers: {} });
  return { status: r.status, body: JSON.parse(String(r.body)) };
}

describe('readyz with Postgres', () => {
  let db: TestDatabase;
  let proxy: Proxy;
  let stores: PostgresStores;
  let service: GenerationService;

  beforeAll(async () => {
    db = await createTestDatabase('genservice_readyz');
    const target = new URL(db.url);
    proxy = new Proxy(target.hostname, Number(target.port || 5432));
    await proxy.up();
    const viaProxy = new URL(db.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    stores = await createPostgresStores({ connectionString: viaProxy.toString(), poolSize: 3, connectionTimeoutMs: 1000 });
    service = createGenerationService({ providers: [], store: stores.store, ledger: stores.ledger, health: { timeoutMs: 1500 } });
  });

  afterAll(async () => {
    await stores?.close();
    await proxy?.down();
    await db?.drop();
  });

  it('answers 503 naming the store while the database is unreachable, and 200 again once it is back', async () => {
    const before = await readyz(service);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ status: 'ready', checks: { store: 'ok', ledger: 'ok', blobs: 'ok' } });

    await proxy.down();
    const down = await until(() => readyz(service), { accept: (r) => r.status === 503, what: 'readyz to fail' });
    expect(down.body.status).toBe('unavailable');
    expect(down.body.failing).toContain('store');
    expect(down.body.checks.store).toMatch(/^(error|timeout)$/);
    // Nothing about the failure but its name: no address, no driver message.
    expect(JSON.stringify(down.body)).not.toMatch(/127\.0\.0\.1|ECONN|password|postgres/i);

    await proxy.up();
    const back = await until(() => readyz(service), { accept: (r) => r.status === 200, what: 'readyz to recover' });
    expect(back.body).toEqual({ status: 'ready', checks: { store: 'ok', ledger: 'ok', blobs: 'ok' } });
  });
});
