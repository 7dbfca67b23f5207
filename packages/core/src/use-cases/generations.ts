import { inject, injectable } from 'tsyringe';
import { GENERATION_STATUSES, isTerminal, type GenerationStatus, type GenerationView, type ModelInfo, type Settings } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN, newGenerationId } from '../domain/ids.js';
import type { RegisteredModel } from '../domain/registry.js';
import { Cancellation } from '../lifecycle/cancellation.js';
import { Creation, type NewGenerationRequest } from '../lifecycle/creation.js';
import { Deletion } from '../lifecycle/deletion.js';
import type { Principal } from '../ports/api-keys.js';
import type { ModelDefinition } from '../ports/provider.js';
import { Admission, type Caller, type Priced, reserveKey } from './admission.js';
import { GenerationReads } from './generation-reads.js';
import { requestHash } from '../domain/request-hash.js';
import { IdempotentCreates } from './idempotent.js';
import type { CancelOutcome, CreateGenerationInput, CreateOptions, GenerationPage, GenerationUseCases, ListOptions, Quote, QuoteOptions, ReadOptions } from './types.js';
import type { GenerationItem } from './views.js';

export { canonical } from '../domain/request-hash.js';
export { decodeCursor, encodeCursor } from '../domain/paging.js';
export { keyAllows } from './admission.js';
export type { GenerationUseCases } from './types.js';

const created = (generationId: string): { generationId: string } => ({ generationId });

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
  constructor(
    @inject(Admission) private readonly admission: Admission,
    @inject(IdempotentCreates) private readonly idempotent: IdempotentCreates,
    @inject(Creation) private readonly creation: Creation,
    @inject(Cancellation) private readonly cancellation: Cancellation,
    @inject(Deletion) private readonly deletion: Deletion,
    @inject(GenerationReads) private readonly reads: GenerationReads,
  ) {}

  /** The model, checked settings and price of `caller`'s create (see `Admission.priced`). */
  priced(input: CreateGenerationInput, caller: Caller, key?: Principal): Priced {
    return this.admission.priced(input, caller, key);
  }

  listModels(): ModelInfo[] {
    return this.admission.listModels();
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.admission.getModel(modelId);
  }

  quote(userId: string, input: CreateGenerationInput, options: QuoteOptions = {}): Promise<Quote> {
    return this.admission.quote(userId, input, options);
  }

  /**
   * With `options.key`, the key's model allow-list and budget apply. `basis`, when given, is what an Idempotency-Key's
   * request is recognised by instead of the settings (the OpenAI surface's uploads: by their bytes, not their URLs).
   * Not an async function: a create without a webhook to check waits on nothing before the Lifecycle's, so it keeps no
   * suspended frame of its own (issue 36); a refusal is still a rejected promise, never a throw.
   */
  create(userId: string, input: CreateGenerationInput, options: CreateOptions = {}, basis?: unknown): Promise<{ generationId: string }> {
    try {
      const caller: Caller = options.baseUrl !== undefined ? { userId, baseUrl: options.baseUrl } : { userId };
      const priced = this.admission.priced(input, caller, options.key);
      if (!input.webhook) return this.createPriced(userId, input, options, priced, undefined, basis);
      return this.admission.webhook(input.webhook).then((webhook) => this.createPriced(userId, input, options, priced, webhook, basis));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The create once admitted (model, settings, price) and its webhook checked. */
  private createPriced(
    userId: string,
    input: CreateGenerationInput,
    options: CreateOptions,
    { model, settings, price, priority, deadlineAt }: Priced,
    webhook: NewGenerationRequest['webhook'],
    basis: unknown,
  ): Promise<{ generationId: string }> {
    const { key, idempotencyKey } = options;
    // The optional fields set one by one, only when given (conditional spreads build and copy an object each: issue 36).
    const request: NewGenerationRequest = { userId, modelId: input.modelId, settings, price, estimatedSeconds: model.info.estimatedGenerationTime };
    const reserveUnder = reserveKey(key);
    if (reserveUnder !== undefined) request.key = reserveUnder;
    if (input.metadata !== undefined) request.metadata = input.metadata;
    if (webhook !== undefined) request.webhook = webhook;
    if (input.expiresAfterSeconds !== undefined) request.expiresAfterSeconds = input.expiresAfterSeconds;
    // Stored only when asked: a normal create is stored as it was before priorities existed.
    if (input.priority !== undefined) request.priority = priority;
    if (deadlineAt !== undefined) request.deadlineAt = deadlineAt;
    if (idempotencyKey === undefined) return this.creation.create(request).then(created);
    return this.idempotent.run({
      userId,
      key: idempotencyKey,
      hash: requestHash(basis ?? {
        modelId: input.modelId,
        settings,
        metadata: input.metadata ?? null,
        webhook: webhook ?? null,
        // Only when asked: requests without it hash as they did before it existed.
        ...(input.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: input.expiresAfterSeconds } : {}),
        ...(input.priority !== undefined ? { priority: input.priority } : {}),
        ...(input.deadline !== undefined ? { deadline: input.deadline } : {}),
      }),
      newId: newGenerationId,
      create: async (id, keyHeld) => ({ generationId: await this.creation.create({ ...request, id, keyHeld }) }),
      answer: async (id) => ({ generationId: id }),
      stored: async (id) => ((await this.reads.current(userId, id)) ? { generationId: id } : null),
      lost: async (_created, id) => {
        // The retry's generation is the answer, and ours must not stay charged: never enqueued, it is pending, and
        // cancelling from pending is free.
        const expires = request.expiresAfterSeconds !== undefined ? { expiresAfterSeconds: request.expiresAfterSeconds } : {};
        await this.cancellation.cancel({ id, modelId: request.modelId, reserved: request.price, ...expires });
        return { generationId: await this.idempotent.winnerOf(userId, idempotencyKey, id) };
      },
    });
  }

  get(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationView> {
    return this.reads.get(userId, generationId, options.baseUrl);
  }

  details(userId: string, generationId: string, options: ReadOptions = {}): Promise<GenerationItem> {
    return this.reads.details(userId, generationId, options.baseUrl);
  }

  /** The caller's generations, newest first. Throws invalid_request for a bad cursor. */
  list(userId: string, request: ListOptions = {}): Promise<GenerationPage> {
    const filter = {
      ...(request.status !== undefined ? { status: request.status } : {}),
      ...(request.modelId !== undefined ? { modelId: request.modelId } : {}),
    };
    return this.reads.list(userId, request, filter, request.baseUrl);
  }

  async cancel(userId: string, generationId: string, options: ReadOptions = {}): Promise<{ outcome: CancelOutcome; generation: GenerationView }> {
    const rec = await this.reads.owned(userId, generationId);
    const cancelled = isTerminal(rec.status) ? null : await this.cancellation.cancel(rec);
    const now = cancelled ?? (await this.reads.current(userId, generationId)) ?? rec;
    return { outcome: cancelled !== null ? 'cancelled' : 'already_finished', generation: this.reads.view(now, options.baseUrl) };
  }

  /** Deletes the caller's generation (see `Deletion`); not_found when there is none to delete. */
  async delete(userId: string, generationId: string): Promise<void> {
    const deleted = GENERATION_ID_PATTERN.test(generationId) && (await this.deletion.delete(userId, generationId));
    if (!deleted) throw new DomainError('not_found', 'Generation not found.');
  }

  balance(userId: string): Promise<number> {
    return this.admission.balance(userId);
  }
}
