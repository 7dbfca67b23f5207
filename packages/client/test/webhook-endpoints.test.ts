// client.webhookEndpoints against core's service on the Express adapter, over real sockets: a receiver on loopback
// gets a delivery that verifyWebhook accepts with the endpoint's secret, the log shows it, a replay sends it again.
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { MemoryApiKeyStore, MemoryLedger, createGenerationService, type GenerationService } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import { InvalidRequestError, NotFoundError, createClient, verifyWebhook } from '../src/index.js';
import { until } from '@genservice/testing';

let service: GenerationService;
let server: Server;
let receiver: Server;
let baseUrl: string;
let hookUrl: string;
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

beforeAll(async () => {
  service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
        generate: async () => ({ text: 'echo' }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'erin-key', userId: 'erin' }, { apiKey: 'frank-key', userId: 'frank' }] }),
    ledger: new MemoryLedger({ balances: { erin: 20 } }),
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 20 },
  });
  await service.start();
  const app = express();
  app.use('/api', genserviceRouter(service));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});

afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  await new Promise((r) => server.close(r));
  await service.stop();
});

describe('client.webhookEndpoints', () => {
  it('creates, reads, changes, delivers (verified), logs, replays, rotates and deletes; refusals are typed errors', async () => {
    const client = createClient({ baseUrl, apiKey: 'erin-key' });
    const made = await client.webhookEndpoints.create({ url: hookUrl, events: ['generation.completed'], description: 'ci' });
    expect(made).toMatchObject({ url: hookUrl, events: ['generation.completed'], description: 'ci', status: 'enabled' });
    expect(await client.webhookEndpoints.list()).toEqual([await client.webhookEndpoints.get(made.id)]);
    expect(await client.webhookEndpoints.update(made.id, { description: null })).toMatchObject({ description: null });

    const generation = await client.generations.create({ modelId: 'echo' });
    await until(() => received.length === 1, { what: 'the delivery', timeoutMs: 5000 });
    const event = await verifyWebhook(made.secret, received[0]!.body, received[0]!.headers as Record<string, string>);
    expect(event).toMatchObject({ type: 'generation.completed', data: { generationId: generation.generationId } });
    const [delivery] = await until(() => client.webhookEndpoints.deliveries(made.id, { limit: 10 }), { accept: (d) => d[0]?.state === 'delivered', timeoutMs: 5000 });
    expect(delivery).toMatchObject({ id: received[0]!.headers['webhook-id'], generationId: generation.generationId, attempts: [{ status: 204 }] });

    const rotated = await client.webhookEndpoints.rotateSecret(made.id);
    expect(typeof rotated.previousSecretExpiresAt).toBe('string');
    expect((await client.webhookEndpoints.replay(made.id, delivery!.id)).state).toBe('pending');
    await until(() => received.length === 2, { what: 'the replay', timeoutMs: 5000 });
    // Signed with both secrets during the overlap: each one verifies it.
    for (const secret of [made.secret, rotated.secret]) await verifyWebhook(secret, received[1]!.body, received[1]!.headers as Record<string, string>);

    await expect(client.webhookEndpoints.create({ url: 'ftp://example.com/x' })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(createClient({ baseUrl, apiKey: 'frank-key' }).webhookEndpoints.get(made.id)).rejects.toBeInstanceOf(NotFoundError);
    await client.webhookEndpoints.delete(made.id);
    await expect(client.webhookEndpoints.get(made.id)).rejects.toBeInstanceOf(NotFoundError);
  });
});
