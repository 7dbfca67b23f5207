import { createHash, randomBytes } from 'node:crypto';
import { container, inject, injectable } from 'tsyringe';
import { isTerminal, type GenerationRecord, type GenerationView, type ModelInfo } from './domain.js';
import { DomainError, UnavailableError } from './errors.js';
import { CachedApiKeyResolver } from './api-key-cache.js';
import { FileUrlSigner } from './files.js';
import { HttpHandler } from './http/handler.js';
import type { HttpRequest, HttpResponse } from './http/types.js';
import { newGenerationId, GENERATION_ID_PATTERN } from './ids.js';
import { childLogger, silentLogger } from './logger.js';
import { MemoryApiKeyStore, MemoryBlobStore, MemoryGenerationStore, MemoryIdempotencyStore, MemoryLedger } from './memory/index.js';
import type { GenerationServiceOptions } from './options.js';
import type { ApiKeyResolver } from './ports/api-keys.js';
import type { BlobStore } from './ports/blob.js';
import type { IdempotencyStore } from './ports/idempotency.js';
import type { Ledger } from './ports/ledger.js';
import type { Logger } from './ports/logger.js';
import type { ModelDefinition } from './ports/provider.js';
import type { JobQueue } from './ports/queue.js';
import type { GenerationStore } from './ports/store.js';
import { ModelRegistry } from './registry.js';
import type { ResolvedServiceOptions } from './resolved-options.js';
import { Executor } from './runner/executor.js';
import { InProcessQueue } from './runner/in-process-queue.js';
import type {
  CancelOutcome,
  CreateGenerationInput,
  CreateOptions,
  GenerationService,
  ReadOptions,
} from './service-types.js';
import { BUILTIN_FIELD_TYPES, DEFAULT_LIMITS } from './settings/compile.js';
import { TOKENS } from './tokens.js';

