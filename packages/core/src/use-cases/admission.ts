import { inject, injectable } from 'tsyringe';
import type { ReserveKey } from '../lifecycle/lifecycle.js';
import type { BaseUrl, Metadata, ModelInfo, Settings, WebhookEventType } from '../domain/types.js';
import { DomainError, type ErrorDetail } from '../domain/errors.js';
import { ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import { checkLife } from '../domain/rules.js';
import { checkPriority, priorityMultiplier, priorityPrice, type Priority } from '../domain/priority.js';
import type { BatchItem } from '../lifecycle/creation.js';
import type { Principal } from '../ports/api-keys.js';
import type { Ledger } from '../ports/ledger.js';
import type { ModelDefinition } from '../ports/provider.js';
import { Webhooks } from '../push/webhooks.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { FileReferences } from './file-references.js';
import type { CreateGenerationInput, Quote, QuoteOptions } from './types.js';

/** Whether a key's model allow-list lets it use `modelId` (no key, or no list: every model). */
export function keyAllows(key: Principal | undefined, modelId: string): boolean {
  return key?.models === undefined || key.models.includes(modelId);
}

/** Who asks: the user (whose own file links a create may give as media inputs) and the request's address. */
export interface Caller {
  userId: string;
  /** The request's base URL, where file links start without a publicUrl (see trustRequestHost). */
  baseUrl?: BaseUrl;
}

/** What a create costs, and at which priority. */
export interface Priced {
  model: RegisteredModel;
  settings: Settings;
  /** Tokens to reserve: the model's price times `multiplier`. */
  price: number;
  priority: Priority;
  multiplier: number;
  /** Epoch ms after which a `low` generation still pending fails free. */
  deadlineAt?: number;
}

/** One request of a batch, as the client sent it (its shape already checked). */
export interface BatchRequestItem {
  modelId: string;
  settings?: Settings;
  metadata?: Metadata;
}

/**
 * What a user may ask for and what it costs, checked before anything is reserved: the models (within a key's
 * allow-list), a create's settings, price and life, its webhook, and a batch's requests (each named by its index);
 * quotes and the balance they are read against.
 */
@injectable()
export class Admission {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(Webhooks) private readonly webhooks: Webhooks,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(FileReferences) private readonly references: FileReferences,
  ) {}

  listModels(): ModelInfo[] {
    return this.registry.list;
  }

  getModel(modelId: string): ModelDefinition | undefined {
    return this.registry.get(modelId)?.definition;
  }

  /**
   * The model, checked settings and price of `caller`'s create (a batch's items are priced the same way), at its
   * priority (the model's price times the priority's multiplier; `deadlineAt` when a `low` one asked a deadline);
   * throws the 404 / 400 / 403 a create would. A media setting may name the service's own file links only when they
   * are the caller's.
   */
  priced(input: CreateGenerationInput, caller: Caller, key?: Principal): Priced {
    // A model outside the key's allow-list answers exactly as a missing one: the key cannot tell them apart.
    const model = keyAllows(key, input.modelId) ? this.registry.get(input.modelId) : undefined;
    if (!model) throw new DomainError('model_not_found', `Model "${input.modelId}" is not found or is unavailable.`);
    const checked = model.validate(input.settings ?? {});
    if (!checked.ok) throw new DomainError('invalid_settings', 'The settings are not valid for this model.', { details: checked.details });
    const refused = this.references.refusals(model.definition.settings, checked.value, caller.userId, caller.baseUrl);
    if (refused.length > 0) throw new DomainError('invalid_settings', 'The settings are not valid for this model.', { details: [...refused] });
    checkLife(input.expiresAfterSeconds, this.options.retention);
    const priority = input.priority ?? 'normal';
    const deadlineAt = checkPriority(priority, input.deadline, this.options.priority, key?.scopes, this.options.clock);
    const multiplier = priorityMultiplier(priority, this.options.priority, model.definition.priorityMultipliers);
    const priced: Priced = { model, settings: checked.value, price: priorityPrice(this.registry.priceOf(model, checked.value), multiplier), priority, multiplier };
    if (deadlineAt !== undefined) priced.deadlineAt = deadlineAt;
    return priced;
  }

  /** A create's webhook, checked (throws invalid_request naming the field), with its events. */
  webhook(webhook: { url: string; events?: WebhookEventType[] }): Promise<{ url: string; events: WebhookEventType[] }> {
    return this.webhooks.forCreate(webhook);
  }

  /** A create's price and the balance; with a `priority` asked, that priority and its multiplier too. */
  async quote(userId: string, input: CreateGenerationInput, options: QuoteOptions = {}): Promise<Quote> {
    const { price, priority, multiplier } = this.priced(input, { userId, ...(options.baseUrl !== undefined ? { baseUrl: options.baseUrl } : {}) }, options.key);
    if (input.webhook) await this.webhooks.check(input.webhook);
    const balance = await this.ledger.balance(userId);
    return input.priority === undefined ? { price, balance } : { price, balance, priority, multiplier };
  }

  balance(userId: string): Promise<number> {
    return this.ledger.balance(userId);
  }

  /**
   * A batch's requests, every one validated before anything is reserved: one bad request refuses the whole batch with
   * a 400 that names each bad one by its index (`requests[3]`, `requests[7].settings.prompt`).
   */
  batchItems(requests: readonly BatchRequestItem[], caller: Caller, key?: Principal): BatchItem[] {
    const details: ErrorDetail[] = [];
    const items: BatchItem[] = [];
    requests.forEach((req, i) => {
      try {
        const { settings, price } = this.priced(req, caller, key);
        items.push({ modelId: req.modelId, settings, price, ...(req.metadata !== undefined ? { metadata: req.metadata } : {}) });
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        if (err.code === 'invalid_settings' && err.details && err.details.length > 0) {
          for (const d of err.details) details.push({ ...d, field: `requests[${i}].${d.field}` });
        } else details.push({ field: `requests[${i}].modelId`, code: 'invalid_value', message: `requests[${i}]: ${err.message}` });
      }
    });
    if (details.length > 0) {
      const bad = new Set(details.map((d) => /^requests\[(\d+)\]/.exec(d.field)?.[1])).size;
      throw new DomainError('invalid_request', `${bad} of the ${requests.length} requests ${bad === 1 ? 'is' : 'are'} not valid; nothing was created.`, { details });
    }
    return items;
  }
}

/** What a create reserves under from the managed key it came with (its id, budget and in-flight cap), or undefined. */
export function reserveKey(key: Principal | undefined): ReserveKey | undefined {
  if (key?.keyId === undefined) return undefined;
  const under: ReserveKey = { keyId: key.keyId };
  if (key.budget !== undefined) under.budget = key.budget;
  if (key.maxInFlight !== undefined) under.maxInFlight = key.maxInFlight;
  return under;
}
