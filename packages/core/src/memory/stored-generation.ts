import type { FailureInfo, GenerationRecord, GenerationStatus, Metadata, Progress, Settings, WebhookEventType } from '../domain/types.js';
import type { GenerationPatch, NewEvent, NewGeneration } from '../ports/store.js';
import { BLOCK_MASK, type NumberBlocks } from './chunked.js';
import { cloneJson, keptData } from './records.js';

/** Every field of a record, each present (absent = undefined): what `StoredGeneration` declares. */
type EveryField = { [K in keyof Required<GenerationRecord>]: GenerationRecord[K] | undefined };

/**
 * The record fields few generations have (a stored file, a failure, metadata, a webhook, expiry, a trace, a priority,
 * a deadline, a batch, a remote job, a fallback): kept apart, so a generation without them keeps 14 slots fewer.
 */
class RareFields {
  resultKey: string | undefined = undefined;
  failureReason: string | undefined = undefined;
  error: FailureInfo | undefined = undefined;
  metadata: Metadata | undefined = undefined;
  remoteHandle: unknown = undefined;
  parkedUntil: number | undefined = undefined;
  webhook: { url: string; events: WebhookEventType[] } | undefined = undefined;
  expiresAfterSeconds: number | undefined = undefined;
  lifeEndsAt: number | undefined = undefined;
  traceparent: string | undefined = undefined;
  priority: 'low' | 'high' | 'normal' | undefined = undefined;
  deadlineAt: number | undefined = undefined;
  batchId: string | undefined = undefined;
  servedModelId: string | undefined = undefined;
}

/**
 * A generation as the memory store keeps it: every field a record can have, declared here in one fixed order (an
 * absent one is undefined; the rare ones behind accessors, in a `RareFields` made when the first is set), and beside
 * them the store's own bookkeeping (its insertion order, its index in its owner's list, the feed positions of its
 * events). A caller never sees this object: `copy()` hands out the fields that are set.
 *
 * One object per generation, where a plain record took nine: the record, the property store its later fields
 * spilled into, an entry for the bookkeeping, an array of event positions and five number boxes (a timestamp is past
 * V8's small integers, so a timestamp field is a box of its own; here the five live in the store's `NumberBlocks`).
 * Every generation is kept for good, and each object kept is copied by the young-generation GC and marked by every
 * full one (issue 36).
 */
export class StoredGeneration implements EveryField {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  status: GenerationStatus;
  reserved: number;
  claims = 0;
  price: number | undefined = undefined;
  resultText: string | undefined = undefined;
  progress: Progress | undefined = undefined;
  leaseOwner: string | undefined = undefined;
  /** The fields most generations never have, made when the first of them is set. */
  private rare: RareFields | undefined = undefined;

  /** Where this generation's five timestamps are: the index of the first in the store's `NumberBlocks`, and its block. */
  readonly at: number;
  private readonly block: Float64Array;
  /** Insertion order: breaks createdAt ties, so "oldest first" is stable. */
  readonly order: number;
  /** Its index in its owner's list. */
  slot = 0;
  /** How many events it has; the feed positions of the first four, then of the rest (an event's `seq` is its index + 1). */
  events = 0;
  private p1 = 0;
  private p2 = 0;
  private p3 = 0;
  private p4 = 0;
  private later: number[] | undefined = undefined;

  /** The stored form of `gen` (copied in: the caller's objects are not kept). */
  constructor(gen: NewGeneration, order: number, times: NumberBlocks) {
    this.at = times.take();
    this.block = times.blockOf(this.at);
    this.id = gen.id;
    this.ownerId = gen.ownerId;
    this.modelId = gen.modelId;
    this.settings = cloneJson(gen.settings) as Settings;
    this.status = gen.status;
    this.reserved = gen.reserved;
    this.createdAt = gen.createdAt;
    this.updatedAt = gen.createdAt;
    this.order = order;
    if (gen.metadata !== undefined) this.metadata = { ...gen.metadata };
    if (gen.webhook !== undefined) this.webhook = { url: gen.webhook.url, events: [...gen.webhook.events] };
    if (gen.expiresAfterSeconds !== undefined) this.expiresAfterSeconds = gen.expiresAfterSeconds;
    if (gen.batchId !== undefined) this.batchId = gen.batchId;
    if (gen.traceparent !== undefined) this.traceparent = gen.traceparent;
    if (gen.priority !== undefined) this.priority = gen.priority;
    if (gen.deadlineAt !== undefined) this.deadlineAt = gen.deadlineAt;
  }

