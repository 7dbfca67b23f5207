import { createHash } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import {
  GENERATION_STATUSES,
  isTerminal,
  type GenerationRecord,
  type GenerationStatus,
  type GenerationView,
  type ModelInfo,
  type Settings,
} from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { ExpiringReads, identity } from '../lifecycle/expiring-reads.js';
import { GENERATION_ID_PATTERN, newGenerationId } from '../domain/ids.js';
import { Lifecycle } from '../lifecycle/lifecycle.js';
import { Webhooks } from '../push/webhooks.js';
import type { Principal } from '../ports/api-keys.js';
import type { IdempotencyStore } from '../ports/idempotency.js';
import type { Ledger } from '../ports/ledger.js';
import type { GenerationStore, ListCursor } from '../ports/store.js';
import type { ModelDefinition } from '../ports/provider.js';
import { ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import { childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { CancelOutcome, CreateGenerationInput, CreateOptions, GenerationPage, GenerationService, ListOptions, QuoteOptions, ReadOptions } from '../service-types.js';
import { Views, type GenerationItem } from './views.js';
import type { BaseUrl } from '../domain/types.js';

function notFound(): DomainError {
  return new DomainError('not_found', 'Generation not found.');
}

/** Canonical JSON (sorted keys) so that the same body always hashes the same for Idempotency-Key checks. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** What an embedder and the HTTP routes alike ask of generations: the use cases of `GenerationService`. */
export type GenerationUseCases = Pick<
  GenerationService,
  'listModels' | 'getModel' | 'create' | 'quote' | 'get' | 'details' | 'list' | 'cancel' | 'delete' | 'balance'
>;

/** Opaque to clients: base64url of `[createdAt, id]` of the page's last item. */
export function encodeCursor(c: ListCursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString('base64url');
}

export function decodeCursor(cursor: string): ListCursor | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && GENERATION_ID_PATTERN.test(v[1])) {
      return { createdAt: v[0] as number, id: v[1] };
    }
  } catch {
    // not JSON: answered below like any other bad cursor
  }
  return null;
}

export function isGenerationStatus(s: string): s is GenerationStatus {
  return (GENERATION_STATUSES as readonly string[]).includes(s);
}

/**
 * What a user can do with generations: create (validated, priced, idempotent), quote, read, list, cancel and delete.
 * State changes are the Lifecycle's; this module decides what is asked and what the caller may see. The service's
 * methods of the same names are these, for an embedder's code and the HTTP routes alike.
 */
