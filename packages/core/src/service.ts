import { container, inject, injectable, instanceCachingFactory } from 'tsyringe';
import type { GenerationView, ModelInfo } from './domain/types.js';
import { Batches } from './use-cases/batches.js';
import { Accounts } from './use-cases/accounts.js';
import { Organizations } from './use-cases/organizations.js';
import { CachedApiKeyResolver } from './use-cases/api-key-cache.js';
import { ExpiringReads } from './lifecycle/expiring-reads.js';
import { FileUrlSigner } from './domain/file-urls.js';
import { Background } from './runner/background.js';
import { Generations } from './use-cases/generations.js';
import { Uploads } from './use-cases/uploads.js';
import { MediaReader } from './runner/media-reader.js';
import { UploadExpiry } from './lifecycle/upload-expiry.js';
import { Access } from './http/access.js';
import { FilesRoute } from './http/files-route.js';
import { HealthRoute } from './http/health.js';
import { Fallbacks } from './runner/fallbacks.js';
import { CapacityGate } from './runner/capacity-gate.js';
import { HttpHandler } from './http/handler.js';
import { OpenApiRoute } from './http/openapi-route.js';
import { PlaygroundRoute } from './http/playground.js';
import { RateLimits } from './http/rate-limits.js';
import { ROUTE_SERVICES, type RouteServices } from './http/route.js';
import type { HttpRequest, HttpResponse } from './http/types.js';
import { Lifecycle } from './lifecycle/lifecycle.js';
import { silentLogger } from './logger.js';
import { contextualLogger } from './request-context.js';
import { Maintenance } from './runner/maintenance.js';
import { Recovery, type RecoveryReport } from './lifecycle/recovery.js';
import { GenerationLog } from './lifecycle/generation-log.js';
import { LifecycleObserver } from './lifecycle/observer.js';
import { RecentFailures } from './lifecycle/recent-failures.js';
import { Operations, QueueHealth } from './use-cases/operations.js';
import { BatchCompletion } from './lifecycle/batch-completion.js';
import { Creation } from './lifecycle/creation.js';
import { Cancellation } from './lifecycle/cancellation.js';
import { Cleanup } from './lifecycle/cleanup.js';
import { Deletion } from './lifecycle/deletion.js';
import { Workers } from './runner/workers.js';
import { LeaseKeeper } from './runner/leases.js';
import { ProviderCalls } from './runner/provider-calls.js';
import { Results } from './runner/results.js';
import { RemoteJobs } from './runner/remote-jobs.js';
import { Execution } from './runner/execution.js';
import { WebhookSender } from './push/webhook-sender.js';
import { WebhookOutbox } from './push/webhook-outbox.js';
import { WebhookPump } from './push/webhook-pump.js';
import { WebhookUse } from './push/webhook-use.js';
import { Admission } from './use-cases/admission.js';
import { FileReferences } from './use-cases/file-references.js';
import { IdempotentCreates } from './use-cases/idempotent.js';
import { GenerationReads } from './use-cases/generation-reads.js';
import type { GenerationStore } from './ports/store.js';
import {
  MemoryApiKeyStore,
  MemoryCapacityStore,
  MemoryAuditLog,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryIdempotencyStore,
  MemoryLedger,
  MemoryWebhookStore,
  MemoryUploadStore,
} from './memory/index.js';
import type { GenerationServiceOptions } from './options.js';
import { resolveOptions } from './options-schema.js';
import type { ApiKeyResolver } from './ports/api-keys.js';
import type { ModelDefinition } from './ports/provider.js';
import { ModelRegistry } from './domain/registry.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { EventFeed, InProcessNotifier } from './push/event-feed.js';
import { LiveStatus } from './push/live-status.js';
import { defaultWebhookTransport, defaultWebhookUrlCheck } from './push/webhook-transport.js';
import { Webhooks } from './push/webhooks.js';
import { EndpointHealth } from './push/endpoint-health.js';
import { WebhookEndpoints } from './use-cases/webhook-endpoints.js';
import { Runner } from './runner/runner.js';
import { QueuePositions } from './runner/queue-positions.js';
import { InProcessQueue } from './runner/in-process-queue.js';
import type {
  CancelOutcome,
  CreateGenerationInput,
  CreateOptions,
  GenerationPage,
  GenerationService,
  ListOptions,
  QuoteOptions,
  ReadOptions,
  ServiceStats,
} from './service-types.js';
import { Telemetry } from './telemetry.js';
import { TOKENS } from './tokens.js';
import { Views, type GenerationItem } from './use-cases/views.js';
import { OpenAi } from './openai/openai.js';
import { OpenAiImages } from './openai/images.js';
import { OpenAiJobs } from './openai/jobs.js';
import { OpenAiFiles } from './openai/uploads.js';
import { OpenAiSpeech } from './openai/speech.js';
import { OpenAiVideos } from './openai/videos.js';

