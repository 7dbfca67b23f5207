import { inject, injectable } from 'tsyringe';
import type { GenerationEvent, GenerationRecord, GenerationView } from '../domain/types.js';
import { expiresAt } from '../domain/rules.js';
import { FileUrlSigner } from '../domain/file-urls.js';
import type { BaseUrl } from '../domain/types.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { QueueInfo } from '../runner/queue-positions.js';

/** One generation as the list, the details view, streams and webhooks show it. */
export interface GenerationItem {
  generationId: string;
  modelId: string;
  status: GenerationRecord['status'];
  /** ISO 8601. */
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  result?: string;
  price?: number;
  error?: { code: string; message: string };
  progress?: { fraction: number; message?: string };
  metadata?: Record<string, string>;
  /** Completed by one of its model's `fallbacks`: that model. Absent when its own model served it. */
  servedModelId?: string;
  /**
   * ISO 8601: when a finished generation is deleted (its result URL stops working then too), with the service's
   * `retention` or a create's `expiresAfterSeconds` (the earlier of the two).
   */
  expiresAt?: string;
  /** Details of a processing generation only: the partial output its provider streamed so far. */
  output?: PartialOutput;
  /** Details and the event stream of a pending generation only: where it waits in the queue. */
  queue?: QueueInfo;
}

/** What a provider streamed so far: its text deltas joined, and its latest preview as a signed file URL. */
export interface PartialOutput {
  text?: string;
  preview?: { url: string; mimeType: string };
}

/**
 * Turns stored records into what clients read: the contract's exact per-state shapes, or the richer item. File
 * results are signed URLs made at read time (never stored), so they always carry a fresh expiry.
 */
@injectable()
export class Views {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
  ) {}

  /** Where file URLs start: `publicUrl`, or the request's own address with `trustRequestHost`. */
  fileBase(baseUrl: BaseUrl | undefined): string {
    if (this.options.publicUrl) return this.options.publicUrl;
    const base = typeof baseUrl === 'function' ? baseUrl() : baseUrl;
    if (this.options.trustRequestHost && base) return base.replace(/\/+$/, '');
    throw new Error('a file result needs options.publicUrl (or trustRequestHost) to build its URL');
  }

  private result(rec: GenerationRecord, baseUrl: BaseUrl | undefined): string {
    if (rec.resultText !== undefined) return rec.resultText;
    return this.fileUrl(rec.resultKey!, rec, baseUrl);
  }

  /**
   * The signed URL of one of the generation's files (its result, a preview), tagged with its owner, so the owner can
   * give it as an input of another generation ("use as input") and nobody else can.
   */
  fileUrl(key: string, rec: GenerationRecord, baseUrl: BaseUrl | undefined): string {
    // A file link never outlives its generation: it stops working when the generation expires.
    return this.fileBase(baseUrl) + this.signer.sign(key, this.options.clock.now(), expiresAt(rec, this.options.retention.finishedTtlMs), rec.ownerId);
  }

  /** A `preview` event as the event stream sends it: `{ url, mimeType }`. */
  preview(e: GenerationEvent, rec: GenerationRecord, baseUrl: BaseUrl | undefined): { url: string; mimeType: string } {
    return { url: this.fileUrl(String(e.data.key), rec, baseUrl), mimeType: String(e.data.mimeType) };
  }

  /** The partial output a log holds (text joined in order, the latest preview); undefined when it holds none. */
  partial(rec: GenerationRecord, events: readonly GenerationEvent[], baseUrl: BaseUrl | undefined): PartialOutput | undefined {
    let text = '';
    let preview: GenerationEvent | undefined;
    for (const e of events) {
      if (e.type === 'output') text += String(e.data.delta);
      else if (e.type === 'preview') preview = e;
    }
    if (text === '' && !preview) return undefined;
    const out: PartialOutput = {};
    if (text !== '') out.text = text;
    if (preview) out.preview = this.preview(preview, rec, baseUrl);
    return out;
  }

  /** The contract's shape for the record's state, field for field. */
  view(rec: GenerationRecord, baseUrl?: BaseUrl): GenerationView {
    if (rec.status === 'completed') return { status: rec.status, result: this.result(rec, baseUrl), price: rec.price ?? 0 };
    if (rec.status === 'failed') return { status: rec.status, price: rec.price ?? 0 };
    return { status: rec.status };
  }

  /**
   * The item for a message sent outside a request (a webhook): without `publicUrl` a file result has no URL to give,
   * so `result` is left out and the receiver reads it with GET.
   */
  pushItem(rec: GenerationRecord): GenerationItem {
    if (rec.resultKey !== undefined && rec.resultText === undefined && !this.options.publicUrl) {
      const { result: _omitted, ...rest } = this.item({ ...rec, resultText: '' });
      return rest;
    }
    return this.item(rec);
  }

  item(rec: GenerationRecord, baseUrl?: BaseUrl): GenerationItem {
    const out: GenerationItem = {
      generationId: rec.id,
      modelId: rec.modelId,
      status: rec.status,
      createdAt: new Date(rec.createdAt).toISOString(),
    };
    if (rec.startedAt !== undefined) out.startedAt = new Date(rec.startedAt).toISOString();
    if (rec.finishedAt !== undefined) out.finishedAt = new Date(rec.finishedAt).toISOString();
    if (rec.status === 'completed') out.result = this.result(rec, baseUrl);
    if (rec.status === 'completed' || rec.status === 'failed') out.price = rec.price ?? 0;
    if (rec.status === 'failed' && rec.error) out.error = { code: rec.error.code, message: rec.error.message };
    if (rec.progress) out.progress = rec.progress.message === undefined ? { fraction: rec.progress.fraction } : { ...rec.progress };
    if (rec.metadata && Object.keys(rec.metadata).length > 0) out.metadata = { ...rec.metadata };
    if (rec.servedModelId !== undefined && rec.status === 'completed') out.servedModelId = rec.servedModelId;
    const expires = expiresAt(rec, this.options.retention.finishedTtlMs);
    if (expires !== undefined) out.expiresAt = new Date(expires).toISOString();
    return out;
  }
}
