import { inject, injectable } from 'tsyringe';
import { isTerminal, type FailureInfo, type GenerationRecord, type Settings } from '../domain/types.js';
import { budgetWindow, lifeEnd } from '../domain/rules.js';
import { budgetWindows, reserveOutcome, reserveRefusal } from '../domain/limits.js';
import { completionCharge, FAILURE_MESSAGES, failurePrice, failureRule, type FailureCause } from '../domain/fees.js';
import { ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import type { KeyBudget } from '../ports/api-keys.js';
import type { Ledger, ReserveItem, ReserveOptions, ReserveOutcome, ReserveResult } from '../ports/ledger.js';
import type { Expectation, GenerationChange, GenerationPatch, InsertReserve, NewEvent, NewGeneration } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { BatchCompletion } from './batch-completion.js';
import { GenerationLog } from './generation-log.js';
import { LifecycleObserver } from './observer.js';

import type { FailRequest, CompleteRequest, ReserveKey, Tenant, Failing, Finishing, RecoveryDecision } from './lifecycle-types.js';
export type { FailRequest, CompleteRequest, ReserveKey, Tenant, Failing, Finishing, RecoveryDecision } from './lifecycle-types.js';

/** Why a generation that has not started must not any more: a `low` one's deadline passed (free); null otherwise. */
function missedDeadline(rec: GenerationRecord, now: number): FailRequest | null {
  if (rec.deadlineAt === undefined || rec.deadlineAt > now) return null;
  return { cause: 'deadline_passed', reason: 'its deadline passed before it started', publicMessage: 'The deadline passed before spare capacity ran this generation.' };
}

const WHOLE = Object.freeze({ fraction: 1 }); // A completed generation's progress: one for all (stores copy what they keep).
const FIRST_CLAIM: NewEvent = Object.freeze({ type: 'processing', data: Object.freeze({ claim: 1 }) }); // The same: every first claim's event.
/** The states a change may start from, and the lease it needs. Every transition of a generation is one of these. */
const FROM = {
  /** A worker's own claim: it holds the lease. */
  held: (holder: string): Expectation => ({ status: ['processing'], lease: { heldBy: holder } }),
  /** Nobody works on it: pending, or processing with a lost (expired) or released (parked) lease. */
  unheld: { status: ['pending', 'processing'], lease: 'free' } as Expectation,
  pending: { status: ['pending'] } as Expectation,
  /** Processing, whoever holds it (a cancel, which also aborts the worker). */
  processing: { status: ['processing'] } as Expectation,
};

/**
 * The state machine of a generation and its money. Every state change is decided here (which changes exist, from
 * which states, what they cost, what their events say) and handed to the store as one compare-and-set with its
 * event; the ledger effect (reserve before the insert, settle after a finishing change, release when a create is
 * undone) follows the change and is idempotent by generation id, so a crash between the two leaves a terminal
 * generation with an open reserve, which `reconcileReserves` settles at the stored price.
 *
 * The rules it applies are pure functions of the domain (fees.ts: the fee of each failure and the price cap;
 * rules.ts: budget windows and lives; batches.ts: when a batch is done). Creation (creation.ts), cancelling's
 * aftermath (cancellation.ts), clean-up (cleanup.ts, deletion.ts) and recovery (recovery.ts) ask it for each change.
 */
@injectable()
export class Lifecycle {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(GenerationLog) private readonly log: GenerationLog,
    @inject(TOKENS.Ledger) private readonly ledger: Ledger,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(BatchCompletion) private readonly batches: BatchCompletion,
    @inject(LifecycleObserver) private readonly observer: LifecycleObserver,
  ) {}

  /** Whether the store holds this ledger's reserves (`GenerationLog.settlesFor`), asked once. */
  private storeSettles: boolean | undefined;

  private get holder(): string {
    return this.options.instanceId;
  }

  /** `FROM.held` for this instance, made once (a store only reads an expectation): not three objects per change. */
  private heldHere: Expectation | undefined;
  private held = (): Expectation => (this.heldHere ??= FROM.held(this.holder));

  /** True when the ledger keeps the in-flight cap in its reserve (then the insert does not count). */
  get ledgerHoldsInFlight(): boolean {
    return this.ledger.holdsInFlight === true;
  }

  /**
   * Holds one generation's price at every level at once: the balance, the key's budget and cap, the owner's
   * organisation's budget and in-flight cap, and with `maxInFlight` (only when `ledgerHoldsInFlight`) the user's cap
   * (402 or 429 when any would be passed, nothing held). Answers the owner's organisation, which its job carries.
   */
  reserve(userId: string, item: ReserveItem, key: ReserveKey | undefined, now: number, retryAfterSeconds = 1, maxInFlight?: number): Promise<Tenant | undefined> {
    const options = this.reserveOptions(key, now);
    if (item.modelId !== undefined) options.modelId = item.modelId;
    if (maxInFlight !== undefined) options.maxInFlight = maxInFlight;
    // A `then`, not an await (issue 36); called only inside a create's promise chain, where a throw is a rejection.
    return this.ledger.reserve(userId, item.generationId, item.amount, now, options).then((answer) => this.admitted(answer, key, () => ({ now, priced: `price ${item.amount}`, what: 'generation', retryAfterSeconds, ...(maxInFlight !== undefined ? { userMaxInFlight: maxInFlight } : {}) })));
  }

  /**
   * True when a create may reserve and insert in one atomic step: the store holds this ledger's reserves and the key
   * has no budget or cap. The owner's organisation (or any limit beyond its balance and cap) is the store's to see:
   * it answers `limited` and the create takes `reserve`.
   */
  canInsertReserved(key: ReserveKey | undefined): boolean {
    return key?.budget === undefined && key?.maxInFlight === undefined && (this.storeSettles ??= this.log.settlesFor(this.ledger));
  }

  /**
   * The reserve (as `reserve`, with the user's in-flight cap) and the insert with its event in one atomic step (only
   * when `canInsertReserved`); 402/429 when refused, nothing written; `limited` when the full reserve must be taken.
   * In a `then`, without a spread, the refusal's context made only for a refusal (issue 36: every in-memory create).
   */
  insertReserved(gen: NewGeneration, event: NewEvent, item: ReserveItem, key: ReserveKey | undefined, now: number, maxInFlight: number, retryAfterSeconds: number): Promise<'ok' | 'limited'> {
    const reserve: InsertReserve = key ? { amount: item.amount, now, maxInFlight, keyId: key.keyId } : { amount: item.amount, now, maxInFlight };
    return this.log.insertReserved(gen, event, reserve).then((outcome) => {
      if (outcome === 'limited' || outcome === 'ok') return outcome;
      this.admitted(outcome, key, () => ({ now, priced: `price ${item.amount}`, what: 'generation', retryAfterSeconds, userMaxInFlight: maxInFlight }));
      return 'ok';
    });
  }

  /** Holds every reserve of a batch at once, all or nothing (402 or 429 when any level cannot cover the total, nothing held). */
  async reserveMany(userId: string, items: readonly ReserveItem[], key: ReserveKey | undefined, now: number): Promise<Tenant | undefined> {
    const total = items.reduce((sum, i) => sum + i.amount, 0);
    const answer = await this.ledger.reserveMany(userId, items, now, this.reserveOptions(key, now));
    return this.admitted(answer, key, () => ({ now, priced: `batch total ${total}`, what: 'batch', retryAfterSeconds: 1 }));
  }

  /** Gives back the reserves of creates that were undone before anything ran (best effort: recovery releases orphans). */
  async release(generationIds: readonly string[]): Promise<void> {
    for (const id of generationIds) await this.ledger.release(id).catch(() => undefined);
  }

  private reserveOptions(key: ReserveKey | undefined, now: number): ReserveOptions {
    const options: ReserveOptions = { windows: budgetWindows(now) };
    if (key) options.keyId = key.keyId;
    if (key?.budget) options.keyLimit = { amount: key.budget.amount, windowStart: budgetWindow(key.budget.period, now).start };
    if (key?.maxInFlight !== undefined) options.keyMaxInFlight = key.maxInFlight;
    return options;
  }

  /**
   * Throws the refusal of any level (`reserveRefusal`, worded from `context`), or answers the owner's organisation. A
   * plain `ok` (a ledger without organisations or user limits) has neither: nothing is worded or read (issue 36).
   */
  private admitted(
    answer: ReserveResult | ReserveOutcome,
    key: ReserveKey | undefined,
    context: () => { now: number; priced: string; what: string; retryAfterSeconds: number; userMaxInFlight?: number },
  ): Tenant | undefined {
    if (answer === 'ok') return undefined;
    const outcome = reserveOutcome(answer);
    if (outcome.result !== 'ok') {
      const refusal = reserveRefusal(outcome, { ...context(), ...(key?.budget ? { key: key.budget } : {}), ...(key?.maxInFlight !== undefined ? { keyMaxInFlight: key.maxInFlight } : {}) });
      if (refusal) throw refusal;
    }
    const org = outcome.organization;
    return org ? { organizationId: org.organizationId, weight: org.weight } : undefined;
  }

  /**
   * Why a generation nobody works on must not run again, or null when it may: its model is gone, a `low` one's
   * deadline passed while it was pending (free), or it was claimed `maxClaims` times already and lost its worker each
   * time. The one give-up rule, asked by claim and by recovery.
   */
  private giveUp(rec: GenerationRecord, now: number): FailRequest | null {
    if (!this.registry.get(rec.modelId)) return { cause: 'model_gone', reason: 'model no longer exists' };
    if (rec.status === 'pending') return missedDeadline(rec, now);
    if (rec.status === 'processing' && rec.parkedUntil === undefined && rec.claims >= this.options.runner.maxClaims) {
      return { cause: 'worker_lost', reason: `gave up after ${rec.claims} lost runs` };
    }
    return null;
  }

  /**
   * Claims a generation for this instance: from pending; a processing one whose worker was lost (its lease expired;
   * one more claim); or a parked remote job whose check is due (not a claim: no count, no event). Null when it is not
   * claimable (finished, or leased), or when the give-up rule fails it instead.
   */
  claim(job: { generationId: string; modelId: string; priority?: string }): Promise<GenerationRecord | null> {
    const now = this.options.clock.now();
    const leaseExpiresAt = now + this.options.runner.leaseMs;
    // Written out rather than spread from `lease`: a spread in a literal takes V8's slow path (issue 36).
    const fromPending: GenerationChange = { expect: FROM.pending, set: { status: 'processing', claims: 1, startedAt: now, leaseOwner: this.holder, leaseExpiresAt }, event: FIRST_CLAIM, now };
    // Pending is the common case and needs no read: a pending generation was never claimed, and its claim is settled
    // without an async frame (issue 36). (A job whose model is gone, or a low one that may carry a deadline, goes the
    // long way, to the give-up rule.)
    if (this.registry.get(job.modelId) && job.priority !== 'low') {
      return this.log.change(job.generationId, fromPending).then((fresh) => (fresh ? this.claimed(fresh, now) : this.claimLong(job.generationId, fromPending, now)));
    }
    return this.claimLong(job.generationId, fromPending, now);
  }

  /** Claimed from pending. A queue that does not carry the job's priority: a low one past its deadline still fails free. */
  private claimed(fresh: GenerationRecord, now: number): GenerationRecord | null | Promise<null> {
    const missed = missedDeadline(fresh, now);
    return missed ? this.fail(fresh, this.held(), missed).then(() => null) : this.started(fresh, now);
  }

  /** A claim the long way: the generation read first (`fromPending`: the claim from pending, made by `claim`). */
  private async claimLong(generationId: string, fromPending: GenerationChange, now: number): Promise<GenerationRecord | null> {
    const rec = await this.log.get(generationId);
    if (!rec || isTerminal(rec.status)) return null;
    if (rec.status === 'processing' && rec.leaseExpiresAt !== undefined && rec.leaseExpiresAt > now) return null;
    const stop = this.giveUp(rec, now);
    if (stop) {
      await this.fail(rec, FROM.unheld, stop);
      return null;
    }
    if (rec.status === 'pending') return this.started(await this.log.change(generationId, fromPending), now);
    const { leaseOwner, leaseExpiresAt } = fromPending.set;
    if (rec.parkedUntil !== undefined) {
      return this.log.change(generationId, { expect: { status: ['processing'], lease: 'free', parked: true }, set: { parkedUntil: null, leaseOwner, leaseExpiresAt }, now });
    }
    const claims = rec.claims + 1;
    return this.log.change(generationId, {
      expect: { status: ['processing'], lease: 'free', parked: false, claims: rec.claims },
      set: { claims, leaseOwner, leaseExpiresAt },
      event: { type: 'processing', data: { claim: claims } },
      now,
    });
  }

  private started(rec: GenerationRecord | null, now: number): GenerationRecord | null {
    if (rec) this.observer.started(rec, now);
    return rec;
  }

  /**
   * What recovery does with an unfinished generation nobody holds: fail it (the give-up rule), or run it again
   * (`requeue`: enqueue it, or a parked remote job's check). A generation a live worker holds is skipped.
   */
  async recover(rec: GenerationRecord, now: number): Promise<RecoveryDecision> {
    if (isTerminal(rec.status)) return 'skipped';
    if (rec.status === 'processing' && (rec.leaseExpiresAt ?? 0) > now) return 'skipped';
    const stop = this.giveUp(rec, now);
    if (stop) return (await this.fail(rec, FROM.unheld, stop)) !== null ? 'failed' : 'skipped';
    return 'requeue';
  }

  /**
   * Every open reserve, `limit` at a time, oldest first (however many live ones are older): one whose generation is
   * finished is settled at its stored price (a crash between the change and its ledger effect); one without a
   * generation older than `recovery.orphanReserveMs` is released (a create that crashed before its insert). A ledger
   * that does not page (its next page starts with one already seen) has its first page looked at only.
   */
  async reconcileReserves(limit: number): Promise<{ settled: number; released: number }> {
    const out = { settled: 0, released: 0 };
    const now = this.options.clock.now();
    const seen = new Set<string>();
    for (let page = await this.ledger.openReserves(limit); page.length > 0 && !seen.has(page[0]!.generationId); ) {
      for (const r of page) {
        seen.add(r.generationId);
        const gen = await this.log.get(r.generationId);
        if (gen && isTerminal(gen.status)) {
          await this.ledger.settle(r.generationId, gen.price ?? 0);
          out.settled++;
        } else if (!gen && now - r.createdAt > this.options.recovery.orphanReserveMs) {
          await this.ledger.release(r.generationId);
          out.released++;
        }
      }
      page = page.length < limit ? [] : await this.ledger.openReserves(limit, page[page.length - 1]);
    }
    return out;
  }

  /** Stores a remote job's handle (once per generation) while this instance holds the lease. */
  async setRemoteHandle(generationId: string, handle: unknown): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.log.change(generationId, { expect: { ...FROM.held(this.holder), noRemoteHandle: true }, set: { remoteHandle: handle }, now })) !== null;
  }

  /** Lets go of a remote job until its next check, `delayMs` from now (the runner schedules that check). */
  async park(generationId: string, delayMs: number): Promise<boolean> {
    const now = this.options.clock.now();
    const parked = await this.log.change(generationId, {
      expect: FROM.held(this.holder),
      set: { leaseOwner: null, leaseExpiresAt: null, parkedUntil: now + delayMs },
      now,
    });
    return parked !== null;
  }

  /** Extends the leases this instance holds, in one store call; answers the ids still held. */
  renewLeases(generationIds: readonly string[]): Promise<string[]> {
    const now = this.options.clock.now();
    return this.log.renewLeases(generationIds, this.holder, now + this.options.runner.leaseMs, now);
  }

  async progress(generationId: string, fraction: number, message?: string): Promise<boolean> {
    const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
    const progress = message === undefined ? { fraction: f } : { fraction: f, message: String(message).slice(0, 200) };
    const now = this.options.clock.now();
    return (await this.log.change(generationId, { expect: this.held(), set: { progress }, event: { type: 'progress', data: { ...progress } }, now })) !== null;
  }

  /** Appends streamed text to the log of a generation this instance holds (no field changes). */
  async output(generationId: string, delta: string): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.log.change(generationId, { expect: this.held(), set: {}, event: { type: 'output', data: { delta } }, now })) !== null;
  }

  /** Appends a preview (a file the runner stored) to the log of a generation this instance holds. */
  async preview(generationId: string, key: string, mimeType: string): Promise<boolean> {
    const now = this.options.clock.now();
    return (await this.log.change(generationId, { expect: this.held(), set: {}, event: { type: 'preview', data: { key, mimeType } }, now })) !== null;
  }

  /**
   * Completes a generation this instance holds and settles its charge (`completionCharge`: never more than its
   * reserve). False when refused (lease lost, cancelled).
   */
  complete(gen: Finishing & Pick<GenerationRecord, 'reserved'>, result: CompleteRequest): Promise<boolean> {
    const served = result.servedBy ? this.registry.priceOf(result.servedBy.model, result.servedBy.settings) : undefined;
    const price = completionCharge(gen.reserved, result.reportedPrice, served);
    const now = this.options.clock.now();
    const lifeEndsAt = lifeEnd(gen.expiresAfterSeconds, now);
    // Whatever the provider last reported, a completed generation is done: its progress is whole. The optional fields
    // are added one by one, in this order, rather than spread in (V8's slow path and a temporary each: issue 36).
    const set: GenerationPatch = { status: 'completed', price, finishedAt: now, progress: WHOLE };
    if (lifeEndsAt !== undefined) set.lifeEndsAt = lifeEndsAt;
    if (result.resultText !== undefined) set.resultText = result.resultText;
    if (result.resultKey !== undefined) set.resultKey = result.resultKey;
    if (result.servedBy !== undefined) set.servedModelId = result.servedBy.model.info.modelId;
    // The settle in the change's own step when the store can (Postgres: the finish is one statement, issue 36).
    const settles = this.log.settlesFor(this.ledger);
    // Each step in a `then` of the last, not an await: no suspended frame on every generation's path (issue 36).
    return this.log.change(gen.id, this.finishing(set, { type: 'completed', data: { price } }, now, settles, price)).then((done) => {
      if (!done) return false;
      return settles ? this.batches.finished(done, price, now) : this.ledger.settle(gen.id, price, now).then(() => this.batches.finished(done, price, now));
    });
  }

  /** Fails a generation this instance holds. Returns the settled price, or null when refused. */
  failClaimed(gen: Failing, request: FailRequest): Promise<number | null> {
    return this.fail(gen, this.held(), request);
  }

  /**
   * Cancels a pending or processing generation: free from pending, the model's failure fee once a worker has it (the
   * state it really moved from decides: a cancel racing a claim is tried from pending first). The generation as
   * failed, or null when there was nothing to cancel. Stopping its run is `Cancellation`'s.
   */
  async cancel(gen: Failing): Promise<GenerationRecord | null> {
    const reason = 'cancelled by its owner';
    return (
      (await this.failAt(gen, FROM.pending, { cause: 'cancelled_pending', reason })) ??
      (await this.failAt(gen, FROM.processing, { cause: 'cancelled_running', reason }, this.failureFeeOf(gen.modelId)))
    );
  }

  /**
   * Cancels, free, every member of a batch no worker has started, in one set-based store step (the cancel of a pending
   * generation: the same failure, event and price 0, so a claim racing it finds it failed); their reserves are given
   * back. Answers the cancelled ids. The processing members are left to `cancel`, one by one.
   */
  async cancelPendingOfBatch(batchId: string): Promise<string[]> {
    const request: FailRequest = { cause: 'cancelled_pending', reason: 'cancelled by its owner' };
    const { code } = failureRule(request.cause);
    const price = failurePrice(request.cause, 0, 0);
    const now = this.options.clock.now();
    const error: FailureInfo = { code, message: FAILURE_MESSAGES[code] };
    const failed = await this.log.changeBatchMembers(batchId, {
      expect: FROM.pending,
      set: { status: 'failed', price, failureReason: request.reason, error, parkedUntil: null, finishedAt: now },
      event: { type: 'failed', data: { price, error: { ...error } } },
      now,
    });
    // The ledger port settles one reserve per call; then the batch, looked at once for them all, and the observer.
    for (const rec of failed) await this.ledger.settle(rec.id, price, now);
    await this.batches.finished(failed, price, now, { code, reason: request.reason });
    return failed.map((r) => r.id);
  }

  /** A finishing change, from `from` (held by this instance unless given), with its settle when the store makes it. */
  private finishing(set: GenerationPatch, event: NewEvent, now: number, settles: boolean, price: number, from = this.held()): GenerationChange {
    // Two literals rather than a spread or a property added later: one object of a fixed shape either way.
    return settles ? { expect: from, set, event, now, settle: price } : { expect: from, set, event, now };
  }

  /** The model's failure fee (0 when the model is gone). */
  private failureFeeOf(modelId: string): number {
    return this.registry.get(modelId)?.failureFee ?? 0;
  }

  private async fail(gen: Failing, from: Expectation, request: FailRequest): Promise<number | null> {
    return (await this.failAt(gen, from, request, this.failureFeeOf(gen.modelId)))?.price ?? null;
  }

  /** The failed transition and its ledger effect; the record as failed, or null when refused. */
  private async failAt(gen: Finishing & Pick<GenerationRecord, 'reserved'>, from: Expectation, request: FailRequest, failureFee = 0): Promise<GenerationRecord | null> {
    const { code } = failureRule(request.cause, request.providerCode);
    const price = failurePrice(request.cause, failureFee, gen.reserved);
    const now = this.options.clock.now();
    const error: FailureInfo = { code, message: request.publicMessage ?? FAILURE_MESSAGES[code] };
    const lifeEndsAt = lifeEnd(gen.expiresAfterSeconds, now);
    const set: GenerationPatch = { status: 'failed', price, failureReason: request.reason, error, parkedUntil: null, finishedAt: now };
    if (lifeEndsAt !== undefined) set.lifeEndsAt = lifeEndsAt;
    // As a completion: the settle in the change's own step when the store can.
    const settles = this.log.settlesFor(this.ledger);
    const failed = await this.log.change(gen.id, this.finishing(set, { type: 'failed', data: { price, error: { ...error } } }, now, settles, price, from));
    if (!failed) return null;
    if (!settles) await this.ledger.settle(gen.id, price, now);
    await this.batches.finished(failed, price, now, { code, reason: request.reason });
    return failed;
  }
}
