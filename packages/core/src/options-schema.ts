import { DEFAULT_PRIORITY_MULTIPLIERS, PRIORITIES } from './domain/priority.js';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { hashApiKey, MAX_API_KEY_LENGTH } from './domain/ids.js';
import { systemClock } from './clock.js';
import { DEFAULT_UPLOAD_TYPES, type GenerationServiceOptions } from './options.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { BUILTIN_FIELD_TYPES, DEFAULT_LIMITS } from './settings/compile.js';

/** A longer admin key could never be sent: the Authorization header is read up to this length (`bearerKey`). */
const TOO_LONG = `an admin key must be at most ${MAX_API_KEY_LENGTH} characters, the longest a request's bearer key may be`;

/** An object with these methods: what a port option must at least be. */
function port(...methods: string[]): z.ZodType {
  return z.custom<object>(
    (v) => typeof v === 'object' && v !== null && methods.every((m) => typeof (v as Record<string, unknown>)[m] === 'function'),
    { message: `must be an object with the methods ${methods.join(', ')}` },
  );
}

const positiveInt = z.number().int().positive();
/** A price multiplier of a priority: finite, from 0 to 1000. */
const multiplier = z.number().min(0).max(1000);
const nonNegativeInt = z.number().int().nonnegative();
const ms = z.number().int().nonnegative().max(2 ** 31 - 1);
const rule = z.strictObject({ points: positiveInt, durationSeconds: positiveInt.max(31 * 24 * 3600) });

const providerSchema = z.custom<object>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    Array.isArray((v as { models?: unknown }).models) &&
    (typeof (v as { generate?: unknown }).generate === 'function' ||
      (typeof (v as { start?: unknown }).start === 'function' && typeof (v as { check?: unknown }).check === 'function')),
  { message: 'must be a provider: { models, generate(input, ctx) } or a remote-job provider { models, start, check, cancel? }' },
);