/**
 * The service object a host holds. Each method is one module's: the use cases are `Generations`', `handle` the HTTP
 * layer's (whose routes call the same use-case objects, never this one), start/stop the background work's.
 */
@injectable()
export class GenerationServiceImpl implements GenerationService {
  constructor(
    @inject(Generations) private readonly generations: Generations,
    @inject(HttpHandler) private readonly http: HttpHandler,
    @inject(Background) private readonly background: Background,
    @inject(Accounts) readonly accounts: Accounts,
    @inject(Batches) readonly batches: Batches,
    @inject(WebhookEndpoints) readonly webhookEndpoints: WebhookEndpoints,
  ) {}

  get bodyLimit(): number {
    return this.http.bodyLimit;
  }

  get bodyTimeoutMs(): number {
    return this.http.bodyTimeoutMs;
  }

  get servesOpenAi(): boolean {
    return this.http.servesOpenAi;
  }

  get servesConsole(): boolean {
    return this.http.servesConsole;
  }

  listModels(): ModelInfo[] {
    return this.generations.listModels();
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.generations.getModel(modelId);
  }

  create(userId: string, input: CreateGenerationInput, options?: CreateOptions): Promise<{ generationId: string }> {
    return this.generations.create(userId, input, options);
  }

  quote(userId: string, input: CreateGenerationInput, options?: QuoteOptions): Promise<{ price: number; balance: number }> {
    return this.generations.quote(userId, input, options);
  }

  get(userId: string, generationId: string, options?: ReadOptions): Promise<GenerationView> {
    return this.generations.get(userId, generationId, options);
  }

  details(userId: string, generationId: string, options?: ReadOptions): Promise<GenerationItem> {
    return this.generations.details(userId, generationId, options);
  }

  list(userId: string, options?: ListOptions): Promise<GenerationPage> {
    return this.generations.list(userId, options);
  }

  cancel(userId: string, generationId: string, options?: ReadOptions): Promise<{ outcome: CancelOutcome; generation: GenerationView }> {
    return this.generations.cancel(userId, generationId, options);
  }

  delete(userId: string, generationId: string): Promise<void> {
    return this.generations.delete(userId, generationId);
  }

  balance(userId: string): Promise<number> {
    return this.generations.balance(userId);
  }

  handle(request: HttpRequest): Promise<HttpResponse> {
    return this.http.handle(request);
  }

  start(): Promise<void> {
    return this.background.start();
  }

  stop(options?: { timeoutMs?: number }): Promise<void> {
    return this.background.stop(options);
  }

  stats(): ServiceStats {
    return this.background.stats();
  }

  recover(): Promise<RecoveryReport> {
    return this.background.recover();
  }

