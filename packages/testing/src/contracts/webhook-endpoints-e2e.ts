import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { createGenerationService, type GenerationServiceOptions } from '@genservice/core';
import { until } from '../until.js';

/** The durable stores a service needs for registered webhook endpoints, as a store package's factory gives them. */
export type WebhookEndpointStores = Required<Pick<GenerationServiceOptions, 'store' | 'ledger' | 'apiKeys' | 'idempotency' | 'webhookStore' | 'auditLog'>> & {
  apiKeys: { addKey(apiKey: string, userId: string): unknown };
  ledger: { credit(userId: string, amount: number): Promise<void> };
};

function signedBy(secret: string, r: { headers: IncomingHttpHeaders; body: string }): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const sig = createHmac('sha256', key).update(`${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`).digest('base64');
  return String(r.headers['webhook-signature']).split(' ').includes(`v1,${sig}`);
}

/**
 * Webhook endpoints end to end on a durable store (issue 41): registered over HTTP, delivered to a receiver on
 * loopback from the store's outbox, signed with the endpoint's secret (checked by the Standard Webhooks HMAC), logged
 * and replayed after a rotation with both signatures. `open` gives the stores and what closes them.
 */
export function describeWebhookEndpointsEndToEnd(label: string, open: () => Promise<{ stores: WebhookEndpointStores; close(): Promise<unknown> }>): void {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  });

  it(`registers an endpoint, delivers to it signed with its secret, logs the attempts and replays the same message (${label})`, async () => {
    let accept = false;
    const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(accept ? 200 : 500).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

    const { stores, close } = await open();
    cleanups.push(close);
    await stores.apiKeys.addKey('ka', 'alice');
    await stores.ledger.credit('alice', 100);
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'hi' }) }],
      store: stores.store,
      ledger: stores.ledger,
      apiKeys: stores.apiKeys,
      idempotency: stores.idempotency,
      webhookStore: stores.webhookStore,
      auditLog: stores.auditLog,
      recovery: { intervalMs: 0 },
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 20, retrySchedule: [3_600_000] },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();
    const send = async (method: string, path: string, body?: unknown) => {
      const r = await service.handle({ method, path, headers: { authorization: 'Bearer ka', 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
      return { status: r.status, body: r.body === '' ? undefined : JSON.parse(String(r.body)) };
    };

    const description = `${label} \u2603`;
    const made = await send('POST', '/v1/webhook-endpoints', { url, events: ['generation.completed'], description });
    expect(made.status).toBe(201);
    const gen = (await send('POST', '/v1/generations', { modelId: 'ok' })).body.generationId as string;
    await until(() => received.length === 1, 'the first attempt');
    expect(signedBy(made.body.secret, received[0]!)).toBe(true);
    const log = async () => (await send('GET', `/v1/webhook-endpoints/${made.body.id}/deliveries`)).body.data;
    await until(async () => (await log())[0]?.attempts.length === 1, 'the attempt logged');
    const [d] = await log();
    expect(d).toMatchObject({ type: 'generation.completed', generationId: gen, state: 'pending', attempts: [{ status: 500 }] });

    // Rotated: the replay carries both signatures, and the receiver now accepts.
    const rotated = await send('POST', `/v1/webhook-endpoints/${made.body.id}/rotate-secret`);
    accept = true;
    expect((await send('POST', `/v1/webhook-endpoints/${made.body.id}/deliveries/${d.id}/replay`)).status).toBe(202);
    await until(async () => (await log())[0]?.state === 'delivered', 'the replay delivered');
    const replayed = received[1]!;
    expect(replayed.headers['webhook-id']).toBe(d.id);
    expect(signedBy(made.body.secret, replayed) && signedBy(rotated.body.secret, replayed)).toBe(true);
    expect((await send('GET', '/v1/webhook-endpoints')).body.data).toMatchObject([{ id: made.body.id, description, status: 'enabled' }]);
  });
}
