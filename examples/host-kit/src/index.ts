/**
 * What the three example hosts share: configuration from the environment, the durable stores, the users file,
 * and a clean shutdown. A real host would write the same twenty lines in its own style.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { createGenerationService, createJsonLogger, DiskBlobStore, MAX_TOKENS, type GenerationService, type GenerationServiceOptions, type Logger } from '@genservice/core';
import type { ApiKeyStore, Ledger } from '@genservice/core/ports';
import { createDemoProvider } from '@genservice/demo-models';
import { createMcpHandler, type McpHandler } from '@genservice/mcp';
import { configuredProviders, flakyDemoProvider } from './providers.js';

export interface HostConfig {
  port: number;
  host: string;
  /** Public URL of the host (no trailing slash); genservice is mounted at `${publicUrl}${mountPath}`. */
  publicUrl: string;
  mountPath: string;
  usersFile?: string;
  dataDir: string;
  databaseUrl?: string;
  redisUrl?: string;
  /**
   * Which queue hands out the work: `in-process` (each instance runs what it accepted), `bullmq` (Redis, `REDIS_URL`)
   * or `pgboss` (Postgres alone, `DATABASE_URL`). Default: `bullmq` with `REDIS_URL`, else `in-process`.
   */
  queue: 'in-process' | 'bullmq' | 'pgboss';
  retentionHours?: number;
  /** Multiplies the demo models' artificial work time (1 = about each model's estimatedGenerationTime). */
  demoSpeed: number;
  /** Allow demo media inputs from private/loopback addresses (for local testing only). */
  allowPrivateMedia: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** Generations run at once on this instance. */
  concurrency?: number;
  /** Worker lease; a crashed instance's work is taken over this long after it died. */
  leaseMs?: number;
  /** How often unfinished work is re-checked (0 = only at start). */
  recoveryIntervalMs?: number;
  /** Requests per user per minute (creates and reads each), and per client address for bad keys. */
  rateLimitPerMinute?: number;
  /** Generations one user may have pending or processing at once. */
  inFlightPerUser?: number;
  /** Accept webhook URLs on loopback and private addresses, and plain http (for a receiver on your machine). */
  allowPrivateWebhooks: boolean;
  /** One delivery attempt's time limit, and how long an instance holds a delivery it attempts. */
  webhookTimeoutMs?: number;
  webhookLeaseMs?: number;
  /** The admin key for `<mount>/v1/admin/` (users, credits, keys, audit); without it the admin routes are off. */
  adminApiKey?: string;
  /** Serve `GET /metrics` (Prometheus text format) beside the API mount. */
  metrics: boolean;
  /** Result files in this S3 (or S3-compatible) bucket instead of `DATA_DIR/files`: instances need no shared directory. */
  s3?: { bucket: string; prefix?: string; region: string; endpoint?: string; forcePathStyle: boolean; serve?: 'redirect' | 'stream' };
}

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  PUBLIC_URL: z.url().optional(),
  USERS_FILE: z.string().min(1).optional(),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.string().min(1).optional(),
  REDIS_URL: z.string().min(1).optional(),
  QUEUE: z.enum(['in-process', 'bullmq', 'pgboss']).optional(),
  RETENTION_HOURS: z.coerce.number().positive().optional(),
  DEMO_SPEED: z.coerce.number().positive().default(1),
  ALLOW_PRIVATE_MEDIA: z.enum(['0', '1', 'true', 'false']).default('0'),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  CONCURRENCY: z.coerce.number().int().positive().optional(),
  LEASE_MS: z.coerce.number().int().min(100).optional(),
  RECOVERY_INTERVAL_MS: z.coerce.number().int().min(0).optional(),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().optional(),
  IN_FLIGHT_PER_USER: z.coerce.number().int().positive().optional(),
  ALLOW_PRIVATE_WEBHOOKS: z.enum(['0', '1', 'true', 'false']).default('0'),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().optional(),
  WEBHOOK_LEASE_MS: z.coerce.number().int().positive().optional(),
  ADMIN_API_KEY: z.string().min(32, 'must be at least 32 characters').regex(/^[\x21-\x7e]+$/, 'must be visible ASCII').optional(),
  S3_BUCKET: z.string().min(3).max(63).optional(),
  S3_PREFIX: z.string().max(512).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ENDPOINT: z.url().optional(),
  S3_FORCE_PATH_STYLE: z.enum(['0', '1', 'true', 'false']).default('0'),
  S3_SERVE: z.enum(['redirect', 'stream']).optional(),
  METRICS: z.enum(['0', '1', 'true', 'false']).default('0'),
});

