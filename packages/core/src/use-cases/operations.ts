import { inject, injectable } from 'tsyringe';
import type { BaseUrl, GenerationStatus } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import { ModelRegistry } from '../domain/registry.js';
import { budgetWindow } from '../domain/rules.js';
import { ExpiringReads } from '../lifecycle/expiring-reads.js';
import { RecentFailures } from '../lifecycle/recent-failures.js';
import type { ApiKeyResolver, ApiKeyStore } from '../ports/api-keys.js';
import type { Clock } from '../ports/clock.js';
import type { Ledger } from '../ports/ledger.js';
import type { ModelProvider } from '../ports/provider.js';
import { TOKENS } from '../tokens.js';
import { Accounts, type KeyView } from './accounts.js';
import { type GenerationItem, Views } from './views.js';

/** How many unfinished generations one queue-health read walks at most (pages of `QUEUE_PAGE`). */
export const QUEUE_SCAN_LIMIT = 10_000;
const QUEUE_PAGE = 500;

/** A user as the operator console reads them: the account and the keys, with each budgeted key's spend so far. */
export interface AdminUserView {
  userId: string;
  balance: number;
  reserved: number;
  settled: number;
  keys: Array<KeyView & { budgetSpent?: number }>;
}

/** One event of a generation's log, as the admin reads it. */
export interface AdminEventView {
  seq: number;
  type: string;
  at: string;
  data: Record<string, unknown>;
}

/** One model's line of the queue-health view. */
export interface QueueModelRow {
  modelId: string;
  provider: string;
  /** The model's result type (null for a model no longer served). */
  resultType: string | null;
  pending: number;
  running: number;
  oldestPendingAt: string | null;
}

export interface QueueHealthView {
  models: QueueModelRow[];
  total: { pending: number; running: number };
  oldestPendingAt: string | null;
  /** Seconds the oldest pending generation has waited (null when none waits). */
  oldestPendingSeconds: number | null;
  /** Generations this instance saw fail in the last hour (to the minute); each instance counts its own. */
  failuresLastHour: number;
  /** Unfinished generations read; `truncated` when there were more than `QUEUE_SCAN_LIMIT`. */
  scanned: number;
  truncated: boolean;
}

/**
 * What the operator console reads beside the admin API's writes (docs/console.md): one user's account and keys, one
 * generation of any user with its event log, and the queue's health. Reads only; each is an admin route.
 */
@injectable()
export class Operations {
  constructor(
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(Accounts) private readonly accounts: Accounts,
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(Views) private readonly views: Views,
    @inject(TOKENS.Clock) private readonly clock: Clock,
    @inject(TOKENS.KeyStore) private readonly keyStore: ApiKeyResolver,
  ) {}

  /**
   * The ledger's accounts, a page at a time in the ledger's order: `cursor` is a previous page's `nextCursor`. 404 when
   * the ledger cannot list them (a host's own without `listAccounts`).
   */
  async users(options: { limit?: number; cursor?: string } = {}): Promise<{ data: Array<{ userId: string; balance: number; reserved: number; settled: number }>; nextCursor: string | null }> {
    if (typeof this.ledger.listAccounts !== 'function') throw new DomainError('not_found', 'This service\u2019s ledger does not list its accounts.');
    const limit = options.limit ?? 50;
    let after: string | undefined;
    if (options.cursor !== undefined) {
      after = /^[A-Za-z0-9_-]{1,400}$/.test(options.cursor) ? Buffer.from(options.cursor, 'base64url').toString('utf8') : '';
      if (after === '') {
        throw new DomainError('invalid_request', 'cursor is not valid.', { details: [{ field: 'cursor', code: 'invalid_value', message: 'must be a nextCursor from a previous page' }] });
      }
    }
    const rows = await this.ledger.listAccounts(limit + 1, after);
    const data = rows.slice(0, limit).map((r) => ({ userId: r.userId, balance: r.balance, reserved: r.reserved, settled: r.settled }));
    const last = data[data.length - 1];
    return { data, nextCursor: rows.length > limit && last ? Buffer.from(last.userId, 'utf8').toString('base64url') : null };
  }

  /** A user's account (zeros for a user without one) and keys, each budget's spend in its current window. */
  async user(userId: string, now: number = this.clock.now()): Promise<AdminUserView> {
    const keys = await this.keys(userId, now);
    const account = await this.ledger.account(userId);
    return { userId, balance: account.balance, reserved: account.reserved, settled: account.settled, keys };
  }

