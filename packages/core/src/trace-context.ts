import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type Context,
  context,
  createTraceState,
  defaultTextMapGetter,
  defaultTextMapSetter,
  propagation,
  ROOT_CONTEXT,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
  TraceFlags,
} from '@opentelemetry/api';

// No tsyringe here: `@genservice/core/ports` re-exports `currentTraceparent` and `traceHeaders`, and that entry loads
// no DI.

/**
 * Propagation fields, as a request's headers carry them (lower-case names; a repeated header's values as an array)
 * or as a job carries them (`Job.trace`).
 */
export type TraceCarrier = Readonly<Record<string, string | readonly string[] | undefined>>;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

function first(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : value?.[0];
}

/** A W3C `traceparent` value's span context (remote), or undefined when it is not a valid version-00 one. */
function spanContextOf(traceparent: string | undefined): SpanContext | undefined {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent.trim());
  if (!m) return undefined;
  const sc: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED, isRemote: true };
  return trace.isSpanContextValid(sc) ? sc : undefined;
}

/**
 * W3C Trace Context (`traceparent` and `tracestate`), used only where the host registered no propagator of its own
 * (an SDK's `register()` installs W3C trace context and baggage; `propagation.setGlobalPropagator` another): then a
 * client's `traceparent` and `tracestate` are still continued, as they were before any SDK was set up.
 */
const w3cTraceContext: TextMapPropagator<TraceCarrier> = {
  inject(ctx: Context, carrier: TraceCarrier, setter: TextMapSetter<TraceCarrier>): void {
    const sc = trace.getSpanContext(ctx);
    if (!sc || !trace.isSpanContextValid(sc)) return;
    setter.set(carrier, 'traceparent', traceparentOf(sc));
    const state = sc.traceState?.serialize();
    if (state) setter.set(carrier, 'tracestate', state);
  },
  extract(ctx: Context, carrier: TraceCarrier, getter: TextMapGetter<TraceCarrier>): Context {
    const sc = spanContextOf(first(getter.get(carrier, 'traceparent')));
    if (!sc) return ctx;
    const state = getter.get(carrier, 'tracestate');
    const raw = typeof state === 'string' ? state : state?.join(',');
    if (raw) sc.traceState = createTraceState(raw);
    return trace.setSpanContext(ctx, sc);
  },
  fields: () => ['traceparent', 'tracestate'],
};

/** The host's registered propagator (`propagation.setGlobalPropagator`, an SDK's `register()`), else W3C trace context. */
function propagator(): Pick<TextMapPropagator<TraceCarrier>, 'inject' | 'extract'> {
  return propagation.fields().length > 0 ? propagation : w3cTraceContext;
}

/**
 * The context a request's (or a job's) propagation fields describe, through the host's propagator (W3C trace context
 * without one): the remote parent span with its `tracestate`, and whatever else the propagator reads (baggage).
 * Undefined when the carrier holds nothing the propagator reads.
 */
export function contextOfHeaders(carrier: TraceCarrier, base: Context = ROOT_CONTEXT): Context | undefined {
  const ctx = propagator().extract(base, carrier, defaultTextMapGetter as TextMapGetter<TraceCarrier>);
  return ctx === base ? undefined : ctx;
}

/**
 * The propagation fields of `ctx` (default: the active context), through the host's propagator (W3C trace context
 * without one): `traceparent` and `tracestate`, and whatever else the propagator writes. Empty without a valid span.
 * Providers send them with their upstream requests; a job carries them to its run.
 */
export function traceHeaders(ctx: Context = activeContext()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagator().inject(ctx, carrier, defaultTextMapSetter as TextMapSetter<TraceCarrier>);
  return carrier;
}

/** A W3C `traceparent` stored with a generation (genservice's own record of a span), as the parent context of spans. */
export function contextOfTraceparent(traceparent: string | undefined): Context | undefined {
  const sc = spanContextOf(traceparent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : undefined;
}

/**
 * The parent context of a run: the propagation fields its job carried from the create (its `tracestate` and
 * baggage too), else the `traceparent` stored with the generation (a job re-enqueued from the store carries none),
 * else none (a new trace).
 */
export function continuedContext(carrier: TraceCarrier | undefined, traceparent: string | undefined): Context {
  let ctx = (carrier && contextOfHeaders(carrier)) ?? ROOT_CONTEXT;
  if (!trace.getSpanContext(ctx)) {
    const sc = spanContextOf(traceparent);
    if (sc) ctx = trace.setSpanContext(ctx, sc);
  }
  return ctx;
}

/** The W3C `traceparent` of the active span (under `ctx`), or undefined without a valid one (no SDK: none). */
export function currentTraceparent(ctx: Context = activeContext()): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? traceparentOf(sc) : undefined;
}

/** A span context as a W3C `traceparent` value. */
export function traceparentOf(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * The span context genservice's spans run under when the host has no context manager that follows async work: a
 * host that passes `telemetry.tracerProvider` without registering an SDK globally has the API's no-op manager, under
 * which `context.active()` is always the root, so a provider call's span (made after awaits inside its run) would
 * start a trace of its own. Used only then, and only for a span that is traced (a valid span context).
 */
const own = new AsyncLocalStorage<Context>();

/** `fn` with `ctx` active: through the host's context manager, or genservice's own when the host's does not keep it. */
export function runInContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, () => {
    if (context.active() === ctx) return fn();
    const sc = trace.getSpanContext(ctx);
    return sc && trace.isSpanContextValid(sc) ? own.run(ctx, fn) : fn();
  });
}

/** The active context: the host's context manager's, else the one genservice runs a traced span under. */
export function activeContext(): Context {
  const active = context.active();
  return active === ROOT_CONTEXT ? (own.getStore() ?? active) : active;
}
