// The changes core's Lifecycle hands a store, written out for tests that drive the store directly (without a
// service): the same expectations, patches and event payloads as packages/core/src/lifecycle/lifecycle.ts.
import type { FailureInfo, GenerationChange, NewEvent, NewGeneration } from '@genservice/core/ports';

/** A new pending generation and its `created` event, as the Lifecycle inserts it. */
export function newGeneration(
  gen: Omit<NewGeneration, 'status'>,
): [NewGeneration, NewEvent] {
  return [{ ...gen, status: 'pending' }, { type: 'created', data: { modelId: gen.modelId } }];
}

export const change = {
  /** The first claim, from pending. */
  claim(holder: string, leaseMs: number, now: number): GenerationChange {
    return {
      expect: { status: ['pending'] },
      set: { status: 'processing', claims: 1, startedAt: now, leaseOwner: holder, leaseExpiresAt: now + leaseMs },
      event: { type: 'processing', data: { claim: 1 } },
      now,
    };
  },
  /** Another claim of a processing generation whose worker was lost (`claims` it had). */
  reclaim(claims: number, holder: string, leaseMs: number, now: number): GenerationChange {
    return {
      expect: { status: ['processing'], lease: 'free', parked: false, claims },
      set: { claims: claims + 1, leaseOwner: holder, leaseExpiresAt: now + leaseMs },
      event: { type: 'processing', data: { claim: claims + 1 } },
      now,
    };
  },
  progress(holder: string, fraction: number, now: number, message?: string): GenerationChange {
    const progress = message === undefined ? { fraction } : { fraction, message };
    return { expect: { status: ['processing'], lease: { heldBy: holder } }, set: { progress }, event: { type: 'progress', data: { ...progress } }, now };
  },
  complete(holder: string, price: number, now: number, result: { resultText?: string; resultKey?: string } = {}): GenerationChange {
    return {
      expect: { status: ['processing'], lease: { heldBy: holder } },
      set: { status: 'completed', price, finishedAt: now, ...result },
      event: { type: 'completed', data: { price } },
      now,
    };
  },
  /** A failure from the states `from` allows (a worker's own claim: `{ status: ['processing'], lease: { heldBy } }`). */
  fail(from: GenerationChange['expect'], price: number, reason: string, error: FailureInfo, now: number): GenerationChange {
    return {
      expect: from,
      set: { status: 'failed', price, failureReason: reason, error, parkedUntil: null, finishedAt: now },
      event: { type: 'failed', data: { price, error: { ...error } } },
      now,
    };
  },
  held(holder: string): GenerationChange['expect'] {
    return { status: ['processing'], lease: { heldBy: holder } };
  },
};