/** Every option, checked at once, so one error lists every mistake. Unknown keys are mistakes too (a typo). */
export const optionsSchema = z.strictObject({
  health: z
    .strictObject({
      timeoutMs: positiveInt.max(60_000).optional(),
      checks: z.record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'check names are letters, digits, _ and -'), z.custom<() => unknown>((v) => typeof v === 'function', { message: 'must be a function' })).optional(),
    })
    .optional(),
  uploads: z
    .strictObject({
      maxBytes: positiveInt.optional(),
      types: z.array(z.string().regex(/^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/, 'a content type in lower case, such as image/png')).min(1).optional(),
      ttlSeconds: positiveInt.optional(),
    })
    .optional(),
  telemetry: z.strictObject({ meterProvider: port('getMeter').optional(), tracerProvider: port('getTracer').optional() }).optional(),
  priority: z
    .strictObject({
      multipliers: z.strictObject({ low: multiplier.optional(), normal: multiplier.optional(), high: multiplier.optional() }).optional(),
      scoped: z.array(z.enum(PRIORITIES)).optional(),
    })
    .optional(),
  providers: z.array(providerSchema),
  store: port('insert', 'get', 'getById', 'update', 'renewLeases', 'listUnfinished', 'list', 'eventsOf', 'readFeed', 'feedHead', 'listFinishedBefore', 'listLifeEndedBefore', 'remove').optional(),
  ledger: port('reserve', 'settle', 'release', 'balance', 'credit', 'openAccount', 'account', 'openReserves', 'keySpend', 'usage').optional(),
  auditLog: port('append', 'list').optional(),
  apiKeys: port('resolve').optional(),
  apiKeyCache: z.strictObject({ ttlMs: ms, max: positiveInt.optional() }).optional(),
  blobs: port('put', 'get', 'delete').optional(),
  queue: port('enqueue', 'start', 'stop').optional(),
  capacity: port('acquire', 'release', 'pause').optional(),
  idempotency: port('begin', 'takeOver', 'finish', 'abandon', 'purgeBefore').optional(),
  logger: port('debug', 'info', 'warn', 'error').optional(),
  clock: port('now', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval').optional(),
  publicUrl: z
    .string()
    .refine((u) => {
      try {
        const url = new URL(u);
        return (url.protocol === 'http:' || url.protocol === 'https:') && url.search === '' && url.hash === '';
      } catch {
        return false;
      }
    }, 'must be an absolute http(s) URL without query or fragment')
    .optional(),
  trustRequestHost: z.boolean().optional(),
  fileUrlSecret: z.string().min(16, 'must be at least 16 characters').optional(),
  fileUrlTtlSeconds: positiveInt.optional(),
  limits: z
    .strictObject({
      bodyBytes: positiveInt.optional(),
      bodyTimeoutMs: positiveInt.optional(),
      mediaUrls: positiveInt.optional(),
      urlLength: positiveInt.optional(),
      textLength: positiveInt.optional(),
      idempotencyKeyLength: positiveInt.max(255).optional(),
      inFlightPerUser: positiveInt.optional(),
      streamsPerUser: positiveInt.optional(),
      streamsTotal: positiveInt.optional(),
    })
    .optional(),
  runner: z
    .strictObject({
      concurrency: positiveInt.optional(),
      leaseMs: ms.min(100).optional(),
      retryBaseDelayMs: ms.optional(),
      retryMaxDelayMs: ms.optional(),
      maxClaims: positiveInt.optional(),
      enabled: z.boolean().optional(),
      circuit: z.strictObject({ failureThreshold: positiveInt.optional(), openMs: ms.min(1).optional() }).optional(),
    })
    .optional(),
  recovery: z.strictObject({ onStart: z.boolean().optional(), intervalMs: ms.optional(), orphanReserveMs: ms.optional(), openBatchMs: ms.optional() }).optional(),
  retention: z.strictObject({ finishedTtlMs: ms.optional(), sweepIntervalMs: ms.min(1).optional() }).optional(),
  fieldTypes: z.record(z.string(), z.custom<object>((v) => typeof v === 'function', { message: 'must be a function' })).optional(),
  idempotencyTtlMs: ms.min(1).optional(),
  instanceId: z.string().min(1).max(200).optional(),
  push: z
    .strictObject({
      notifier: port('start', 'publish', 'stop').optional(),
      pollIntervalMs: ms.min(10).optional(),
      keepAliveMs: ms.min(10).optional(),
      queuePositionIntervalMs: ms.min(10).optional(),
      maxWaitSeconds: positiveInt.max(3600).optional(),
    })
    .optional(),
  cors: z
    .strictObject({
      origins: z.union([
        z.literal('*'),
        z.array(
          z.string().refine((o) => {
            try {
              return new URL(o).origin === o;
            } catch {
              return false;
            }
          }, 'must be an origin like https://app.example.com (scheme, host, optional port; no path)'),
        ),
      ]),
      maxAgeSeconds: nonNegativeInt.max(86_400).optional(),
    })
    .optional(),
  rateLimits: z
    .strictObject({
      backend: z
        .discriminatedUnion('type', [
          z.strictObject({ type: z.literal('memory') }),
          z.strictObject({ type: z.literal('redis'), client: port('eval', 'get') }),
          z.strictObject({ type: z.literal('postgres'), client: port('query'), tableName: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/).optional() }),
          z.strictObject({ type: z.literal('sqlite'), client: port('prepare', 'exec'), tableName: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/).optional() }),
        ])
        .optional(),
      create: rule.optional(),
      read: rule.optional(),
      stream: rule.optional(),
      unauthenticated: rule.optional(),
      failOpen: z.boolean().optional(),
      keyPrefix: z.string().regex(/^[A-Za-z0-9_:.-]{1,64}$/).optional(),
    })
    .optional(),
  playground: z.boolean().optional(),
  console: z.boolean().optional(),
  admin: z
    .strictObject({
      apiKeys: z
        .array(
          z.union([
            z.string().min(32, 'an admin key must be at least 32 characters').max(MAX_API_KEY_LENGTH, TOO_LONG).regex(/^[\x21-\x7e]+$/, 'an admin key must be visible ASCII'),
            z.strictObject({
              key: z.string().min(32, 'an admin key must be at least 32 characters').max(MAX_API_KEY_LENGTH, TOO_LONG).regex(/^[\x21-\x7e]+$/, 'an admin key must be visible ASCII'),
              name: z.string().min(1).max(100).regex(/^[^\u0000-\u001f\u007f]+$/).optional(),
            }),
          ]),
        )
        .min(1),
    })
    .optional(),
  uploadStore: port('insert', 'listExpiredBefore', 'remove').optional(),
  webhookStore: port(
    'getSecrets', 'ensureSecret', 'rotateSecret', 'addDeliveries', 'claimDue', 'recordAttempt', 'stopEndpoint', 'deliveriesOf', 'getCursor', 'advanceCursor', 'deleteForGenerations',
    'createEndpoint', 'getEndpoint', 'listEndpoints', 'updateEndpoint', 'deleteEndpoint', 'rotateEndpointSecret', 'noteEndpointAttempt', 'disableEndpoint',
    'endpointDeliveries', 'replayDelivery',
  ).optional(),
  webhooks: z
    .strictObject({
      allowHttp: z.boolean().optional(),
      allowPrivateUrls: z.boolean().optional(),
      retrySchedule: z.array(ms).min(1).max(50).optional(),
      timeoutMs: ms.min(1).optional(),
      endpoints: z.custom<object>((v) => typeof v === 'function', { message: 'must be a function (userId) => endpoints' }).optional(),
      deliver: z.boolean().optional(),
      concurrency: positiveInt.max(1000).optional(),
      concurrencyPerEndpoint: positiveInt.max(1000).optional(),
      concurrencyPerUser: positiveInt.max(1000).optional(),
      leaseMs: ms.min(1).optional(),
      pollIntervalMs: ms.min(10).optional(),
      rotationOverlapMs: ms.optional(),
      disableEndpointAfterMs: ms.optional(),
      maxEndpointsPerUser: positiveInt.max(1000).optional(),
    })
    .refine((w) => (w.leaseMs ?? 60_000) > (w.timeoutMs ?? 15_000), { message: 'leaseMs must exceed timeoutMs', path: ['leaseMs'] })
    .optional(),
  openai: z.strictObject({ enabled: z.boolean().optional(), maxWaitSeconds: positiveInt.max(3600).optional() }).optional(),
  // The SQL store packages document spreading their result into the options: these keys are the host's, not ours.
  db: z.unknown().optional(),
  close: z.unknown().optional(),
});

