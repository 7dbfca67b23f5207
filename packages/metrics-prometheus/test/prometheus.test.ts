import { createGenerationService, METRIC_NAMES, MemoryApiKeyStore, MemoryLedger } from '@genservice/core';
import { createScriptedProvider, failingScript, fakeModel, textScript, until } from '@genservice/testing';
import { describe, expect, it } from 'vitest';
import { createPrometheusMetrics } from '../src/index.js';

describe('createPrometheusMetrics', () => {
  it('serves every genservice instrument under exactly its documented Prometheus name, with route templates', async () => {
    const prom = createPrometheusMetrics();
    const provider = createScriptedProvider({
      models: [fakeModel({ modelId: 'ok', title: 'OK', price: 3 }), fakeModel({ modelId: 'bad', title: 'Fails', price: 5, failureFee: 1 })],
      scripts: { ok: textScript('hi'), bad: failingScript('boom') },
    });
    const apiKeys = new MemoryApiKeyStore();
    await apiKeys.addKey('key-of-user-1-0000', 'u1');
    const ledger = new MemoryLedger({ balances: { u1: 100 } });
    const service = createGenerationService({ providers: [provider], apiKeys, ledger, telemetry: { meterProvider: prom.meterProvider } });
    await service.start();
    try {
      const auth = { authorization: 'Bearer key-of-user-1-0000' };
      const ids: string[] = [];
      for (const modelId of ['ok', 'ok', 'bad']) {
        const r = await service.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId }) });
        expect(r.status).toBe(201);
        ids.push(JSON.parse(String(r.body)).generationId);
      }
      await until(async () => {
        for (const id of ids) if (!['completed', 'failed'].includes((await service.get('u1', id)).status)) return false;
        return true;
      }, 'the generations to finish');
      // A run leaves the in-flight count just after its generation's last change: a poll may see it finished first.
      await until(async () => /^genservice_generations_in_flight 0$/m.test(await prom.scrape()), 'the runs to end');
      await service.handle({ method: 'GET', path: `/v1/generations/${ids[0]}`, headers: auth });
      const text = await prom.scrape();
      const names = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
      for (const name of METRIC_NAMES.filter((n) => !n.startsWith('genservice_webhook'))) expect(names, name).toContain(name);
      expect(text).toMatch(/^genservice_generations_created_total\{model="ok"\} 2$/m);
      expect(text).toMatch(/^genservice_generations_finished_total\{model="ok",status="completed",code=""\} 2$/m);
      expect(text).toMatch(/^genservice_generations_finished_total\{model="bad",status="failed",code="provider_error"\} 1$/m);
      expect(text).toMatch(/^genservice_tokens_charged_total\{model="ok"\} 6$/m);
      expect(text).toMatch(/^genservice_generation_run_seconds_count\{model="ok"\} 2$/m);
      expect(text).toMatch(/^genservice_queue_wait_seconds_count\{model="bad"\} 1$/m);
      expect(text).toMatch(/^genservice_http_requests_total\{route="\/v1\/generations",status="201"\} 3$/m);
      expect(text).toMatch(/^genservice_http_requests_total\{route="\/v1\/generations\/\{id\}",status="200"\} 1$/m);
      expect(text).toMatch(/^genservice_generations_in_flight 0$/m);
      expect(text).toMatch(/^genservice_event_streams_open 0$/m);
      // Never a raw id in a label.
      for (const id of ids) expect(text).not.toContain(id);
    } finally {
      await service.stop();
      await prom.shutdown();
    }
  });
});