/** Canonical JSON (sorted keys) so that the same body always hashes the same for Idempotency-Key checks. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

@injectable()
export class GenerationServiceImpl implements GenerationService {
  private readonly logger: Logger;
  private started = false;
  private stopping: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private readonly handler: HttpHandler;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) readonly store: GenerationStore,
    @inject(TOKENS.Ledger) readonly ledger: Ledger,
    @inject(TOKENS.ApiKeys) readonly apiKeys: ApiKeyResolver,
    @inject(TOKENS.Blobs) readonly blobs: BlobStore,
    @inject(TOKENS.Queue) private readonly queue: JobQueue,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
    @inject(TOKENS.Registry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Signer) private readonly signer: FileUrlSigner,
    @inject(TOKENS.Executor) private readonly executor: Executor,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'genservice' });
    this.handler = new HttpHandler(this, registry, signer, blobs, apiKeys, options, this.logger);
  }

  get bodyLimit(): number {
    return this.options.limits.bodyBytes;
  }

  listModels(): ModelInfo[] {
    return this.registry.list;
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.registry.get(modelId)?.definition;
  }

  async create(userId: string, input: CreateGenerationInput, options: CreateOptions = {}): Promise<{ generationId: string }> {
    const model = this.registry.get(input.modelId);
    if (!model) throw new DomainError('model_not_found', `Model "${input.modelId}" is not found or is unavailable.`);
    const checked = model.validate(input.settings ?? {});
    if (!checked.ok) throw new DomainError('invalid_settings', 'The settings are not valid for this model.', { details: checked.details });
    const settings = checked.value;
    const price = this.registry.priceOf(model, settings);

    const key = options.idempotencyKey;
    if (key !== undefined) {
      const requestHash = createHash('sha256').update(canonical({ modelId: input.modelId, settings })).digest('hex');
      const begun = await this.idempotency.begin(userId, key, requestHash, Date.now());
      if (begun.state !== 'new' && begun.requestHash !== requestHash) {
        throw new DomainError('idempotency_mismatch', 'This Idempotency-Key was used with a different request body.');
      }
      if (begun.state === 'in_progress') {
        throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
      }
      if (begun.state === 'done') return { generationId: begun.generationId };
      try {
        const created = await this.createNew(userId, input.modelId, settings, price);
        await this.idempotency.finish(userId, key, created.generationId);
        return created;
      } catch (err) {
        await this.idempotency.abandon(userId, key).catch(() => undefined);
        throw err;
      }
    }
    return this.createNew(userId, input.modelId, settings, price);
  }

  private async createNew(userId: string, modelId: string, settings: Record<string, unknown>, price: number): Promise<{ generationId: string }> {
    const id = newGenerationId();
    const now = Date.now();
    const reserved = await this.ledger.reserve(userId, id, price, now);
    if (reserved === 'insufficient') {
      throw new DomainError('insufficient_funds', `The balance is too low for this generation (price ${price}).`);
    }
    try {
      await this.store.insert({ id, ownerId: userId, modelId, settings, reserved: price, createdAt: now });
    } catch (err) {
      await this.ledger.release(id).catch(() => undefined);
      throw err;
    }
    try {
      await this.queue.enqueue({ generationId: id, modelId }, { fresh: true });
    } catch (err) {
      // Nothing may stay charged for a generation the client was never told about.
      await this.executor.failUnclaimed(id, 'queue unavailable at create', 0, true).catch(() => undefined);
      if (err instanceof UnavailableError) throw new DomainError('unavailable', 'The job queue is unavailable; try again shortly.', { cause: err });
      throw err;
    }
    this.logger.info({ generationId: id, modelId, userId, status: 'pending', reserved: price }, 'generation created');
    return { generationId: id };
  }

  private fileBase(options: ReadOptions): string {
    if (this.options.publicUrl) return this.options.publicUrl;
    const base = typeof options.baseUrl === 'function' ? options.baseUrl() : options.baseUrl;
    if (this.options.trustRequestHost && base) return base.replace(/\/+$/, '');
    throw new Error('a file result needs options.publicUrl (or trustRequestHost) to build its URL');
  }

  view(rec: GenerationRecord, options: ReadOptions = {}): GenerationView {
    if (rec.status === 'completed') {
      const result = rec.resultText !== undefined ? rec.resultText : this.fileBase(options) + this.signer.sign(rec.resultKey!);
      return { status: rec.status, result, price: rec.price ?? 0 };
    }
    if (rec.status === 'failed') return { status: rec.status, price: rec.price ?? 0 };
    return { status: rec.status };
  }

  async get(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationView> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    return this.view(rec, options);
  }

  async cancel(
    userId: string,
    generationId: string,
    options: ReadOptions = {},
  ): Promise<{ outcome: CancelOutcome; generation: GenerationView }> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    if (!isTerminal(rec.status)) {
      const fee = rec.status === 'pending' ? 0 : (this.registry.get(rec.modelId)?.failureFee ?? 0);
      if (await this.executor.failUnclaimed(rec.id, 'cancelled by its owner', fee, true)) {
        this.queue.abort?.(rec.id);
        this.logger.info({ generationId: rec.id, status: 'failed', price: fee }, 'generation cancelled');
        return { outcome: 'cancelled', generation: this.view((await this.store.getById(rec.id))!, options) };
      }
    }
    const now = await this.store.get(generationId, userId);
    return { outcome: 'already_finished', generation: this.view(now!, options) };
  }

  balance(userId: string): Promise<number> {
    return this.ledger.balance(userId);
  }

  handle(request: HttpRequest): Promise<HttpResponse> {
    return this.handler.handle(request);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.stopping = undefined;
    const { runner, recovery, retention } = this.options;
    if (runner.enabled) {
      await this.queue.start((job, signal) => this.executor.run(job, signal));
    }
    if (recovery.onStart) await this.recover();
    if (recovery.intervalMs > 0) this.every(recovery.intervalMs, () => this.recover(), 'recovery');
    if (retention.finishedTtlMs !== undefined) this.every(retention.sweepIntervalMs, () => this.sweep(), 'retention sweep');
    const idemTtl = this.options.idempotencyTtlMs;
    this.every(Math.min(idemTtl, 3600_000), () => this.idempotency.purgeBefore(Date.now() - idemTtl), 'idempotency purge');
  }

  private every(ms: number, task: () => Promise<unknown>, name: string): void {
    let running = false;
    const t = setInterval(() => {
      if (running) return;
      running = true;
      task()
        .catch((err: unknown) => this.logger.error({ err: String(err) }, `${name} failed`))
        .finally(() => {
          running = false;
        });
    }, ms);
    t.unref?.();
    this.timers.push(t);
  }

  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.started) return this.stopping ?? Promise.resolve();
    this.started = false;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.stopping = this.queue.stop({ timeoutMs: options.timeoutMs ?? 10_000 });
    return this.stopping;
  }

  async recover(): Promise<{ requeued: number; failed: number; settled: number; released: number }> {
    const out = { requeued: 0, failed: 0, settled: 0, released: 0 };
    const now = Date.now();
    const batch = 500;
    // Paged, so a backlog of any size is walked, not just its oldest page.
    for await (const rec of this.unfinished()) {
      if (rec.status === 'processing' && (rec.leaseExpiresAt ?? 0) > now) continue; // a live worker has it
      const model = this.registry.get(rec.modelId);
      if (!model) {
        if (await this.executor.failUnclaimed(rec.id, 'model no longer exists', 0)) out.failed++;
        continue;
      }
      if (rec.status === 'processing' && rec.attempts >= this.options.runner.maxClaims) {
        if (await this.executor.failUnclaimed(rec.id, `gave up after ${rec.attempts} lost runs`, model.failureFee)) out.failed++;
        continue;
      }
      try {
        await this.queue.enqueue({ generationId: rec.id, modelId: rec.modelId });
        out.requeued++;
      } catch (err) {
        this.logger.warn({ err: String(err), generationId: rec.id }, 'recovery could not enqueue');
      }
    }
    for (const r of await this.ledger.openReserves(batch)) {
      const gen = await this.store.getById(r.generationId);
      if (gen && isTerminal(gen.status)) {
        await this.ledger.settle(r.generationId, gen.price ?? 0);
        out.settled++;
      } else if (!gen && now - r.createdAt > this.options.recovery.orphanReserveMs) {
        await this.ledger.release(r.generationId);
        out.released++;
      }
    }
    if (out.requeued + out.failed + out.settled + out.released > 0) this.logger.info(out, 'recovery pass');
    return out;
  }

  private async *unfinished(): AsyncGenerator<GenerationRecord> {
    const page = 500;
    let after: string | undefined;
    for (;;) {
      const batch = await this.store.listUnfinished(page, after);
      yield* batch;
      if (batch.length < page) return;
      after = batch[batch.length - 1]!.id;
    }
  }

  /** Deletes finished generations past retention, and their files, in small batches. */
  async sweep(): Promise<number> {
    const ttl = this.options.retention.finishedTtlMs;
    if (ttl === undefined) return 0;
    let total = 0;
    for (;;) {
      const { deleted, resultKeys } = await this.store.deleteFinishedBefore(Date.now() - ttl, 200);
      for (const key of resultKeys) await this.blobs.delete(key).catch(() => undefined);
      total += deleted;
      if (deleted < 200) break;
      // Yield between batches so a long sweep never holds up requests.
      await new Promise((r) => setImmediate(r));
    }
    if (total > 0) this.logger.info({ deleted: total }, 'retention sweep');
    return total;
  }
}

