export interface IdempotencyRecord {
  userId: string;
  key: string;
  /** SHA-256 of the canonical request body. */
  requestHash: string;
  /** The generation created for it; absent while the first request is still being handled. */
  generationId?: string;
  createdAt: number;
}

export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'in_progress'; requestHash: string }
  | { state: 'done'; generationId: string; requestHash: string };

/**
 * Remembers Idempotency-Key headers of POST /v1/generations, per user.
 *
 * Guarantees: `begin` is atomic: of concurrent calls with the same (userId, key) exactly one gets `new`.
 * `finish` records the generation (a second `finish` keeps the first id); `abandon` forgets a key whose first
 * request failed so it can be retried, and does nothing once the key is finished.
 * Records older than the configured retention may be purged.
 */
export interface IdempotencyStore {
  begin(userId: string, key: string, requestHash: string, now: number): Promise<IdempotencyBegin>;
  finish(userId: string, key: string, generationId: string): Promise<void>;
  abandon(userId: string, key: string): Promise<void>;
  purgeBefore(before: number): Promise<number>;
}