/** Thrown by createGenerationService for bad options; lists every problem, one per line. */
export class InvalidOptionsError extends TypeError {
  override readonly name = 'InvalidOptionsError' as const;
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`createGenerationService: invalid options:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}

export function resolveOptions(options: GenerationServiceOptions): ResolvedServiceOptions {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) {
    throw new InvalidOptionsError(
      parsed.error.issues.map((i) => {
        const path = i.path.length > 0 ? i.path.map(String).join('.') : 'options';
        if (i.code === 'unrecognized_keys') return `${path === 'options' ? '' : `${path}: `}unknown option${i.keys.length > 1 ? 's' : ''} ${i.keys.join(', ')}`;
        return `${path}: ${i.message}`;
      }),
    );
  }
  const r = options.runner ?? {};
  const adminKeys = new Map<string, string>();
  for (const [i, k] of (options.admin?.apiKeys ?? []).entries()) {
    const { key, name } = typeof k === 'string' ? { key: k, name: undefined } : k;
    adminKeys.set(hashApiKey(key), name ?? `admin-${i + 1}`);
  }
  return {
    ...(options.admin ? { admin: { keys: adminKeys } } : {}),
    clock: options.clock ?? systemClock,
    instanceId: options.instanceId ?? `gs-${randomBytes(6).toString('hex')}`,
    limits: { ...DEFAULT_LIMITS, ...(options.limits ?? {}) },
    fieldTypes: { ...BUILTIN_FIELD_TYPES, ...(options.fieldTypes ?? {}) },
    publicUrl: options.publicUrl?.replace(/\/+$/, ''),
    trustRequestHost: options.trustRequestHost ?? false,
    fileUrls: { ...(options.fileUrlSecret ? { secret: options.fileUrlSecret } : {}), ttlSeconds: options.fileUrlTtlSeconds ?? 3600 },
    ...(options.apiKeyCache && options.apiKeyCache.ttlMs > 0 ? { apiKeyCache: options.apiKeyCache } : {}),
    runner: {
      concurrency: r.concurrency ?? 8,
      leaseMs: r.leaseMs ?? 30_000,
      retryBaseDelayMs: r.retryBaseDelayMs ?? 500,
      retryMaxDelayMs: r.retryMaxDelayMs ?? 30_000,
      maxClaims: r.maxClaims ?? 3,
      enabled: r.enabled ?? true,
      circuit: { failureThreshold: r.circuit?.failureThreshold ?? 5, openMs: r.circuit?.openMs ?? 30_000 },
    },
    recovery: {
      onStart: options.recovery?.onStart ?? true,
      intervalMs: options.recovery?.intervalMs ?? 60_000,
      orphanReserveMs: options.recovery?.orphanReserveMs ?? 10 * 60_000,
      openBatchMs: options.recovery?.openBatchMs ?? 60_000,
    },
    retention: {
      finishedTtlMs: options.retention?.finishedTtlMs,
      sweepIntervalMs: options.retention?.sweepIntervalMs ?? 10 * 60_000,
    },
    idempotencyTtlMs: options.idempotencyTtlMs ?? 24 * 3600_000,
    playground: options.playground ?? false,
    console: options.console ?? false,
    ...(options.rateLimits
      ? {
          rateLimits: {
            backend: options.rateLimits.backend ?? { type: 'memory' as const },
            failOpen: options.rateLimits.failOpen ?? true,
            keyPrefix: options.rateLimits.keyPrefix ?? 'genservice-rl',
            ...(options.rateLimits.create ? { create: options.rateLimits.create } : {}),
            ...(options.rateLimits.read ? { read: options.rateLimits.read } : {}),
            ...(options.rateLimits.stream ? { stream: options.rateLimits.stream } : {}),
            ...(options.rateLimits.unauthenticated ? { unauthenticated: options.rateLimits.unauthenticated } : {}),
          },
        }
      : {}),
    ...(options.cors ? { cors: { origins: options.cors.origins, maxAgeSeconds: options.cors.maxAgeSeconds ?? 600 } } : {}),
    webhooks: {
      allowHttp: options.webhooks?.allowHttp ?? false,
      allowPrivateUrls: options.webhooks?.allowPrivateUrls ?? false,
      retrySchedule: options.webhooks?.retrySchedule ?? [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
      timeoutMs: options.webhooks?.timeoutMs ?? 15_000,
      endpoints: options.webhooks?.endpoints,
      deliver: options.webhooks?.deliver ?? r.enabled ?? true,
      concurrency: options.webhooks?.concurrency ?? 16,
      concurrencyPerEndpoint: options.webhooks?.concurrencyPerEndpoint ?? 4,
      concurrencyPerUser: options.webhooks?.concurrencyPerUser ?? 8,
      leaseMs: options.webhooks?.leaseMs ?? 60_000,
      pollIntervalMs: options.webhooks?.pollIntervalMs ?? 1000,
      rotationOverlapMs: options.webhooks?.rotationOverlapMs ?? 24 * 3600_000,
      disableEndpointAfterMs: options.webhooks?.disableEndpointAfterMs ?? 5 * 24 * 3600_000,
      maxEndpointsPerUser: options.webhooks?.maxEndpointsPerUser ?? 20,
    },
    ...(options.openai?.enabled
      ? {
          openai: {
            maxWaitSeconds: options.openai.maxWaitSeconds ?? 120,
            videoModels: new Set(options.providers.flatMap((p) => p.models).filter((m) => m.resultType === 'video').map((m) => m.modelId)),
          },
        }
      : {}),
    health: { timeoutMs: options.health?.timeoutMs ?? 2000, checks: options.health?.checks ?? {} },
    uploads: {
      maxBytes: Math.min(options.uploads?.maxBytes ?? Number.POSITIVE_INFINITY, options.limits?.bodyBytes ?? DEFAULT_LIMITS.bodyBytes),
      types: [...(options.uploads?.types ?? DEFAULT_UPLOAD_TYPES)],
      ttlSeconds: options.uploads?.ttlSeconds ?? 3600,
    },
    telemetry: { ...options.telemetry },
    priority: { multipliers: { ...DEFAULT_PRIORITY_MULTIPLIERS, ...options.priority?.multipliers }, scoped: [...(options.priority?.scoped ?? [])] },
    push: {
      pollIntervalMs: options.push?.pollIntervalMs ?? 1000,
      keepAliveMs: options.push?.keepAliveMs ?? 15_000,
      queuePositionIntervalMs: options.push?.queuePositionIntervalMs ?? 2000,
      maxWaitSeconds: options.push?.maxWaitSeconds ?? 60,
    },
  };
}