function resolveOptions(options: GenerationServiceOptions): ResolvedServiceOptions {
  const r = options.runner ?? {};
  const limits = { ...DEFAULT_LIMITS, ...(options.limits ?? {}) };
  return {
    raw: options,
    instanceId: options.instanceId ?? `gs-${randomBytes(6).toString('hex')}`,
    limits,
    fieldTypes: { ...BUILTIN_FIELD_TYPES, ...(options.fieldTypes ?? {}) },
    publicUrl: options.publicUrl?.replace(/\/+$/, ''),
    trustRequestHost: options.trustRequestHost ?? false,
    runner: {
      concurrency: r.concurrency ?? 8,
      leaseMs: r.leaseMs ?? 30_000,
      retryBaseDelayMs: r.retryBaseDelayMs ?? 500,
      retryMaxDelayMs: r.retryMaxDelayMs ?? 30_000,
      maxClaims: r.maxClaims ?? 3,
      enabled: r.enabled ?? true,
    },
    recovery: {
      onStart: options.recovery?.onStart ?? true,
      intervalMs: options.recovery?.intervalMs ?? 60_000,
      orphanReserveMs: options.recovery?.orphanReserveMs ?? 10 * 60_000,
    },
    retention: {
      finishedTtlMs: options.retention?.finishedTtlMs,
      sweepIntervalMs: options.retention?.sweepIntervalMs ?? 10 * 60_000,
    },
    idempotencyTtlMs: options.idempotencyTtlMs ?? 24 * 3600_000,
  };
}

