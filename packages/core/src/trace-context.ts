import { type Context, context, ROOT_CONTEXT, type SpanContext, trace, TraceFlags } from '@opentelemetry/api';

// No tsyringe here: `@genservice/core/ports` re-exports `currentTraceparent`, and that entry loads no DI.

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C `traceparent` header's span context, as the parent of spans made under the returned context. */
export function contextOfTraceparent(traceparent: string | undefined): Context | undefined {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (!m) return undefined;
  const spanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED, isRemote: true };
  return trace.isSpanContextValid(spanContext) ? trace.setSpanContext(ROOT_CONTEXT, spanContext) : undefined;
}

/** The W3C `traceparent` of the active span (under `ctx`), or undefined without a valid one (no SDK: none). */
export function currentTraceparent(ctx: Context = context.active()): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? traceparentOf(sc) : undefined;
}

/** A span context as a W3C `traceparent` value. */
export function traceparentOf(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * Metrics and spans, through the OpenTelemetry API only: without an SDK registered (or providers given in the
 * `telemetry` option) every instrument is a no-op and every span a non-recording one.
 */
