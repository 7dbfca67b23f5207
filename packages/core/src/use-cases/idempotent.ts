import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import type { IdempotencyStore } from '../ports/idempotency.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

/** One create under an Idempotency-Key, as a use case describes it. */
export interface KeyedCreate<T> {
  userId: string;
  /** The key as stored (a use case may put it in a namespace of its own: `batch:...`). */
  key: string;
  /** `requestHash` of what is created: the same key with another body is refused. */
  hash: string;
  /** A new id for what is created (a generation's, a batch's). */
  newId(): string;
  /**
   * Creates it under this id. `keyHeld` records the key done if this request still holds it (false: a retry took it
   * over); the create asks it once what it made is stored and before it is enqueued, so a loser's work never runs.
   */
  create(id: string, keyHeld: () => Promise<boolean>): Promise<T>;
  /** The answer of a request that finished under this id. */
  answer(id: string): Promise<T>;
  /** What a crashed request stored under this id, as its answer, or null when it stored nothing. */
  stored(id: string): Promise<T | null>;
  /**
   * A retry took the key over while this request stalled, after `created` was made: undo it (never enqueued, it is
   * still pending, so cancelling is free) and answer (`winnerOf` gives the retry's id once it finished) or throw.
   */
  lost(created: T, id: string): Promise<T>;
}

/** The answer while another request with the same key is still being handled. */
export function idempotencyConflict(): DomainError {
  return new DomainError('idempotency_conflict', 'A request with this Idempotency-Key is still being handled.');
}

/**
 * The Idempotency-Key rule of every create, written once: the first request with a key creates and records its id;
 * the same key and body again answers that id; another body is refused (`idempotency_mismatch`). A request still in
 * progress is taken to be alive for `runner.leaseMs` (`idempotency_conflict`); after that it crashed (or stalled), and
 * a retry takes the key over: it answers what the crashed request stored, or creates it under a fresh id (never the
 * planned one: its reserve, if the crash left one, may already be released as an orphan, and reserving that id again
 * would not hold any tokens). A create that fails gives its key up; one whose key was taken over meanwhile is undone.
 */
@injectable()
export class IdempotentCreates {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Idempotency) private readonly idempotency: IdempotencyStore,
  ) {}

  async run<T>(request: KeyedCreate<T>): Promise<T> {
    const { userId, key, hash } = request;
    const planned = request.newId();
    const begun = await this.idempotency.begin(userId, key, hash, this.options.clock.now(), planned);
    if (begun.state !== 'new' && begun.requestHash !== hash) {
      throw new DomainError('idempotency_mismatch', 'This Idempotency-Key was used with a different request body.');
    }
    if (begun.state === 'done') return request.answer(begun.generationId);
    if (begun.state === 'new') return this.createForKey(request, planned);

    // In progress. Within a lease time the first request is taken to be alive; after it, it crashed (or stalled)
    // and this retry finishes its work.
    const now = this.options.clock.now();
    const staleBefore = now - this.options.runner.leaseMs;
    if (begun.startedAt >= staleBefore) throw idempotencyConflict();
    // The crashed request got as far as storing it: that is the answer (recovery runs it if it never got queued).
    const existing = await request.stored(begun.generationId);
    const id = existing ? begun.generationId : request.newId();
    if (!(await this.idempotency.takeOver(userId, key, staleBefore, now, id))) throw idempotencyConflict();
    if (existing) {
      await this.idempotency.finish(userId, key, id);
      return existing;
    }
    return this.createForKey(request, id);
  }

  /** The id a request that took this key over finished with; throws idempotency_conflict while it has not. */
  async winnerOf(userId: string, key: string, id: string): Promise<string> {
    const now = await this.idempotency.begin(userId, key, '', this.options.clock.now(), id);
    if (now.state === 'done') return now.generationId;
    throw idempotencyConflict();
  }

  /**
   * Creates under the key's id; a failed create gives the key up, one whose key was taken over is undone. The key is
   * recorded done between the insert and the enqueue (`keyHeld`): a request taken over while it stalled learns so
   * before its generation can run, so undoing it is free (finished after the enqueue, a worker could have claimed it,
   * or completed it, and the one key would be charged twice).
   */
  private async createForKey<T>(request: KeyedCreate<T>, id: string): Promise<T> {
    let held: boolean | undefined;
    const keyHeld = (): Promise<boolean> => this.idempotency.finish(request.userId, request.key, id).then((kept) => (held = kept));
    let created: T;
    try {
      created = await request.create(id, keyHeld);
    } catch (err) {
      await this.idempotency.abandon(request.userId, request.key, id).catch(() => undefined);
      throw err;
    }
    // Not asked by the create (its finish failed there, and it enqueued anyway): asked now, as before.
    if (held ?? (await keyHeld())) return created;
    return request.lost(created, id);
  }
}