  /**
   * A user's keys, oldest first (never a secret), each budgeted key with its spend in the budget's current window; none
   * when the host resolves keys itself (an `apiKeys` that is not an ApiKeyStore keeps no key objects to list).
   */
  async keys(userId: string, now: number = this.clock.now()): Promise<AdminUserView['keys']> {
    if (typeof (this.keyStore as Partial<ApiKeyStore>).listKeys !== 'function') return [];
    const keys = await this.accounts.listKeys(userId);
    return Promise.all(
      keys.map(async (k) => (k.budget ? { ...k, budgetSpent: await this.ledger.keySpend(k.keyId, budgetWindow(k.budget.period, now).start) } : k)),
    );
  }

  /** Any user's generation (named with its owner) as the details view, and its whole event log. */
  async generation(userId: string, generationId: string, baseUrl?: BaseUrl): Promise<{ generation: GenerationItem; events: AdminEventView[] }> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    const events = await this.store.eventsOf(rec.id);
    const generation = this.views.item(rec, baseUrl);
    if (rec.status === 'processing') {
      const output = this.views.partial(rec, events, baseUrl);
      if (output) generation.output = output;
    }
    return { generation, events: events.map((e) => ({ seq: e.seq, type: e.type, at: new Date(e.at).toISOString(), data: e.data })) };
  }
}

/**
 * The queue's health for the operator console: what waits and runs per model, read from the store's unfinished
 * generations (the same scan recovery makes, bounded), and the failures this instance saw in the last hour.
 */
@injectable()
export class QueueHealth {
  private readonly providerNames = new Map<ModelProvider, string>();

  constructor(
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(RecentFailures) private readonly failures: RecentFailures,
    @inject(TOKENS.Clock) private readonly clock: Clock,
  ) {}

  /** Pending and running generations per model served (every one, zeros included) and its provider, the oldest waiting, and recent failures. */
  async read(): Promise<QueueHealthView> {
    const rows = new Map<string, { pending: number; running: number; oldest: number | null }>();
    for (const m of this.registry.all()) rows.set(m.info.modelId, { pending: 0, running: 0, oldest: null });
    let scanned = 0;
    let after: string | undefined;
    let truncated = false;
    for (;;) {
      const page = await this.store.listUnfinished(QUEUE_PAGE, after);
      for (const rec of page) {
        const row = rows.get(rec.modelId) ?? { pending: 0, running: 0, oldest: null };
        const status: GenerationStatus = rec.status;
        if (status === 'pending') {
          row.pending++;
          if (row.oldest === null || rec.createdAt < row.oldest) row.oldest = rec.createdAt;
        } else if (status === 'processing') row.running++;
        rows.set(rec.modelId, row);
      }
      scanned += page.length;
      if (page.length < QUEUE_PAGE) break;
      if (scanned >= QUEUE_SCAN_LIMIT) {
        truncated = true;
        break;
      }
      after = page[page.length - 1]!.id;
    }
    const now = this.clock.now();
    const models = [...rows].map(([modelId, r]) => ({
      modelId,
      provider: this.providerOf(modelId),
      resultType: this.registry.get(modelId)?.info.resultType ?? null,
      pending: r.pending,
      running: r.running,
      oldestPendingAt: r.oldest === null ? null : new Date(r.oldest).toISOString(),
    }));
    models.sort((a, b) => a.modelId.localeCompare(b.modelId));
    const oldest = Math.min(...[...rows.values()].map((r) => r.oldest ?? Number.POSITIVE_INFINITY));
    return {
      models,
      total: { pending: models.reduce((n, m) => n + m.pending, 0), running: models.reduce((n, m) => n + m.running, 0) },
      oldestPendingAt: Number.isFinite(oldest) ? new Date(oldest).toISOString() : null,
      oldestPendingSeconds: Number.isFinite(oldest) ? Math.max(0, Math.floor((now - oldest) / 1000)) : null,
      failuresLastHour: this.failures.lastHour(now),
      scanned,
      truncated,
    };
  }

  /** A provider's `name` when it has one, else its place in the `providers` option (`provider 1`, ...). */
  private providerOf(modelId: string): string {
    const provider = this.registry.get(modelId)?.provider;
    if (!provider) return 'unknown';
    let name = this.providerNames.get(provider);
    if (name === undefined) {
      const own = (provider as { name?: unknown }).name;
      const index = [...new Set(this.registry.all().map((m) => m.provider))].indexOf(provider);
      name = typeof own === 'string' && own.length > 0 ? own : `provider ${index + 1}`;
      this.providerNames.set(provider, name);
    }
    return name;
  }
}