@injectable()
export class Generations implements GenerationUseCases {
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    // The store as clients read it (expired generations read as absent).
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
    @inject(Views) private readonly views: Views,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'generations' });
  }

  /** Model, validated settings and price of a create body; throws the 404 / 400 a create would. */
  /** The model, checked settings and price of a create (a batch's items are priced the same way). */
  priced(input: CreateGenerationInput, key?: Principal): { model: RegisteredModel; settings: Settings; price: number } {
    // A model outside the key's allow-list answers exactly as a missing one: the key cannot tell them apart.
    const model = keyAllows(key, input.modelId) ? this.registry.get(input.modelId) : undefined;
    if (!model) throw new DomainError('model_not_found', `Model "${input.modelId}" is not found or is unavailable.`);
    const checked = model.validate(input.settings ?? {});
    if (!checked.ok) throw new DomainError('invalid_settings', 'The settings are not valid for this model.', { details: checked.details });
    this.lifecycle.checkLife(input.expiresAfterSeconds);
    return { model, settings: checked.value, price: this.registry.priceOf(model, checked.value) };
  }

  listModels(): ModelInfo[] {
    return this.registry.list;
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.registry.get(modelId)?.definition;
  }

  async quote(userId: string, input: CreateGenerationInput, options: QuoteOptions = {}): Promise<{ price: number; balance: number }> {
    const { price } = this.priced(input, options.key);
    if (input.webhook) await this.webhooks.check(input.webhook);
    return { price, balance: await this.ledger.balance(userId) };
  }

  /**
   * With `options.key`, the key's model allow-list and budget apply. `basis`, when given, is what an Idempotency-Key's
   * request is recognised by instead of the settings (the OpenAI surface's uploads: by their bytes, not their URLs).
   */
  async create(userId: string, input: CreateGenerationInput, options: CreateOptions = {}, basis?: unknown): Promise<{ generationId: string }> {
    const { key, idempotencyKey } = options;
    const { model, settings, price } = this.priced(input, key);
    const webhook = input.webhook ? await this.webhooks.check(input.webhook) : undefined;
    const request = {
      userId,
      ...(key?.keyId !== undefined ? { key: { keyId: key.keyId, ...(key.budget !== undefined ? { budget: key.budget } : {}) } } : {}),
      modelId: input.modelId,
      settings,
      price,
      estimatedSeconds: model.info.estimatedGenerationTime,
      ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
      ...(webhook !== undefined ? { webhook } : {}),
      ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}),
    };
    if (idempotencyKey === undefined) return { generationId: await this.lifecycle.create(request) };

    const hash = createHash('sha256')
      .update(
        canonical(basis ?? {
          modelId: input.modelId,
          settings,
          metadata: input.metadata ?? null,
          webhook: webhook ?? null,
          // Only when asked: requests without it hash as they did before it existed.
          ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}),
        }),
      )
      .digest('hex');
    const planned = newGenerationId();
    const begun = await this.idempotency.begin(userId, idempotencyKey, hash, this.options.clock.now(), planned);
    if (begun.state !== 'new' && begun.requestHash !== hash) {
      throw new DomainError('idempotency_mismatch', 'This Idempotency-Key was used with a different request body.');
    }
    if (begun.state === 'done') return { generationId: begun.generationId };
    if (begun.state === 'new') return this.createForKey(userId, idempotencyKey, planned, request);

    // In progress. Within a lease time the first request is taken to be alive; after it, it crashed (or stalled)
    // and this retry finishes its work.
    const now = this.options.clock.now();
    const staleBefore = now - this.options.runner.leaseMs;
    if (begun.startedAt >= staleBefore) {
      throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
    }
    const existing = await this.store.get(begun.generationId, userId);
    if (existing) {
      // The crashed request got as far as storing it: that is the answer (recovery runs it if it never got queued).
      if (!(await this.idempotency.takeOver(userId, idempotencyKey, staleBefore, now, begun.generationId))) {
        throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
      }
      await this.idempotency.finish(userId, idempotencyKey, begun.generationId);
      return { generationId: begun.generationId };
    }
    // Nothing stored: create it under a fresh id. (Not the planned one: its reserve, if the crash left one, may
    // already be released as an orphan, and reserving that id again would not hold any tokens.)
    const fresh = newGenerationId();
    if (!(await this.idempotency.takeOver(userId, idempotencyKey, staleBefore, now, fresh))) {
      throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
    }
    return this.createForKey(userId, idempotencyKey, fresh, request);
  }

  private async createForKey(
    userId: string,
    key: string,
    id: string,
    request: Parameters<Lifecycle['create']>[0],
  ): Promise<{ generationId: string }> {
    try {
      await this.lifecycle.create({ ...request, id });
    } catch (err) {
      await this.idempotency.abandon(userId, key, id).catch(() => undefined);
      throw err;
    }
    if (await this.idempotency.finish(userId, key, id)) return { generationId: id };
    // A retry took this key over while this request stalled: its generation is the answer, and ours must not
    // stay charged. Cancelling from pending is free.
    await this.lifecycle.cancel({ id, ...(request.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: request.expiresAfterSeconds } : {}) });
    const now = await this.idempotency.begin(userId, key, '', this.options.clock.now(), id);
    if (now.state === 'done') return { generationId: now.generationId };
    throw new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
  }

  /** The caller's generation (another user's reads as absent); a promise chain, not an async frame: every poll reads it. */
  private owned(userId: string, generationId: string): Promise<GenerationRecord> {
    return this.ownedAs(userId, generationId, identity);
  }

  /** `as` of the caller's generation, in the same step as the ownership check (a poll's view takes no extra step). */
  private ownedAs<T>(userId: string, generationId: string, as: (rec: GenerationRecord) => T): Promise<T> {
    if (!GENERATION_ID_PATTERN.test(generationId)) return Promise.reject(notFound());
    return this.store.getAs(generationId, userId, (rec) => {
      if (!rec) throw notFound();
      return as(rec);
    });
  }

  get(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationView> {
    return this.ownedAs(userId, generationId, (rec) => this.views.view(rec, options.baseUrl));
  }

  async details(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationItem> {
    return this.detailsOf(await this.owned(userId, generationId), options.baseUrl);
  }

  /** The details item; a processing generation's carries the partial output streamed so far (read from its log). */
  private async detailsOf(rec: GenerationRecord, baseUrl?: BaseUrl): Promise<GenerationItem> {
    const item = this.views.item(rec, baseUrl);
    if (rec.status !== 'processing') return item;
    const output = this.views.partial(rec, await this.store.eventsOf(rec.id), baseUrl);
    if (output) item.output = output;
    return item;
  }

  /** The caller's generations, newest first. Throws invalid_request for a bad cursor. */
  async list(userId: string, request: ListOptions = {}): Promise<GenerationPage> {
    const limit = request.limit ?? 20;
    const before = request.cursor === undefined ? undefined : decodeCursor(request.cursor);
    if (before === null) throw new DomainError('invalid_request', 'cursor is not valid.', { details: [{ field: 'cursor', code: 'invalid_value', message: 'must be a nextCursor from a previous page' }] });
    // One more than asked tells whether another page follows without a count.
    const rows = await this.store.list(userId, {
      limit: limit + 1,
      ...(request.status !== undefined ? { status: request.status } : {}),
      ...(request.modelId !== undefined ? { modelId: request.modelId } : {}),
      ...(before !== undefined ? { before } : {}),
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      data: page.map((r) => this.views.item(r, request.baseUrl)),
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  async cancel(userId: string, generationId: string, options: ReadOptions = {}): Promise<{ outcome: CancelOutcome; generation: GenerationView }> {
    const rec = await this.owned(userId, generationId);
    const cancelled = isTerminal(rec.status) ? null : await this.lifecycle.cancel(rec);
    const now = cancelled ?? (await this.store.get(generationId, userId)) ?? rec;
    return { outcome: cancelled !== null ? 'cancelled' : 'already_finished', generation: this.views.view(now, options.baseUrl) };
  }

  /** Deletes the caller's generation (see `Lifecycle.delete`); not_found when there is none to delete. */
  async delete(userId: string, generationId: string): Promise<void> {
    const gone = GENERATION_ID_PATTERN.test(generationId) ? await this.lifecycle.delete(userId, generationId) : null;
    if (!gone) throw new DomainError('not_found', 'Generation not found.');
    await this.webhooks.deleted(gone.deleted, gone.seq, this.options.clock.now());
  }

  balance(userId: string): Promise<number> {
    return this.ledger.balance(userId);
  }
}

/** Whether a key's model allow-list lets it use `modelId` (no key, or no list: every model). */
export function keyAllows(key: Principal | undefined, modelId: string): boolean {
  return key?.models === undefined || key.models.includes(modelId);
}
