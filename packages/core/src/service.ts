import { container, inject, injectable, instanceCachingFactory } from 'tsyringe';
import type { GenerationView, ModelInfo } from './domain.js';
import { Accounts } from './accounts.js';
import { CachedApiKeyResolver } from './api-key-cache.js';
import { ExpiringReads } from './expiry.js';
import { FileUrlSigner } from './files.js';
import { Generations, type ListPage } from './generations.js';
import { AccountRoutes } from './http/accounts-routes.js';
import { FilesRoute } from './http/files-route.js';
import { HealthRoute } from './http/health.js';
import { GenerationRoutes } from './http/generation-routes.js';
import { HttpHandler } from './http/handler.js';
import { PlaygroundRoute } from './http/playground.js';
import { RateLimits } from './http/rate-limits.js';
import type { HttpRequest, HttpResponse } from './http/types.js';
import { Lifecycle } from './lifecycle.js';
import { childLogger, silentLogger } from './logger.js';
import { contextualLogger } from './request-context.js';
import { Maintenance, type RecoveryReport } from './maintenance.js';
import type { GenerationStore } from './ports/store.js';
import {
  MemoryApiKeyStore,
  MemoryAuditLog,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryIdempotencyStore,
  MemoryLedger,
  MemoryWebhookStore,
} from './memory/index.js';
import type { GenerationServiceOptions } from './options.js';
import { resolveOptions } from './options-schema.js';
import type { ApiKeyResolver } from './ports/api-keys.js';
import type { JobQueue } from './ports/queue.js';
import type { Logger } from './ports/logger.js';
import type { ModelDefinition } from './ports/provider.js';
import { ModelRegistry } from './registry.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { EventFeed, InProcessNotifier } from './push/event-feed.js';
import { LiveStatus } from './push/live-status.js';
import { defaultWebhookTransport, defaultWebhookUrlCheck } from './push/webhook-transport.js';
import { Webhooks } from './push/webhooks.js';
import { Runner } from './runner/runner.js';
import { InProcessQueue } from './runner/in-process-queue.js';
import type {
  CancelOutcome,
  CreateGenerationInput,
  CreateOptions,
  GenerationService,
  ListOptions,
  ReadOptions,
  ServiceStats,
} from './service-types.js';
import { Telemetry } from './telemetry.js';
import { TOKENS } from './tokens.js';
import { Views, type GenerationItem } from './views.js';

/** The service object a host holds: the use cases, the HTTP entry point, and start/stop of the background parts. */
@injectable()
export class GenerationServiceImpl implements GenerationService {
  private started = false;
  private stopping: Promise<void> | undefined;
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Generations) private readonly generations: Generations,
    @inject(HttpHandler) private readonly handler: HttpHandler,
    @inject(Runner) private readonly runner: Runner,
    @inject(Maintenance) private readonly maintenance: Maintenance,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(Accounts) readonly accounts: Accounts,
    @inject(Telemetry) telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'genservice' });
    telemetry.observeStreams(() => this.live.openStreams);
  }

  get bodyLimit(): number {
    return this.options.limits.bodyBytes;
  }

  get bodyTimeoutMs(): number {
    return this.options.limits.bodyTimeoutMs;
  }

  listModels(): ModelInfo[] {
    return this.registry.list;
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.registry.get(modelId)?.definition;
  }

  create(userId: string, input: CreateGenerationInput, options: CreateOptions = {}): Promise<{ generationId: string }> {
    return this.generations.create(userId, input, options.idempotencyKey);
  }

  quote(userId: string, input: CreateGenerationInput): Promise<{ price: number; balance: number }> {
    return this.generations.quote(userId, input);
  }

  get(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationView> {
    return this.generations.get(userId, generationId, options.baseUrl);
  }

  details(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationItem> {
    return this.generations.details(userId, generationId, options.baseUrl);
  }

  list(userId: string, options: ListOptions = {}): Promise<ListPage> {
    const { baseUrl, ...request } = options;
    return this.generations.list(userId, request, baseUrl);
  }

  async cancel(userId: string, generationId: string, options: ReadOptions = {}): Promise<{ outcome: CancelOutcome; generation: GenerationView }> {
    const { cancelled, generation } = await this.generations.cancel(userId, generationId, options.baseUrl);
    return { outcome: cancelled ? 'cancelled' : 'already_finished', generation };
  }

  balance(userId: string): Promise<number> {
    return this.generations.balance(userId);
  }

  handle(request: HttpRequest): Promise<HttpResponse> {
    return this.handler.handle(request);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = undefined;
    await this.feed.start();
    const { runner } = this.options;
    if (runner.enabled) {
      await this.queue.start((job, signal) => this.runner.run(job, signal), {
        concurrency: runner.concurrency,
        leaseMs: runner.leaseMs,
        modelConcurrency: (id) => this.registry.get(id)?.definition.concurrency,
        logger: this.logger,
      });
    }
    await this.maintenance.start();
    this.webhooks.start();
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.started) return this.stopping ?? Promise.resolve();
    this.started = false;
    this.maintenance.stop();
    this.stopping = Promise.all([this.queue.stop({ timeoutMs: options.timeoutMs ?? 10_000 }), this.webhooks.stop()]).then(() => this.feed.stop());
    return this.stopping;
  }

  stats(): ServiceStats {
    return { openStreams: this.live.openStreams, watchers: this.feed.size };
  }

  recover(): Promise<RecoveryReport> {
    return this.maintenance.recover();
  }

  sweep(): Promise<number> {
    return this.maintenance.sweep();
  }
}

