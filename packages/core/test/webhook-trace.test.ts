// Webhook deliveries continue the trace of the generation they are about: each delivery carries the create's
// `traceparent`, and every attempt's `genservice.webhook.deliver` span is its child, never a new trace and never a child
// of whatever span is active where the delivery loop was woken. A real receiver on loopback, an in-memory exporter.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, MemoryWebhookStore } from '@genservice/core';
import { until } from '@genservice/testing';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

// What an OpenTelemetry SDK for Node sets up: the active span follows async work (so an unrelated one could leak in).
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  contextManager.disable();
  context.disable();
});

/** A receiver on loopback that answers 204 to everything and keeps the `webhook-id` of each request. */
async function receiver(): Promise<{ url: string; ids: string[] }> {
  const ids: string[] = [];
  const server: Server = createServer((req, res) => {
    ids.push(String(req.headers['webhook-id']));
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, ids };
}

describe('webhook delivery spans', () => {
  it("continue the generation's trace as children of its create span, even when another span is active", async () => {
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    const hooks = new MemoryWebhookStore();
    const hook = await receiver();
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
          generate: async () => ({ text: 'hello' }),
        },
      ],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      recovery: { intervalMs: 0 },
      webhookStore: hooks,
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10 },
      telemetry: { tracerProvider },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();

    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const created = await service.handle({
      method: 'POST',
      path: '/v1/generations',
      headers: { authorization: 'Bearer ka', 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ modelId: 'ok', webhook: { url: hook.url, events: ['generation.completed', 'generation.deleted'] } }),
    });
    expect(created.status).toBe(201);
    const { generationId } = JSON.parse(String(created.body)) as { generationId: string };
    const delivered = async (type: string) => (await hooks.deliveriesOf(generationId)).some((d) => d.type === type && d.state === 'delivered');
    await until(() => delivered('generation.completed'), 'generation.completed delivered');
    // Deleting the generation deletes its earlier deliveries: keep them here.
    const beforeDelete = await hooks.deliveriesOf(generationId);

    // The deletion's delivery is written, and its loop woken, inside a span of another trace.
    const unrelated = tracerProvider.getTracer('test').startSpan('unrelated');
    const deleted = await context.with(trace.setSpan(context.active(), unrelated), () =>
      service.handle({ method: 'DELETE', path: `/v1/generations/${generationId}`, headers: { authorization: 'Bearer ka' } }),
    );
    unrelated.end();
    expect(deleted.status).toBeLessThan(300);
    await until(() => delivered('generation.deleted'), 'generation.deleted delivered');

    const finished: ReadableSpan[] = spans.getFinishedSpans();
    const create = finished.find((s) => s.name === 'genservice.create')!;
    expect(create, finished.map((s) => s.name).join()).toBeDefined();
    expect(create.spanContext().traceId).toBe(traceId);
    const stored = [...beforeDelete, ...(await hooks.deliveriesOf(generationId))];
    expect(stored.map((d) => d.type).sort()).toEqual(['generation.completed', 'generation.deleted']);
    for (const d of stored) expect(d.traceparent).toBe(`00-${traceId}-${create.spanContext().spanId}-01`);

    const deliveries = finished.filter((s) => s.name === 'genservice.webhook.deliver');
    expect(deliveries.map((s) => s.attributes['genservice.delivery_id']).sort()).toEqual(stored.map((d) => d.id).sort());
    expect(hook.ids.sort()).toEqual(stored.map((d) => d.id).sort());
    for (const span of deliveries) {
      expect(span.spanContext().traceId).toBe(traceId);
      expect(span.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    }
    expect(unrelated.spanContext().traceId).not.toBe(traceId);
  });
});
