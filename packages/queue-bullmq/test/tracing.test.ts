import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, type GenerationService } from '@genservice/core';
import { createReplicateProvider } from '@genservice/providers';
import { until } from '@genservice/testing';
import { fakeReplicate } from '../../providers/test/fakes.js';
import { BullMQQueue } from '../src/index.js';
import { REDIS_URL, freshStores, obliterate, randomName } from './helpers.js';

const TOKEN = 'r8_trace_test_token';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

// What an OpenTelemetry SDK for Node sets up: the active span follows async work.
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  contextManager.disable();
  context.disable();
});

describe('tracing across instances', () => {
  it('one trace from the POST (with a client traceparent) through a BullMQ run on a second instance and its provider calls', async () => {
    const stores = await freshStores();
    const prefix = randomName('gs-trace');
    cleanups.push(() => stores.drop(), () => obliterate(prefix));
    await stores.ledger.credit('u', 100);
    const upstream = await fakeReplicate(TOKEN, { checksToFinish: 1, result: 'text' });
    cleanups.push(() => upstream.close());
    const apiKeys = new MemoryApiKeyStore();
    await apiKeys.addKey('trace-user-key-0123456789', 'u');

    // Each instance has its own SDK and exporter, as two processes would.
    const instance = (runs: boolean): { service: GenerationService; spans: InMemorySpanExporter } => {
      const spans = new InMemorySpanExporter();
      const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
      const service = createGenerationService({
        providers: [
          createReplicateProvider({
            apiToken: TOKEN,
            baseUrl: upstream.url,
            models: [{ modelId: 'llm', title: 'LLM', resultType: 'text', estimatedGenerationTime: 0.05, price: 5, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }], model: 'meta/llm' }],
          }),
        ],
        store: stores.store,
        ledger: stores.ledger,
        apiKeys,
        idempotency: stores.idempotency,
        queue: new BullMQQueue({ connection: REDIS_URL, prefix, concurrency: 2, lockDurationMs: 2000 }),
        runner: { enabled: runs, leaseMs: 2000 },
        recovery: { intervalMs: 0 },
        telemetry: { tracerProvider },
      });
      cleanups.push(() => service.stop({ timeoutMs: 2000 }));
      return { service, spans };
    };
    const api = instance(false);
    const worker = instance(true);
    await api.service.start();
    await worker.service.start();

    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const created = await api.service.handle({
      method: 'POST',
      path: '/v1/generations',
      headers: {
        authorization: 'Bearer trace-user-key-0123456789',
        'content-type': 'application/json',
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
      body: JSON.stringify({ modelId: 'llm', settings: { prompt: 'hi' } }),
    });
    expect(created.status).toBe(201);
    const { generationId } = JSON.parse(String(created.body)) as { generationId: string };
    await until(async () => (await api.service.get('u', generationId)).status === 'completed', { what: 'the worker to complete it', timeoutMs: 20_000, intervalMs: 50 });

    const apiSpans = api.spans.getFinishedSpans();
    const create = apiSpans.find((s) => s.name === 'genservice.create')!;
    expect(create, apiSpans.map((s) => s.name).join()).toBeDefined();
    expect(create.spanContext().traceId).toBe(traceId);
    expect(create.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(create.attributes['genservice.generation_id']).toBe(generationId);
    // The API instance runs nothing.
    expect(apiSpans.some((s) => s.name === 'genservice.run')).toBe(false);

    await until(() => worker.spans.getFinishedSpans().some((s) => s.name === 'genservice.run' && s.status.code !== 2), { what: 'the run spans', timeoutMs: 5000, intervalMs: 20 });
    const workerSpans: ReadableSpan[] = worker.spans.getFinishedSpans();
    const runs = workerSpans.filter((s) => s.name === 'genservice.run');
    expect(runs.length).toBeGreaterThanOrEqual(1);
    for (const run of runs) {
      // The second instance continues the trace of the create, as the create's child.
      expect(run.spanContext().traceId).toBe(traceId);
      expect(run.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
      expect(run.attributes['genservice.generation_id']).toBe(generationId);
    }
    expect(typeof runs[0]!.attributes['genservice.queue_wait_ms']).toBe('number');
    const calls = workerSpans.filter((s) => s.name.startsWith('genservice.provider.'));
    expect(calls.map((s) => s.name)).toEqual(expect.arrayContaining(['genservice.provider.start', 'genservice.provider.check']));
    for (const call of calls) {
      expect(call.spanContext().traceId).toBe(traceId);
      expect(runs.map((r) => r.spanContext().spanId)).toContain(call.parentSpanContext?.spanId);
    }
    // The provider's HTTP calls carried their span's traceparent to the upstream API.
    const sent = upstream.requests.filter((r) => r.path.startsWith('/v1/')).map((r) => r.traceparent);
    expect(sent.length).toBeGreaterThanOrEqual(2);
    for (const tp of sent) {
      expect(tp).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      expect(calls.map((c) => c.spanContext().spanId)).toContain(tp!.split('-')[2]);
    }
  }, 40_000);
});
