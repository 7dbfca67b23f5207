export interface IdempotencyRecord {
  userId: string;
  key: string;
  /** SHA-256 of the canonical request body. */
  requestHash: string;
  /**
   * The generation this key creates. Chosen before the generation is created (so a retry after a crash can find
   * it), and final once `done` is true.
   */
  generationId: string;
  /** False while the request that began it (or took it over) is being handled. */
  done: boolean;
  /** When the current attempt began (`begin`, or the last `takeOver`); epoch ms. */
  startedAt: number;
  createdAt: number;
}

export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'in_progress'; requestHash: string; generationId: string; startedAt: number }
  | { state: 'done'; generationId: string; requestHash: string };

/**
 * Remembers Idempotency-Key headers of POST /v1/generations, per user.
 *
 * Guarantees:
 * - `begin` is atomic: of concurrent calls with the same (userId, key) exactly one gets `new`, and its record
 *   names the `generationId` it was given.
 * - `takeOver` is atomic: of concurrent calls on one in-progress record older than `staleBefore`, exactly one
 *   gets true; it restarts the record's clock and names the new `generationId`. It is how a retry after a crash
 *   finishes what the crashed request began.
 * - `finish` marks the record done only while it still names `generationId` (a request that was taken over
 *   learns so from `false`); a finished record never changes again.
 * - `abandon` forgets an unfinished key whose attempt failed so it can be retried, and does nothing once the key
 *   is finished or names another generation.
 * - Records older than the configured retention may be purged.
 */
export interface IdempotencyStore {
  begin(userId: string, key: string, requestHash: string, now: number, generationId: string): Promise<IdempotencyBegin>;
  takeOver(userId: string, key: string, staleBefore: number, now: number, generationId: string): Promise<boolean>;
  finish(userId: string, key: string, generationId: string): Promise<boolean>;
  abandon(userId: string, key: string, generationId: string): Promise<void>;
  purgeBefore(before: number): Promise<number>;
}