  get resultKey(): string | undefined {
    return this.rare?.resultKey;
  }
  set resultKey(value: string | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).resultKey = value;
  }
  get failureReason(): string | undefined {
    return this.rare?.failureReason;
  }
  set failureReason(value: string | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).failureReason = value;
  }
  get error(): FailureInfo | undefined {
    return this.rare?.error;
  }
  set error(value: FailureInfo | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).error = value;
  }
  get metadata(): Metadata | undefined {
    return this.rare?.metadata;
  }
  set metadata(value: Metadata | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).metadata = value;
  }
  get remoteHandle(): unknown {
    return this.rare?.remoteHandle;
  }
  set remoteHandle(value: unknown) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).remoteHandle = value;
  }
  get parkedUntil(): number | undefined {
    return this.rare?.parkedUntil;
  }
  set parkedUntil(value: number | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).parkedUntil = value;
  }
  get webhook(): { url: string; events: WebhookEventType[] } | undefined {
    return this.rare?.webhook;
  }
  set webhook(value: { url: string; events: WebhookEventType[] } | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).webhook = value;
  }
  get expiresAfterSeconds(): number | undefined {
    return this.rare?.expiresAfterSeconds;
  }
  set expiresAfterSeconds(value: number | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).expiresAfterSeconds = value;
  }
  get lifeEndsAt(): number | undefined {
    return this.rare?.lifeEndsAt;
  }
  set lifeEndsAt(value: number | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).lifeEndsAt = value;
  }
  get traceparent(): string | undefined {
    return this.rare?.traceparent;
  }
  set traceparent(value: string | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).traceparent = value;
  }
  get priority(): 'low' | 'high' | 'normal' | undefined {
    return this.rare?.priority;
  }
  set priority(value: 'low' | 'high' | 'normal' | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).priority = value;
  }
  get deadlineAt(): number | undefined {
    return this.rare?.deadlineAt;
  }
  set deadlineAt(value: number | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).deadlineAt = value;
  }
  get batchId(): string | undefined {
    return this.rare?.batchId;
  }
  set batchId(value: string | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).batchId = value;
  }
  get servedModelId(): string | undefined {
    return this.rare?.servedModelId;
  }
  set servedModelId(value: string | undefined) {
    if (value !== undefined || this.rare !== undefined) (this.rare ??= new RareFields()).servedModelId = value;
  }

  get createdAt(): number {
    return this.block[this.at & BLOCK_MASK]!;
  }
  set createdAt(value: number) {
    this.block[this.at & BLOCK_MASK] = value;
  }
  get updatedAt(): number {
    return this.block[(this.at & BLOCK_MASK) + 1]!;
  }
  set updatedAt(value: number) {
    this.block[(this.at & BLOCK_MASK) + 1] = value;
  }
  get startedAt(): number | undefined {
    return this.read(2);
  }
  set startedAt(value: number | undefined) {
    this.write(2, value);
  }
  get leaseExpiresAt(): number | undefined {
    return this.read(3);
  }
  set leaseExpiresAt(value: number | undefined) {
    this.write(3, value);
  }
  get finishedAt(): number | undefined {
    return this.read(4);
  }
  set finishedAt(value: number | undefined) {
    this.write(4, value);
  }

  /** Timestamp `i` of the five (NaN: absent). */
  private read(i: number): number | undefined {
    const value = this.block[(this.at & BLOCK_MASK) + i]!;
    return value === value ? value : undefined;
  }

  private write(i: number, value: number | undefined): void {
    this.block[(this.at & BLOCK_MASK) + i] = value === undefined ? Number.NaN : value;
  }

  /** Records the feed position of its next event; answers that event's `seq`. */
  addPosition(pos: number): number {
    const seq = ++this.events;
    if (seq === 1) this.p1 = pos;
    else if (seq === 2) this.p2 = pos;
    else if (seq === 3) this.p3 = pos;
    else if (seq === 4) this.p4 = pos;
    else (this.later ??= []).push(pos);
    return seq;
  }

  /** The feed position of its event `seq` (1..events). */
  positionOf(seq: number): number {
    return seq === 1 ? this.p1 : seq === 2 ? this.p2 : seq === 3 ? this.p3 : seq === 4 ? this.p4 : this.later![seq - 5]!;
  }
}