/** Reads the host's configuration from the environment; exits with a clear message when it is invalid. */
export function readConfig(env: NodeJS.ProcessEnv = process.env): HostConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    for (const i of parsed.error.issues) console.error(`invalid ${i.path.join('.')}: ${i.message}`);
    process.exit(2);
  }
  const e = parsed.data;
  const queue = e.QUEUE ?? (e.REDIS_URL ? 'bullmq' : 'in-process');
  if (queue === 'bullmq' && !e.REDIS_URL) {
    console.error('invalid QUEUE: bullmq needs REDIS_URL');
    process.exit(2);
  }
  if (queue === 'pgboss' && !e.DATABASE_URL) {
    console.error('invalid QUEUE: pgboss needs DATABASE_URL (the queue lives in Postgres)');
    process.exit(2);
  }
  return {
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PUBLIC_URL ?? `http://${e.HOST.includes(':') ? `[${e.HOST}]` : e.HOST}:${e.PORT}`).replace(/\/+$/, ''),
    mountPath: '/api',
    usersFile: e.USERS_FILE,
    dataDir: resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    queue,
    retentionHours: e.RETENTION_HOURS,
    demoSpeed: e.DEMO_SPEED,
    allowPrivateMedia: e.ALLOW_PRIVATE_MEDIA === '1' || e.ALLOW_PRIVATE_MEDIA === 'true',
    logLevel: e.LOG_LEVEL,
    concurrency: e.CONCURRENCY,
    leaseMs: e.LEASE_MS,
    recoveryIntervalMs: e.RECOVERY_INTERVAL_MS,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    inFlightPerUser: e.IN_FLIGHT_PER_USER,
    allowPrivateWebhooks: e.ALLOW_PRIVATE_WEBHOOKS === '1' || e.ALLOW_PRIVATE_WEBHOOKS === 'true',
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
    webhookLeaseMs: e.WEBHOOK_LEASE_MS,
    adminApiKey: e.ADMIN_API_KEY,
    metrics: e.METRICS === '1' || e.METRICS === 'true',
    // Credentials are the AWS SDK's own business: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, or a role.
    s3: e.S3_BUCKET
      ? {
          bucket: e.S3_BUCKET,
          prefix: e.S3_PREFIX,
          region: e.S3_REGION,
          endpoint: e.S3_ENDPOINT,
          forcePathStyle: e.S3_FORCE_PATH_STYLE === '1' || e.S3_FORCE_PATH_STYLE === 'true',
          serve: e.S3_SERVE,
        }
      : undefined,
  };
}

const usersSchema = z.object({
  users: z
    .array(z.object({ id: z.string().min(1).max(200), apiKey: z.string().min(16).max(512), balance: z.number().nonnegative().max(MAX_TOKENS) }))
    .min(1),
});
export type UsersFile = z.infer<typeof usersSchema>;

interface DurableParts {
  store: NonNullable<GenerationServiceOptions['store']>;
  ledger: Ledger;
  apiKeys: ApiKeyStore;
  idempotency: NonNullable<GenerationServiceOptions['idempotency']>;
  webhookStore: NonNullable<GenerationServiceOptions['webhookStore']>;
  auditLog: NonNullable<GenerationServiceOptions['auditLog']>;
  uploadStore: NonNullable<GenerationServiceOptions['uploadStore']>;
  /** Providers' lane counters in the same database, shared by every instance on it. */
  capacity: NonNullable<GenerationServiceOptions['capacity']>;
  close(): Promise<void>;
  describe: string;
}

