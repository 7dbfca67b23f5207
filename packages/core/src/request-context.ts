import { AsyncLocalStorage } from 'node:async_hooks';
import { randomFillSync } from 'node:crypto';
import { type Context, context, trace } from '@opentelemetry/api';
import type { Logger } from './ports/logger.js';

/** What every log line written while a request (or a run) is handled carries. */
export interface RequestContext {
  requestId?: string;
  /** Set as soon as it is known: from the path, or when the create made it. */
  generationId?: string;
  /** The route template the request matched (`/v1/generations/{id}`), for the request metric. Internal. */
  route?: string;
  /** The error shape of the matched route (`errorShape` of the route table; internal): `openai` on that surface. */
  errorShape?: 'native' | 'openai';
  /** The client's `traceparent` as a parent context (internal): the create's span continues it. */
  traceContext?: Context;
}

const storage = new AsyncLocalStorage<RequestContext>();

/**
 * Whether anything in this process reads the context: a host logger wrapped by `contextualLogger`. Until then the
 * context is not stored: on Node 20 an AsyncLocalStorage run turns on promise hooks, about 1 µs a request
 * (bench/get-inprocess.ts).
 */
let logReaders = 0;

/**
 * Runs `fn` with `ctx` as the context of every log line written under it (also across awaits), when a contextual
 * logger exists or `needed` says the context carries something else read below (a client's trace parent).
 */
export function withRequestContext<T>(ctx: RequestContext, fn: () => T, needed = false): T {
  return logReaders > 0 || needed ? storage.run(ctx, fn) : fn();
}

/** Whether a log line may read the context (a contextual logger exists): what only a log line reads need not be set before. */
export function contextRead(): boolean {
  return logReaders > 0;
}

/** The context of the request or run being handled, when there is one (mutable: `generationId` is set into it). */
export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

/** Accepted from a client: 1..128 of letters, digits and `-_.:@/+=`; anything else is replaced by a new id. */
const REQUEST_ID = /^[A-Za-z0-9\-_.:@/+=]{1,128}$/;

/**
 * New ids: 16 random bytes (128 bits) as base64url, 22 characters. They say nothing about how many requests came
 * before. The bytes come from a pool that `randomFillSync` refills 256 ids at a time, so a request costs a slice and
 * an encode, not a call into the system's random source: 1.2 to 2 times the prefix and counter it replaces (0.13
 * against 0.09 µs an id on a quiet run, tens of nanoseconds in a request of tens of microseconds), and a twentieth of
 * a `randomBytes(16)` per id (node 20, loops of 2M, issue 37).
 */
const ID_BYTES = 16;
const POOL_IDS = 256;
const pool = Buffer.allocUnsafe(ID_BYTES * POOL_IDS);
let poolOffset = pool.length;

function newRequestId(): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const start = poolOffset;
  poolOffset += ID_BYTES;
  return pool.toString('base64url', start, poolOffset);
}

/** The client's `X-Request-Id` when it is acceptable, else a new random one (22 characters, base64url). */
export function requestIdOf(given: string | string[] | undefined): string {
  const value = Array.isArray(given) ? given[0] : given;
  if (value !== undefined && REQUEST_ID.test(value)) return value;
  return newRequestId();
}

/** The trace id of the active span, when an OpenTelemetry SDK made one. */
export function activeTraceId(): string | undefined {
  const span = trace.getSpanContext(context.active());
  return span && trace.isSpanContextValid(span) ? span.traceId : undefined;
}

type Level = 'debug' | 'info' | 'warn' | 'error';

/**
 * The host's logger, with the request id, generation id and trace id of the current request or run added to every
 * line (a field the call itself gives wins).
 */
export function contextualLogger(logger: Logger): Logger {
  logReaders++;
  const at =
    (level: Level) =>
    (obj: Record<string, unknown>, msg?: string): void => {
      const ctx = storage.getStore();
      const traceId = activeTraceId() ?? (ctx?.traceContext ? trace.getSpanContext(ctx.traceContext)?.traceId : undefined);
      if (ctx === undefined && traceId === undefined) return logger[level](obj, msg);
      const extra: Record<string, unknown> = {};
      if (ctx?.requestId !== undefined) extra.requestId = ctx.requestId;
      if (ctx?.generationId !== undefined) extra.generationId = ctx.generationId;
      if (traceId !== undefined) extra.traceId = traceId;
      logger[level]({ ...extra, ...obj }, msg);
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    ...(logger.child ? { child: (bindings: Record<string, unknown>) => contextualLogger(logger.child!(bindings)) } : {}),
  };
}