/**
 * Creates a generation service. Everything not given is in memory; pass durable ports (a store package) for
 * production.
 *
 * @example
 * const service = createGenerationService({ providers: [myProvider], publicUrl: 'https://api.example.com/gen' });
 * await service.start();
 * app.use('/gen', genserviceRouter(service));
 */
export function createGenerationService(options: GenerationServiceOptions): GenerationService {
  if (!options || !Array.isArray(options.providers)) throw new TypeError('createGenerationService: options.providers must be an array');
  const resolved = resolveOptions(options);
  const registry = new ModelRegistry(options.providers, resolved.limits, resolved.fieldTypes);
  const c = container.createChildContainer();
  const logger = options.logger ?? silentLogger;
  if (!resolved.publicUrl && !resolved.trustRequestHost && registry.all().some((m) => m.info.resultType !== 'text')) {
    logger.warn({}, 'file results need publicUrl (or trustRequestHost) to build their URLs');
  }
  c.register(TOKENS.Options, { useValue: resolved });
  c.register(TOKENS.Registry, { useValue: registry });
  c.register(TOKENS.Logger, { useValue: logger });
  c.register(TOKENS.Store, { useValue: options.store ?? new MemoryGenerationStore() });
  c.register(TOKENS.Ledger, { useValue: options.ledger ?? new MemoryLedger() });
  const apiKeys = options.apiKeys ?? new MemoryApiKeyStore();
  c.register(TOKENS.ApiKeys, {
    useValue: options.apiKeyCache && options.apiKeyCache.ttlMs > 0 ? new CachedApiKeyResolver(apiKeys, options.apiKeyCache) : apiKeys,
  });
  c.register(TOKENS.Blobs, { useValue: options.blobs ?? new MemoryBlobStore() });
  c.register(TOKENS.Idempotency, { useValue: options.idempotency ?? new MemoryIdempotencyStore() });
  c.register(TOKENS.Signer, { useValue: new FileUrlSigner(options.fileUrlSecret, options.fileUrlTtlSeconds ?? 3600) });
  c.register(TOKENS.Queue, {
    useValue:
      options.queue ??
      new InProcessQueue({
        concurrency: resolved.runner.concurrency,
        modelConcurrency: (id) => registry.get(id)?.definition.concurrency,
      }),
  });
  c.register(TOKENS.Executor, { useClass: Executor });
  c.register(TOKENS.Service, { useClass: GenerationServiceImpl });
  return c.resolve<GenerationService>(TOKENS.Service);
}
