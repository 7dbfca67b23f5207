import { createHash } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import { FileUrlSigner } from '../domain/file-urls.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import { expiresAt } from '../domain/rules.js';
import { isTerminal, type BaseUrl, type GenerationRecord, type ResultType } from '../domain/types.js';
import { ExpiringReads } from '../lifecycle/expiring-reads.js';
import type { Principal } from '../ports/api-keys.js';
import type { BlobStore, StoredBlob } from '../ports/blob.js';
import type { ModelDefinition } from '../ports/provider.js';
import { LiveStatus } from '../push/live-status.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Generations, keyAllows } from '../use-cases/generations.js';
import { inClientWords, modelFor, settingsOf, type ControlFields } from './mapping.js';

/** An uploaded file of a multipart request (an image to edit, a mask, a video's reference). */
export interface UploadedFile {
  bytes: Uint8Array;
  mimeType: string;
}

/** What a request of the OpenAI surface starts: its model's fields, and files by field. */
export interface JobRequest {
  /** The request's fields (model, prompt, size, ...), files left out. */
  fields: Record<string, unknown>;
  files?: Record<string, UploadedFile[]>;
  /** How many generations (`n`): 1 unless given. */
  n?: number;
  idempotencyKey?: string;
  baseUrl?: BaseUrl;
}

/**
 * What every route of the OpenAI surface does with generations: find the model the key may use, map the request onto
 * its settings and start it (through `Generations.create`, so keys, budgets, limits and idempotency are the native
 * API's), wait for it within `openai.maxWaitSeconds`, and read its files.
 */