  sweep(): Promise<number> {
    return this.background.sweep();
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
  const clock = resolved.clock;
  c.register(TOKENS.Clock, { useValue: clock });
  c.registerSingleton(ModelRegistry);
  const registry = c.resolve(ModelRegistry);
  if (!resolved.publicUrl && !resolved.trustRequestHost && registry.all().some((m) => m.info.resultType !== 'text')) {
    logger.warn({}, 'file results need publicUrl (or trustRequestHost) to build their URLs');
  }
  // The host's own objects where it gave them, in-memory ones otherwise.
  const port = <T>(token: symbol, given: T | undefined, fallback: () => T): void => {
    c.register(token, { useValue: given !== undefined ? given : fallback() });
  };
  const store = options.store ?? new MemoryGenerationStore();
  port(TOKENS.Store, store, () => store);
  // Every client-facing read goes through the expiry check (the service's retention, or a life asked for at create),
  // so an expired generation reads as deleted before the sweep has removed it.
  const reads = new ExpiringReads(c.resolve<GenerationStore>(TOKENS.Store), resolved.retention.finishedTtlMs, () => clock.now());
  c.register(TOKENS.Store, { useValue: reads });
  c.register(ExpiringReads, { useValue: reads });
  port(TOKENS.Ledger, options.ledger, () => new MemoryLedger({ clock }));
  linkMemoryPorts(store, c.resolve(TOKENS.Ledger));
  port(TOKENS.Blobs, options.blobs, () => new MemoryBlobStore());
  port(TOKENS.Idempotency, options.idempotency, () => new MemoryIdempotencyStore());
  port(TOKENS.Queue, options.queue, () => new InProcessQueue({ clock }));
  port(TOKENS.Capacity, options.capacity, () => new MemoryCapacityStore());
  port(TOKENS.ApiKeys, options.apiKeys, () => new MemoryApiKeyStore({ clock }));
  // The host's key store itself, for Accounts: keys are managed there, never in the cache in front of it.
  const keyStore = c.resolve<ApiKeyResolver>(TOKENS.ApiKeys);
  c.register(TOKENS.KeyStore, { useValue: keyStore });
  const cache = resolved.apiKeyCache;
  if (cache) {
    // The cache in front of whichever resolver the line above registered.
    c.register(TOKENS.ApiKeys, { useFactory: instanceCachingFactory(() => new CachedApiKeyResolver(keyStore, cache, clock)) });
  }
  port(TOKENS.AuditLog, options.auditLog, () => new MemoryAuditLog());
  c.register(FileUrlSigner, { useFactory: instanceCachingFactory(() => new FileUrlSigner(resolved.fileUrls.secret, resolved.fileUrls.ttlSeconds)) });
  port(TOKENS.Notifier, options.push?.notifier, () => new InProcessNotifier());
  port(TOKENS.WebhookStore, options.webhookStore, () => new MemoryWebhookStore());
  port(TOKENS.UploadStore, options.uploadStore, () => new MemoryUploadStore());
  c.register(TOKENS.WebhookTransport, { useValue: defaultWebhookTransport(resolved.webhooks) });
  c.register(TOKENS.WebhookUrlCheck, { useValue: defaultWebhookUrlCheck(resolved.webhooks) });
  // One instance of every class per service (tsyringe's default, transient, would give each dependent its own store,
  // lifecycle, ...); the symbols some files still name are aliases of the same instances.
  for (const cls of [
    Telemetry,
    Views,
    EventFeed,
    LiveStatus,
    // push/: webhooks (owner-facing), whether any is in use, their outbox, its delivery, and the loop that runs both
    WebhookUse,
    Webhooks,
    EndpointHealth,
    WebhookSender,
    WebhookOutbox,
    WebhookPump,
    // lifecycle/: the state machine and its money, and what asks it
    GenerationLog,
    RecentFailures,
    LifecycleObserver,
    BatchCompletion,
    Lifecycle,
    Creation,
    Cancellation,
    Cleanup,
    Deletion,
    Recovery,
    UploadExpiry,
    // runner/
    QueuePositions,
    Fallbacks,
    CapacityGate,
    ProviderCalls,
    MediaReader,
    Results,
    RemoteJobs,
    LeaseKeeper,
    Execution,
    Runner,
    Workers,
    Maintenance,
    Background,
    // use-cases/
    FileReferences,
    Admission,
    IdempotentCreates,
    GenerationReads,
    Generations,
    Batches,
    Organizations,
    Accounts,
    Operations,
    QueueHealth,
    WebhookEndpoints,
    // openai/: the OpenAI-compatible surface (docs/openai-compatible.md)
    OpenAiFiles,
    OpenAiJobs,
    OpenAiImages,
    OpenAiVideos,
    OpenAiSpeech,
    OpenAi,
    Uploads,
  ]) {
    c.registerSingleton(cls as unknown as new () => object);
  }
  // The HTTP layer: the route handlers are given the use cases above (the same objects the service's methods call)
  // and the HTTP layer's own pages, as one object.
  for (const cls of [RateLimits, Access, FilesRoute, HealthRoute, PlaygroundRoute, OpenApiRoute, HttpHandler, GenerationServiceImpl]) {
    c.registerSingleton(cls as unknown as new () => object);
  }
  c.register(ROUTE_SERVICES, {
    useFactory: instanceCachingFactory(
      (r): RouteServices => ({
        generations: r.resolve(Generations),
        batches: r.resolve(Batches),
        accounts: r.resolve(Accounts),
        operations: r.resolve(Operations),
        queueHealth: r.resolve(QueueHealth),
        uploads: r.resolve(Uploads),
        live: r.resolve(LiveStatus),
        webhooks: r.resolve(Webhooks),
        webhookEndpoints: r.resolve(WebhookEndpoints),
        views: r.resolve(Views),
        openai: r.resolve(OpenAi),
        files: r.resolve(FilesRoute),
        health: r.resolve(HealthRoute),
        playground: r.resolve(PlaygroundRoute),
        openapi: r.resolve(OpenApiRoute),
        options: resolved,
      }),
    ),
  });
  return c.resolve(GenerationServiceImpl);
}

/**
 * A memory store holds and settles a memory ledger's reserves in its own steps (memory/in-store-ledger.ts), as the
 * Postgres store does the Postgres ledger's, unless a method either uses was replaced (a subclass's or a test's own
 * `reserve`, `settle`, `insert` or `update` is then what runs, as it was asked).
 */
function linkMemoryPorts(store: unknown, ledger: unknown): void {
  if (!(store instanceof MemoryGenerationStore) || !(ledger instanceof MemoryLedger)) return;
  const s = MemoryGenerationStore.prototype;
  const l = MemoryLedger.prototype;
  const storeOwn = store.insert === s.insert && store.insertReserved === s.insertReserved && store.update === s.update && store.updateBatchMembers === s.updateBatchMembers;
  const ledgerOwn = ledger.reserve === l.reserve && ledger.reserveNow === l.reserveNow && ledger.settle === l.settle && ledger.settleNow === l.settleNow && ledger.release === l.release;
  if (storeOwn && ledgerOwn) store.settleWith(ledger);
}