async function openStores(config: HostConfig): Promise<DurableParts> {
  if (config.databaseUrl) {
    const { createPostgresStores } = await import('@genservice/store-postgres');
    const s = await createPostgresStores({ connectionString: config.databaseUrl });
    return { ...s, describe: 'postgres' };
  }
  const { createSqliteStores } = await import('@genservice/store-sqlite');
  const s = createSqliteStores({ filename: join(config.dataDir, 'genservice.db') });
  return { ...s, describe: `sqlite ${join(config.dataDir, 'genservice.db')}` };
}

async function openBlobs(config: HostConfig): Promise<NonNullable<GenerationServiceOptions['blobs']>> {
  if (!config.s3) return new DiskBlobStore({ directory: join(config.dataDir, 'files') });
  const { S3BlobStore } = await import('@genservice/blob-s3');
  const { bucket, prefix, region, endpoint, forcePathStyle, serve } = config.s3;
  return new S3BlobStore({
    bucket,
    region,
    forcePathStyle,
    ...(prefix !== undefined ? { prefix } : {}),
    ...(endpoint !== undefined ? { endpoint } : {}),
    ...(serve !== undefined ? { serve } : {}),
  });
}

/** A secret kept in the data directory, so file URLs stay valid across restarts. */
function persistentSecret(dataDir: string): string {
  const file = join(dataDir, '.file-url-secret');
  if (process.env.FILE_URL_SECRET) return process.env.FILE_URL_SECRET;
  if (!existsSync(file)) {
    try {
      writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
    } catch (err) {
      // Another instance sharing DATA_DIR made it first: use theirs, so every instance signs alike.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return readFileSync(file, 'utf8').trim();
}

function loadUsers(config: HostConfig, logger: Logger): { users: UsersFile['users']; demoKey?: string } {
  if (config.usersFile) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(config.usersFile, 'utf8'));
    } catch (err) {
      console.error(`USERS_FILE ${config.usersFile} could not be read as JSON: ${(err as Error).message}`);
      process.exit(2);
    }
    const parsed = usersSchema.safeParse(raw);
    if (!parsed.success) {
      for (const i of parsed.error.issues) console.error(`USERS_FILE: ${i.path.join('.')}: ${i.message}`);
      process.exit(2);
    }
    return { users: parsed.data.users };
  }
  // No users file: one demo user whose key is made once and kept in the data directory.
  const file = join(config.dataDir, 'demo-user.json');
  if (!existsSync(file)) {
    const user = { id: 'demo', apiKey: `demo_${randomBytes(24).toString('base64url')}`, balance: 1000 };
    try {
      writeFileSync(file, JSON.stringify({ users: [user] }, null, 2), { mode: 0o600, flag: 'wx' });
    } catch (err) {
      // Another instance sharing DATA_DIR made the demo user first: everyone uses that one.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const users = usersSchema.parse(JSON.parse(readFileSync(file, 'utf8'))).users;
  logger.info({ userId: users[0]!.id }, 'no USERS_FILE: using the demo user');
  return { users, demoKey: users[0]!.apiKey };
}

export interface Host {
  service: GenerationService;
  config: HostConfig;
  logger: Logger;
  /**
   * With `METRICS=1`: answers a Prometheus scrape (mount it at `GET /metrics`, outside the API mount; keep it off
   * the public internet).
   */
  metricsHandler?: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;
  /**
   * The MCP endpoint (docs/mcp.md): every model a tool for AI agents, with the user's own key. Each host mounts it at
   * `${mountPath}/mcp`, before the API's own mount.
   */
  mcpHandler: McpHandler;
  /** Set when the host made a demo user: its API key, to print. */
  demoKey?: string;
  /** Stops the service (waiting for running generations) and closes the stores and queue. */
  close(): Promise<void>;
}

/** Builds the genservice instance of an example host from its configuration. */
export async function createHost(config: HostConfig = readConfig()): Promise<Host> {
  mkdirSync(config.dataDir, { recursive: true });
  const logger = createJsonLogger({ level: config.logLevel, bindings: { pid: process.pid } });
  const stores = await openStores(config);
  const { users, demoKey } = loadUsers(config, logger);
  for (const u of users) {
    // A key revoked through the admin API stays revoked: the store remembers it, and this add changes nothing.
    await stores.apiKeys.addKey(u.apiKey, u.id);
    // The file gives a starting balance: credit it once, never again on a restart, and only once when several
    // instances start together on a fresh database (the idempotency store's atomic begin elects one of them).
    const a = await stores.ledger.account(u.id);
    if (a.balance + a.reserved + a.settled > 0 || u.balance <= 0) continue;
    const begun = await stores.idempotency.begin('host-kit', `initial-credit:${u.id}`, String(u.balance), Date.now(), `credit:${u.id}`);
    if (begun.state !== 'new') continue;
    await stores.ledger.credit(u.id, u.balance);
    await stores.idempotency.finish('host-kit', `initial-credit:${u.id}`, `credit:${u.id}`);
  }
  let queue: GenerationServiceOptions['queue'];
  let notifier: NonNullable<GenerationServiceOptions['push']>['notifier'];
  let rateLimitBackend: NonNullable<GenerationServiceOptions['rateLimits']>['backend'] = { type: 'memory' };
  let redisForLimits: { quit(): Promise<unknown> } | undefined;
  if (config.queue === 'pgboss' && config.databaseUrl && 'pool' in stores) {
    // Postgres alone: the jobs in pg-boss's schema of the same database, live status through LISTEN/NOTIFY, the rate
    // limits' counters in a table. service.stop() stops the queue and the notifier, which close their connections.
    const { PgBossQueue } = await import('@genservice/queue-pgboss');
    const { PostgresNotifier } = await import('@genservice/store-postgres');
    const pool = (stores as unknown as { pool: NonNullable<import('@genservice/store-postgres').PostgresNotifierOptions['pool']> }).pool;
    queue = new PgBossQueue({ connectionString: config.databaseUrl });
    notifier = new PostgresNotifier({ connectionString: config.databaseUrl, pool, logger });
    rateLimitBackend = { type: 'postgres', client: pool };
  } else if (config.queue === 'bullmq' && config.redisUrl) {
    // service.stop() stops the queue and the notifier, which close their Redis connections.
    const { BullMQQueue, RedisNotifier } = await import('@genservice/queue-bullmq');
    // Concurrency, lock duration (the store lease) and logger come from the service's settings at start.
    queue = new BullMQQueue({ connection: config.redisUrl });
    notifier = new RedisNotifier({ connection: config.redisUrl, logger });
    if (config.rateLimitPerMinute) {
      const { Redis } = await import('ioredis');
      const client = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
      client.on('error', () => undefined);
      redisForLimits = client;
      rateLimitBackend = { type: 'redis', client };
    }
  } else if ('db' in stores && stores.db) {
    // SQLite: the counters live in the same file, shared by every process on it.
    rateLimitBackend = { type: 'sqlite', client: stores.db };
  }
  const perMinute = config.rateLimitPerMinute;
  const demo = createDemoProvider({ speed: config.demoSpeed, fetch: { allowPrivateNetworks: config.allowPrivateMedia } });
  const metrics = config.metrics ? (await import('@genservice/metrics-prometheus')).createPrometheusMetrics() : undefined;
  const service = createGenerationService({
    providers: [
      demo,
      // A flaky demo model that falls back to the stable demo-text (fallbacks and the provider circuit breaker).
      flakyDemoProvider(demo),
      ...(await configuredProviders(process.env, logger, config.allowPrivateMedia)),
    ],
    store: stores.store,
    ledger: stores.ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    webhookStore: stores.webhookStore,
    auditLog: stores.auditLog,
    uploadStore: stores.uploadStore,
    capacity: stores.capacity,
    ...(config.adminApiKey ? { admin: { apiKeys: [{ key: config.adminApiKey, name: 'ADMIN_API_KEY' }] } } : {}),
    webhooks: {
      allowPrivateUrls: config.allowPrivateWebhooks,
      allowHttp: config.allowPrivateWebhooks,
      ...(config.webhookTimeoutMs ? { timeoutMs: config.webhookTimeoutMs } : {}),
      ...(config.webhookLeaseMs ? { leaseMs: config.webhookLeaseMs } : {}),
    },
    blobs: await openBlobs(config),
    queue,
    publicUrl: `${config.publicUrl}${config.mountPath}`,
    fileUrlSecret: persistentSecret(config.dataDir),
    runner: { concurrency: config.concurrency, leaseMs: config.leaseMs },
    limits: config.inFlightPerUser ? { inFlightPerUser: config.inFlightPerUser } : undefined,
    rateLimits: perMinute
      ? {
          backend: rateLimitBackend,
          create: { points: perMinute, durationSeconds: 60 },
          read: { points: perMinute * 10, durationSeconds: 60 },
          stream: { points: perMinute, durationSeconds: 60 },
          unauthenticated: { points: perMinute, durationSeconds: 60 },
        }
      : undefined,
    push: notifier ? { notifier } : undefined,
    recovery: { intervalMs: config.recoveryIntervalMs },
    retention: config.retentionHours ? { finishedTtlMs: config.retentionHours * 3600_000 } : undefined,
    // The playground page at <mount>/playground (packages/playground).
    playground: true,
    // The operator console at <mount>/console/ (with ADMIN_API_KEY) and each user's page at <mount>/console/me.
    console: true,
    // OpenAI's SDKs as clients at <mount>/openai/v1 (docs/openai-compatible.md).
    openai: { enabled: true },
    logger,
    // `<mount>/readyz` asks the store, the ledger and the queue (Redis or Postgres) itself; the rate limits' Redis too.
    ...(metrics ? { telemetry: { meterProvider: metrics.meterProvider } } : {}),
  });
  logger.info(
    {
      store: stores.describe,
      files: config.s3 ? `s3 ${config.s3.bucket}` : join(config.dataDir, 'files'),
      queue: config.queue,
      users: users.length,
    },
    'genservice configured',
  );
  let closing: Promise<void> | undefined;
  return {
    service,
    config,
    logger,
    demoKey,
    mcpHandler: createMcpHandler(service, { apiPrefix: config.mountPath, logger }),
    ...(metrics ? { metricsHandler: metrics.handler } : {}),
    close: () =>
      (closing ??= (async () => {
        await service.stop({ timeoutMs: 10_000 });
        await redisForLimits?.quit().catch(() => undefined);
        await metrics?.shutdown().catch(() => undefined);
        await stores.close();
      })()),
  };
}

/**
 * Socket limits every example server sets, so a slow or greedy client cannot hold the server: the whole request
 * (headers and body) must arrive within `requestTimeoutMs`, the headers within `headersTimeoutMs`, and at most
 * `maxConnections` sockets are open at once. A response may take as long as it needs (event streams stay open).
 */
export const SERVER_LIMITS = { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000, maxConnections: 10_000 } as const;

/** Applies SERVER_LIMITS to a Node HTTP server (Express's and Koa's `listen` return one; Fastify's is `app.server`). */
export function limitServer(server: import('node:http').Server): void {
  server.requestTimeout = SERVER_LIMITS.requestTimeoutMs;
  server.headersTimeout = SERVER_LIMITS.headersTimeoutMs;
  server.keepAliveTimeout = SERVER_LIMITS.keepAliveTimeoutMs;
  server.maxConnections = SERVER_LIMITS.maxConnections;
}

/** Runs `close` on SIGTERM or SIGINT, then exits; a second signal exits at once. */
export function closeOnSignals(close: () => Promise<void>, logger: Logger): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err: err instanceof Error ? err : new Error(String(err)) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** What every host prints once it listens (tests and people wait for this line). */
export function announce(host: Host): void {
  console.log(`listening on ${host.config.publicUrl}`);
  console.log(`genservice API at ${host.config.publicUrl}${host.config.mountPath}/v1`);
  console.log(`playground at ${host.config.publicUrl}${host.config.mountPath}/playground/`);
  console.log(`OpenAI-compatible API at ${host.config.publicUrl}${host.config.mountPath}/openai/v1`);
  console.log(`MCP endpoint at ${host.config.publicUrl}${host.config.mountPath}/mcp (docs/mcp.md)`);
  if (host.demoKey) console.log(`demo API key: ${host.demoKey}`);
}