/**
 * Creates a generation service. Everything not given is in memory; pass durable ports (a store package) for
 * production. Throws InvalidOptionsError listing every bad option.
 *
 * @example
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/gen' });
 * await service.start();
 * app.use('/gen', genserviceRouter(service));
 */
export function createGenerationService(options: GenerationServiceOptions): GenerationService {
  const resolved = resolveOptions(options);
  // One child container per service; every class in it is a singleton of that container (tsyringe's default,
  // transient, would give each dependent its own store, lifecycle, ...).
  const c = container.createChildContainer();
  // The request id, generation id and trace id of whatever is being handled go on every line.
  const logger = options.logger ? contextualLogger(options.logger) : silentLogger;
  c.register(TOKENS.Options, { useValue: resolved });
  c.register(TOKENS.Providers, { useValue: options.providers });
  c.register(TOKENS.Logger, { useValue: logger });
  c.registerSingleton(ModelRegistry);
  const registry = c.resolve(ModelRegistry);
  if (!resolved.publicUrl && !resolved.trustRequestHost && registry.all().some((m) => m.info.resultType !== 'text')) {
    logger.warn({}, 'file results need publicUrl (or trustRequestHost) to build their URLs');
  }
  // The host's own objects where it gave them, in-memory ones otherwise.
  const port = <T>(token: symbol, given: T | undefined, fallback: new () => T): void => {
    if (given !== undefined) c.register(token, { useValue: given });
    else c.registerSingleton(token, fallback as new () => object);
  };
  port(TOKENS.Store, options.store, MemoryGenerationStore);
  const ttl = resolved.retention.finishedTtlMs;
  // Under retention every client-facing read goes through the expiry check, so an expired generation reads as
  // deleted before the sweep has removed it.
  if (ttl !== undefined) c.register(TOKENS.Store, { useValue: new ExpiringReads(c.resolve<GenerationStore>(TOKENS.Store), ttl) });
  port(TOKENS.Ledger, options.ledger, MemoryLedger);
  port(TOKENS.Blobs, options.blobs, MemoryBlobStore);
  port(TOKENS.Idempotency, options.idempotency, MemoryIdempotencyStore);
  port(TOKENS.Queue, options.queue, InProcessQueue);
  port(TOKENS.ApiKeys, options.apiKeys, MemoryApiKeyStore);
  // The host's key store itself, for Accounts: keys are managed there, never in the cache in front of it.
  const keyStore = c.resolve<ApiKeyResolver>(TOKENS.ApiKeys);
  c.register(TOKENS.KeyStore, { useValue: keyStore });
  const cache = resolved.apiKeyCache;
  if (cache) {
    // The cache in front of whichever resolver the line above registered.
    c.register(TOKENS.ApiKeys, { useFactory: instanceCachingFactory(() => new CachedApiKeyResolver(keyStore, cache)) });
  }
  port(TOKENS.AuditLog, options.auditLog, MemoryAuditLog);
  c.register(FileUrlSigner, { useFactory: instanceCachingFactory(() => new FileUrlSigner(resolved.fileUrls.secret, resolved.fileUrls.ttlSeconds)) });
  port(TOKENS.Notifier, options.push?.notifier, InProcessNotifier);
  port(TOKENS.WebhookStore, options.webhookStore, MemoryWebhookStore);
  c.register(TOKENS.WebhookTransport, { useValue: defaultWebhookTransport(resolved.webhooks) });
  c.register(TOKENS.WebhookUrlCheck, { useValue: defaultWebhookUrlCheck(resolved.webhooks) });
  // One instance of every class per service (tsyringe's default, transient, would give each dependent its own store,
  // lifecycle, ...); the symbols some files still name are aliases of the same instances.
  for (const cls of [Telemetry, Views, EventFeed, LiveStatus, Webhooks, Lifecycle, Runner, Maintenance, Generations, RateLimits, Accounts, AccountRoutes, GenerationRoutes, FilesRoute, HealthRoute, PlaygroundRoute, HttpHandler, GenerationServiceImpl]) {
    c.registerSingleton(cls as unknown as new () => object);
  }
  return c.resolve(GenerationServiceImpl);
}