/** A caller's copy of a stored generation: the fields that are set, objects copied, so nothing the caller does to it reaches the store. */
export function copy(s: StoredGeneration): GenerationRecord {
  const out: GenerationRecord = {
    id: s.id,
    ownerId: s.ownerId,
    modelId: s.modelId,
    settings: cloneJson(s.settings) as Settings,
    status: s.status,
    reserved: s.reserved,
    claims: s.claims,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
  if (s.price !== undefined) out.price = s.price;
  if (s.resultText !== undefined) out.resultText = s.resultText;
  if (s.resultKey !== undefined) out.resultKey = s.resultKey;
  if (s.failureReason !== undefined) out.failureReason = s.failureReason;
  if (s.error !== undefined) out.error = { ...s.error };
  if (s.metadata !== undefined) out.metadata = { ...s.metadata };
  if (s.progress !== undefined) out.progress = copyProgress(s.progress);
  if (s.startedAt !== undefined) out.startedAt = s.startedAt;
  if (s.remoteHandle !== undefined) out.remoteHandle = cloneJson(s.remoteHandle);
  if (s.parkedUntil !== undefined) out.parkedUntil = s.parkedUntil;
  if (s.webhook !== undefined) out.webhook = { url: s.webhook.url, events: [...s.webhook.events] };
  if (s.expiresAfterSeconds !== undefined) out.expiresAfterSeconds = s.expiresAfterSeconds;
  if (s.lifeEndsAt !== undefined) out.lifeEndsAt = s.lifeEndsAt;
  if (s.traceparent !== undefined) out.traceparent = s.traceparent;
  if (s.priority !== undefined) out.priority = s.priority;
  if (s.deadlineAt !== undefined) out.deadlineAt = s.deadlineAt;
  if (s.leaseOwner !== undefined) out.leaseOwner = s.leaseOwner;
  if (s.leaseExpiresAt !== undefined) out.leaseExpiresAt = s.leaseExpiresAt;
  if (s.finishedAt !== undefined) out.finishedAt = s.finishedAt;
  if (s.batchId !== undefined) out.batchId = s.batchId;
  if (s.servedModelId !== undefined) out.servedModelId = s.servedModelId;
  return out;
}

/**
 * A progress as its two fields, not a spread: a kept progress is often the shared frozen one (`keptData`: every
 * completed generation's `{ fraction: 1 }`), and a spread of a frozen object takes V8's slow path (~20 times the
 * literal; every read of a completed generation copies it).
 */
function copyProgress(p: Progress): Progress {
  return p.message === undefined ? { fraction: p.fraction } : { fraction: p.fraction, message: p.message };
}

/**
 * Writes a patch onto a stored generation: `null` clears a field (to undefined: the object keeps its one shape), an
 * absent key leaves it. Values are copied in (a progress of one number is shared, as event data is: `keptData`; reads
 * copy it). The patch is the Lifecycle's own plain object: its keys are walked without a key array (issue 36).
 */
export function apply(record: StoredGeneration, patch: GenerationPatch): void {
  for (const key in patch) {
    if (patch[key as keyof GenerationPatch] !== undefined) applyField(record, patch, key as keyof GenerationPatch);
  }
}

/** `null` (clear the field) as undefined. */
const cleared = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value);

/**
 * One field of a patch, written by its name: a write through a variable key onto this class (whose rare fields are
 * accessors) takes V8's slow path, about six times the named writes of this switch, on every claim and completion
 * (issue 36). Every key of `GenerationPatch` has its case (the `never` below fails the build otherwise); any other key
 * is ignored, as the Postgres store ignores it (it could name the store's bookkeeping).
 */
function applyField(r: StoredGeneration, p: GenerationPatch, key: keyof GenerationPatch): void {
  switch (key) {
    case 'status':
      r.status = cleared(p.status) as GenerationStatus;
      return;
    case 'price':
      r.price = cleared(p.price);
      return;
    case 'resultText':
      r.resultText = cleared(p.resultText);
      return;
    case 'resultKey':
      r.resultKey = cleared(p.resultKey);
      return;
    case 'failureReason':
      r.failureReason = cleared(p.failureReason);
      return;
    case 'error':
      r.error = cloneJson(cleared(p.error)) as FailureInfo | undefined;
      return;
    case 'progress':
      r.progress = p.progress === null ? undefined : (keptData(p.progress as unknown as NewEvent['data']) as unknown as Progress);
      return;
    case 'startedAt':
      r.startedAt = cleared(p.startedAt);
      return;
    case 'remoteHandle':
      r.remoteHandle = cloneJson(cleared(p.remoteHandle));
      return;
    case 'parkedUntil':
      r.parkedUntil = cleared(p.parkedUntil);
      return;
    case 'claims':
      r.claims = cleared(p.claims) as number;
      return;
    case 'leaseOwner':
      r.leaseOwner = cleared(p.leaseOwner);
      return;
    case 'leaseExpiresAt':
      r.leaseExpiresAt = cleared(p.leaseExpiresAt);
      return;
    case 'finishedAt':
      r.finishedAt = cleared(p.finishedAt);
      return;
    case 'lifeEndsAt':
      r.lifeEndsAt = cleared(p.lifeEndsAt);
      return;
    case 'servedModelId':
      r.servedModelId = cleared(p.servedModelId);
      return;
    default: {
      const unknownKey: never = key;
      void unknownKey;
    }
  }
}
