// Trace context through the OpenTelemetry API: a host that passes `telemetry.tracerProvider` and registers nothing
// globally (no context manager, no propagator) still gets one trace create -> run -> provider call, with the client's
// `tracestate` kept; a host that registers a propagator of its own has it used to read the request and to write the
// provider's upstream headers. An in-memory exporter; no global context manager in this file.
import {
  type Context,
  context,
  propagation,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, traceHeaders, type ModelProvider } from '@genservice/core';
import { contextOfHeaders, continuedContext } from '../src/trace-context.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  propagation.disable();
});

/** A provider whose generate records the propagation fields it would send upstream (as the real providers do). */
function recordingProvider(): { provider: ModelProvider; sent: Array<Record<string, string>> } {
  const sent: Array<Record<string, string>> = [];
  const provider: ModelProvider = {
    models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
    generate: async () => {
      // After an await, as a real provider's fetch is: the provider span must still be the active one.
      await new Promise((r) => setImmediate(r));
      sent.push(traceHeaders());
      return { text: 'ok' };
    },
  };
  return { provider, sent };
}

async function traced(headers: Record<string, string>): Promise<{ spans: ReadableSpan[]; sent: Array<Record<string, string>> }> {
  const exporter = new InMemorySpanExporter();
  // The run's span ends after the generation is stored as completed: the test waits for that, not for time.
  let runEnded!: () => void;
  const ran = new Promise<void>((resolve) => (runEnded = resolve));
  const onRunEnd: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => {
      if (span.name === 'genservice.run') runEnded();
    },
    forceFlush: async () => undefined,
    shutdown: async () => undefined,
  };
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), onRunEnd] });
  const { provider, sent } = recordingProvider();
  const service = createGenerationService({
    providers: [provider],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    recovery: { intervalMs: 0 },
    telemetry: { tracerProvider },
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  await service.start();
  const created = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: 'Bearer ka', 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ modelId: 'echo' }),
  });
  expect(created.status).toBe(201);
  const { generationId } = JSON.parse(String(created.body)) as { generationId: string };
  await ran;
  expect((await service.get('alice', generationId)).status).toBe('completed');
  return { spans: exporter.getFinishedSpans(), sent };
}

function one(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((s) => s.name === name);
  expect(found.map((s) => s.name), spans.map((s) => s.name).join()).toEqual([name]);
  return found[0]!;
}

describe('trace context without a global context manager or propagator (telemetry.tracerProvider only)', () => {
  it('one trace: create (child of the client) -> run -> provider call, each the child of the one before, tracestate kept', async () => {
    // The precondition: the API's no-op context manager (nothing registered), under which `with` keeps nothing.
    const marked = context.active().setValue(Symbol('mark'), 1);
    expect(context.with(marked, () => context.active())).not.toBe(marked);
    const { spans, sent } = await traced({ traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01`, tracestate: 'vendor=abc,other=1' });
    const create = one(spans, 'genservice.create');
    const run = one(spans, 'genservice.run');
    const call = one(spans, 'genservice.provider.generate');
    for (const span of [create, run, call]) {
      expect(span.spanContext().traceId).toBe(TRACE_ID);
      expect(span.spanContext().traceState?.serialize()).toBe('vendor=abc,other=1');
    }
    expect(create.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
    expect(run.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(call.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    // What the provider sends upstream: its own span, and the tracestate.
    expect(sent).toEqual([{ traceparent: `00-${TRACE_ID}-${call.spanContext().spanId}-01`, tracestate: 'vendor=abc,other=1' }]);
  });

  it('a request without trace headers starts one trace of its own, still create -> run -> provider call', async () => {
    const { spans, sent } = await traced({});
    const create = one(spans, 'genservice.create');
    const run = one(spans, 'genservice.run');
    const call = one(spans, 'genservice.provider.generate');
    expect(create.parentSpanContext).toBeUndefined();
    expect(run.spanContext().traceId).toBe(create.spanContext().traceId);
    expect(call.spanContext().traceId).toBe(create.spanContext().traceId);
    expect(run.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(call.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(sent).toEqual([{ traceparent: `00-${create.spanContext().traceId}-${call.spanContext().spanId}-01` }]);
  });
});

/** A host's own propagator: one `x-trace` header of `<traceId>:<spanId>` (not W3C). */
const xTrace: TextMapPropagator = {
  inject(ctx: Context, carrier: unknown, setter: TextMapSetter) {
    const sc = trace.getSpanContext(ctx);
    if (sc && trace.isSpanContextValid(sc)) setter.set(carrier, 'x-trace', `${sc.traceId}:${sc.spanId}`);
  },
  extract(ctx: Context, carrier: unknown, getter: TextMapGetter) {
    const raw = getter.get(carrier, 'x-trace');
    const [traceId, spanId] = (typeof raw === 'string' ? raw : '').split(':');
    if (!traceId || !spanId) return ctx;
    return trace.setSpanContext(ctx, { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
  },
  fields: () => ['x-trace'],
};

describe("the host's registered propagator", () => {
  it('reads the request and writes the upstream headers (and a W3C traceparent it does not read is ignored)', async () => {
    propagation.setGlobalPropagator(xTrace);
    const { spans, sent } = await traced({ 'x-trace': `${TRACE_ID}:${CLIENT_SPAN}`, traceparent: `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01` });
    const create = one(spans, 'genservice.create');
    const run = one(spans, 'genservice.run');
    const call = one(spans, 'genservice.provider.generate');
    expect(create.spanContext().traceId).toBe(TRACE_ID);
    expect(create.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
    expect(run.parentSpanContext?.spanId).toBe(create.spanContext().spanId);
    expect(call.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(sent).toEqual([{ 'x-trace': `${TRACE_ID}:${call.spanContext().spanId}` }]);
  });
});

describe('contextOfHeaders / continuedContext', () => {
  it('read W3C traceparent and tracestate without a host propagator; nothing from headers that carry none', () => {
    const ctx = contextOfHeaders({ traceparent: [`00-${TRACE_ID}-${CLIENT_SPAN}-01`], tracestate: ['a=1', 'b=2'] })!;
    expect(trace.getSpanContext(ctx)).toMatchObject({ traceId: TRACE_ID, spanId: CLIENT_SPAN, traceFlags: 1, isRemote: true });
    expect(trace.getSpanContext(ctx)?.traceState?.serialize()).toBe('a=1,b=2');
    expect(contextOfHeaders({ 'content-type': 'application/json' })).toBeUndefined();
    expect(contextOfHeaders({ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' })).toBeUndefined();
    expect(contextOfHeaders({ traceparent: 'garbage' })).toBeUndefined();
  });

  it("a run continues its job's carried fields, else the generation's stored traceparent, else a new trace", () => {
    const stored = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01`;
    const carried = continuedContext({ traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01`, tracestate: 'k=v' }, stored);
    expect(trace.getSpanContext(carried)).toMatchObject({ traceId: TRACE_ID, spanId: CLIENT_SPAN });
    expect(trace.getSpanContext(carried)?.traceState?.serialize()).toBe('k=v');
    expect(trace.getSpanContext(continuedContext(undefined, stored))).toMatchObject({ traceId: '1'.repeat(32), spanId: '2'.repeat(16) });
    expect(trace.getSpanContext(continuedContext({}, stored))).toMatchObject({ traceId: '1'.repeat(32) });
    expect(trace.getSpanContext(continuedContext(undefined, undefined))).toBeUndefined();
  });
});
