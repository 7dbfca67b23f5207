import type { BatchRecord, GenerationEvent, GenerationRecord } from '../domain/types.js';
import type { Expectation, NewEvent } from '../ports/store.js';

/**
 * The memory store's records as it keeps them and hands them out: a caller gets copies, so nothing it does to what it
 * got back can change the stored state.
 */

/** What every event with no data keeps: one object for all of them (never handed out: reads copy event data). */
const NO_DATA: GenerationEvent['data'] = Object.freeze({}) as GenerationEvent['data'];

/**
 * Event data of one field holding a number or a boolean (`{ claim: 1 }`, `{ price }`: most events), and a record's
 * progress (`{ fraction: 1 }` on every completed one), kept once for every event or record that has the same: each
 * object kept for good is work for every GC (issue 36). Never a string: the table outlives the events (it is shared by
 * every store of the process), and a provider's text must go when its generation is removed. By field name, then
 * value: a Map compares numbers as SameValueZero, so -0 is never shared (it keeps its own copy, and stays -0). Bounded:
 * past `INTERNED_MAX` different ones, further data is kept as its own copy.
 */
const interned = new Map<string, Map<number | boolean, GenerationEvent['data']>>();
let internedCount = 0;
const INTERNED_MAX = 4096;

/** An event's data as the store keeps it: the one shared empty object, a shared frozen one (see `interned`), or its own copy. */
export function keptData(data: NewEvent['data']): GenerationEvent['data'] {
  let fields = 0;
  let name = '';
  for (const key in data) {
    if (++fields > 1) break;
    name = key;
  }
  if (fields === 0) return NO_DATA;
  if (fields === 1) {
    const value = (data as Record<string, unknown>)[name];
    if (typeof value === 'boolean' || (typeof value === 'number' && !Object.is(value, -0))) {
      let byValue = interned.get(name);
      const shared = byValue?.get(value);
      if (shared !== undefined) return shared;
      if (internedCount < INTERNED_MAX) {
        if (byValue === undefined) interned.set(name, (byValue = new Map()));
        const kept = Object.freeze({ [name]: value }) as GenerationEvent['data'];
        byValue.set(value, kept);
        internedCount++;
        return kept;
      }
    }
  }
  return cloneJson(data) as GenerationEvent['data'];
}

/** Whether every condition of `expect` holds for `record` at `now`. */
export function holds(record: GenerationRecord, expect: Expectation, now: number): boolean {
  if (!expect.status.includes(record.status)) return false;
  if (expect.lease !== undefined) {
    const expired = record.leaseExpiresAt === undefined || now >= record.leaseExpiresAt;
    if (expect.lease === 'free' ? !expired : expired || record.leaseOwner !== expect.lease.heldBy) return false;
  }
  if (expect.parked !== undefined && (record.parkedUntil !== undefined) !== expect.parked) return false;
  if (expect.claims !== undefined && record.claims !== expect.claims) return false;
  if (expect.noRemoteHandle && record.remoteHandle !== undefined) return false;
  return true;
}

/** Records hold validated JSON (strings, numbers, booleans, arrays, plain objects): a JSON-shaped deep copy is enough. */
export function cloneJson(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(cloneJson);
  // A host field type may produce a Date, a Map...: those keep the general (slower) copy.
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  const src = value as Record<string, unknown>;
  // Own keys only (an enumerable property on Object.prototype is not copied in), without a key array (issue 36).
  for (const k in src) if (Object.hasOwn(src, k)) out[k] = cloneJson(src[k]);
  return out;
}

export function copyBatch(b: BatchRecord): BatchRecord {
  const out: BatchRecord = { ...b, generationIds: [...b.generationIds] };
  if (b.webhook) out.webhook = { ...b.webhook };
  return out;
}