@injectable()
export class OpenAiJobs {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(Generations) private readonly generations: Generations,
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
  ) {}

  /** The models the key may use. */
  models(key: Principal): ModelDefinition[] {
    return this.generations
      .listModels()
      .filter((m) => keyAllows(key, m.modelId))
      .map((m) => this.generations.getModel(m.modelId)!);
  }

  /** The model of a request: 404 for one the key cannot see, 400 for another kind of result. */
  model(key: Principal, modelId: unknown, kind: ResultType): ModelDefinition {
    return modelFor((id) => this.generations.getModel(id), (id) => keyAllows(key, id), modelId, kind);
  }

  /**
   * Starts `n` generations of the request on `model` (ids in order). Uploads are stored in the blob store and handed
   * to the model as the service's signed file URLs. With an Idempotency-Key, the request is recognised by its fields
   * and its files' bytes; the i-th of several generations gets the key `<key>#<i>`. When one cannot be started, the
   * ones started before it are cancelled (free: they are still pending) and its error is the answer.
   */
  async start(key: Principal, model: ModelDefinition, request: JobRequest, control: ControlFields): Promise<string[]> {
    const fields: Record<string, unknown> = { ...request.fields };
    const digests: Record<string, string[]> = {};
    for (const [field, files] of Object.entries(request.files ?? {})) {
      fields[field] = await Promise.all(files.map((f) => this.upload(f, request.baseUrl)));
      digests[field] = files.map((f) => createHash('sha256').update(f.bytes).digest('hex'));
    }
    let settings: ReturnType<typeof settingsOf>;
    try {
      settings = settingsOf(model, fields, control);
    } catch (err) {
      throw inClientWords(err, model, model.modelId, fields);
    }
    const basis = { surface: 'openai', fields: request.fields, files: digests };
    const ids: string[] = [];
    const n = request.n ?? 1;
    try {
      for (let i = 0; i < n; i++) {
        const idempotencyKey = request.idempotencyKey === undefined ? undefined : i === 0 ? request.idempotencyKey : `${request.idempotencyKey}#${i}`;
        const created = await this.generations.create(
          key.userId,
          { modelId: model.modelId, settings },
          { key, ...(idempotencyKey !== undefined ? { idempotencyKey } : {}) },
          Object.keys(digests).length > 0 ? { ...basis, index: i } : undefined,
        );
        ids.push(created.generationId);
      }
    } catch (err) {
      for (const id of ids) await this.generations.cancel(key.userId, id).catch(() => undefined);
      throw inClientWords(err, model, model.modelId, fields);
    }
    return ids;
  }

  /** An uploaded file, stored, as a URL the model can read. */
  private async upload(file: UploadedFile, baseUrl: BaseUrl | undefined): Promise<string> {
    const key = await this.blobs.put(file.bytes, file.mimeType);
    return this.base(baseUrl) + this.signer.sign(key, this.options.clock.now());
  }

  private base(baseUrl: BaseUrl | undefined): string {
    if (this.options.publicUrl) return this.options.publicUrl;
    const base = typeof baseUrl === 'function' ? baseUrl() : baseUrl;
    if (this.options.trustRequestHost && base) return base.replace(/\/+$/, '');
    throw new Error('a file URL needs options.publicUrl (or trustRequestHost)');
  }

  /** The signed URL of one of a generation's files; it stops working when the generation expires. */
  fileUrl(rec: GenerationRecord, key: string, baseUrl: BaseUrl | undefined): string {
    return this.base(baseUrl) + this.signer.sign(key, this.options.clock.now(), expiresAt(rec, this.options.retention.finishedTtlMs));
  }

  /** The caller's generation; 404 (`notFound`) for another user's or a missing one. */
  async record(userId: string, id: string, notFound = 'Generation not found.'): Promise<GenerationRecord> {
    const rec = GENERATION_ID_PATTERN.test(id) ? await this.store.get(id, userId) : null;
    if (!rec) throw new DomainError('not_found', notFound);
    return rec;
  }

  /** When the generation is finished at the latest: now plus `openai.maxWaitSeconds` (epoch ms). */
  deadline(): number {
    return this.options.clock.now() + (this.options.openai?.maxWaitSeconds ?? 120) * 1000;
  }

  /**
   * Waits up to `seconds` for a change of the generation (with `output`, also for new partial output); the record then.
   */
  next(userId: string, id: string, seconds: number, output = false): Promise<GenerationRecord> {
    return this.live.waitForChange(userId, id, seconds, output);
  }

  /**
   * The generation once it completed. Past `deadline` a 408 (it goes on: the same request with the same
   * Idempotency-Key waits for it again); a failed one is the error its failure says.
   */
  async completed(userId: string, id: string, deadline: number): Promise<GenerationRecord> {
    let rec = await this.record(userId, id);
    while (!isTerminal(rec.status)) {
      const left = deadline - this.options.clock.now();
      if (left <= 0) throw this.stillRunning(id);
      rec = await this.next(userId, id, Math.ceil(left / 1000));
    }
    return this.succeeded(rec);
  }

  /** The 408 of a generation still running at the deadline. */
  stillRunning(id: string): DomainError {
    return new DomainError(
      'request_timeout',
      `The generation ${id} is still running after ${this.options.openai?.maxWaitSeconds ?? 120} s; repeat the request with the same Idempotency-Key to wait for it again, or read it at GET /v1/generations/${id}.`,
    );
  }

  /** A completed record as it is; a failed one as its error (400 for input the model could not use, else 500). */
  succeeded(rec: GenerationRecord): GenerationRecord {
    if (rec.status === 'completed') return rec;
    const why = rec.error ?? { code: 'provider_error', message: 'The generation failed.' };
    throw new DomainError(why.code === 'invalid_input' ? 'invalid_request' : 'internal', `The generation failed (${why.code}): ${why.message}`);
  }

  /** A generation's result file. */
  async result(rec: GenerationRecord): Promise<StoredBlob> {
    const blob = rec.resultKey === undefined ? null : await this.blobs.get(rec.resultKey);
    if (!blob) throw new DomainError('not_found', 'The generation has no result file.');
    return blob;
  }

  /** The blob keys of a generation's previews, oldest first, each with its event's seq. */
  async previews(rec: GenerationRecord): Promise<Array<{ seq: number; key: string; mimeType: string }>> {
    const events = await this.store.eventsOf(rec.id);
    return events.filter((e) => e.type === 'preview' && typeof e.data.key === 'string').map((e) => ({ seq: e.seq, key: String(e.data.key), mimeType: String(e.data.mimeType) }));
  }

  /** A file's bytes (a preview), or null when it is gone. */
  file(key: string): Promise<StoredBlob | null> {
    return this.blobs.get(key);
  }
}
