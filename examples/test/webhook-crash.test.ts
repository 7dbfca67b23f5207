import express from 'express';
import type { Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from '@genservice/testing';
import { startHost, tempData, type RunningHost } from './helpers.js';

const users = [{ id: 'alice', apiKey: 'alice-key-0123456789abcdef', balance: 1000 }];
const auth = { authorization: `Bearer ${users[0]!.apiKey}` };

// issue 11: SIGKILL a host while webhook deliveries are in flight; restart it on the same data: every event arrives.
describe('webhook delivery across a SIGKILL (SQLite, express-host)', () => {
  const data = tempData(users);
  let host: RunningHost | undefined;
  let server: Server | undefined;
  afterAll(async () => {
    if (host) await host.stop();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    data.cleanup();
  });

  it('delivers every terminal event after the host is killed mid-delivery and restarted', { timeout: 90_000 }, async () => {
    let secret = '';
    const verified = new Map<string, number>();
    let hold = true;
    /** Deliveries the slow receiver is holding (in flight when the host dies). */
    let holding = 0;
    const app = express();
    app.post('/hook', express.raw({ type: 'application/json' }), (req, res) => {
      const body = (req.body as Buffer).toString('utf8');
      const headers = { 'webhook-id': String(req.header('webhook-id')), 'webhook-timestamp': String(req.header('webhook-timestamp')), 'webhook-signature': String(req.header('webhook-signature')) };
      // While the first host runs, answer slowly: its deliveries are in flight when it dies.
      const answer = (): void => {
        try {
          const event = new Webhook(secret).verify(body, headers) as { type: string; data: { generationId: string } };
          if (event.type === 'generation.completed') verified.set(event.data.generationId, (verified.get(event.data.generationId) ?? 0) + 1);
          res.sendStatus(204);
        } catch {
          res.sendStatus(400);
        }
      };
      if (hold) {
        holding++;
        setTimeout(answer, 10_000);
      } else answer();
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const hookUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
    const env = {
      USERS_FILE: data.usersFile,
      DATA_DIR: data.dir,
      DEMO_SPEED: '0.01',
      ALLOW_PRIVATE_WEBHOOKS: '1',
      WEBHOOK_TIMEOUT_MS: '1500',
      WEBHOOK_LEASE_MS: '2000',
      RECOVERY_INTERVAL_MS: '300',
    };
    host = await startHost('express', env);
    secret = ((await (await fetch(`${host.api}/v1/webhooks/secret`, { headers: auth })).json()) as { key: string }).key;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'demo-text', settings: { prompt: `story ${i}` }, webhook: { url: hookUrl, events: ['generation.completed'] } }),
      });
      expect(r.status, await r.clone().text()).toBe(201);
      ids.push(((await r.json()) as { generationId: string }).generationId);
    }
    // Wait until deliveries are being attempted (and held by the slow receiver), then kill the host.
    await until(
      async () => {
        const d = (await (await fetch(`${host!.api}/v1/generations/${ids[0]}/webhook-deliveries`, { headers: auth })).json()) as { data: unknown[] };
        return d.data.length;
      },
      { accept: (n) => n > 0, timeoutMs: 30_000, intervalMs: 50 },
    );
    // A delivery is in flight: the receiver holds it.
    await until(async () => holding, { accept: (n) => n > 0 });
    await host.kill();
    hold = false;
    host = await startHost('express', env);
    await until(async () => ids.filter((id) => verified.has(id)).length, { accept: (n) => n === ids.length, timeoutMs: 60_000, intervalMs: 100 });
    // At least once: every generation's completed event arrived with a valid signature.
    for (const id of ids) expect(verified.get(id)).toBeGreaterThanOrEqual(1);
    const deliveries = (await (await fetch(`${host.api}/v1/generations/${ids[0]}/webhook-deliveries`, { headers: auth })).json()) as {
      data: Array<{ type: string; state: string; attempts: unknown[] }>;
    };
    expect(deliveries.data.find((d) => d.type === 'generation.completed')?.state).toBe('delivered');
  });
});
