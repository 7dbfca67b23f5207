import { createHash } from 'node:crypto';
import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import { isTerminal, type BaseUrl, type GenerationRecord, type ResultType } from '../domain/types.js';
import { ExpiringReads } from '../lifecycle/expiring-reads.js';
import type { Principal } from '../ports/api-keys.js';
import type { StoredBlob } from '../ports/blob.js';
import type { ModelDefinition } from '../ports/provider.js';
import { LiveStatus } from '../push/live-status.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Batches } from '../use-cases/batches.js';
import { Generations, keyAllows } from '../use-cases/generations.js';
import { inClientWords, modelFor, settingsOf, type ControlFields } from './mapping.js';
import { OpenAiFiles, type UploadedFile } from './uploads.js';

export type { UploadedFile };

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
    @inject(Batches) private readonly batches: Batches,
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(LiveStatus) private readonly live: LiveStatus,
    @inject(OpenAiFiles) readonly files: OpenAiFiles,
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
   * to the model as the service's signed file URLs. One is created as a single generation (with an Idempotency-Key,
   * recognised by the request's fields and its files' bytes); several as one batch, reserved as a whole (a 402 starts
   * none of them) and idempotent as a batch.
   */
  async start(key: Principal, model: ModelDefinition, request: JobRequest, control: ControlFields): Promise<string[]> {
    const fields: Record<string, unknown> = { ...request.fields };
    const digests: Record<string, string[]> = {};
    const n = request.n ?? 1;
    const caller = { userId: key.userId, ...(request.baseUrl !== undefined ? { baseUrl: request.baseUrl } : {}) };
    // Uploads of a request that is then refused (a bad value, 402, ...) are deleted with the refusal.
    const uploaded: string[] = [];
    try {
      for (const [field, files] of Object.entries(request.files ?? {})) {
        const stored = await Promise.allSettled(files.map((f) => this.files.upload(f, key.userId, request.baseUrl)));
        for (const s of stored) if (s.status === 'fulfilled') uploaded.push(s.value.key);
        const failed = stored.find((s) => s.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
        fields[field] = stored.map((s) => (s as PromiseFulfilledResult<{ url: string }>).value.url);
        digests[field] = files.map((f) => createHash('sha256').update(f.bytes).digest('hex'));
      }
      const settings = settingsOf(model, fields, control);
      const input = { modelId: model.modelId, settings };
      const idempotencyKey = request.idempotencyKey;
      if (n > 1) {
        // Checked as a single create would be, so that a bad value is named as the client named it.
        this.generations.priced(input, caller, key);
        return (await this.batches.create(key, { requests: Array.from({ length: n }, () => input) }, idempotencyKey, request.baseUrl)).generationIds;
      }
      const basis = Object.keys(digests).length > 0 ? { surface: 'openai', fields: request.fields, files: digests } : undefined;
      const created = await this.generations.create(key.userId, input, { ...caller, key, ...(idempotencyKey !== undefined ? { idempotencyKey } : {}) }, basis);
      return [created.generationId];
    } catch (err) {
      await this.files.discard(uploaded);
      throw inClientWords(err, model, model.modelId, fields);
    }
  }

  /** The signed URL of one of a generation's files; it stops working when the generation expires. */
  fileUrl(rec: GenerationRecord, key: string, baseUrl: BaseUrl | undefined): string {
    return this.files.url(rec, key, baseUrl);
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
   * One of the user's stream slots for a request held until its generations finished, taken before it starts them (a
   * 429 then starts and charges nothing); its waits (`completed`, `next` with `slotHeld`) take no other.
   */
  hold(userId: string): () => void {
    return this.live.holdSlot(userId);
  }

  /**
   * Waits up to `seconds` for a change of the generation (with `output`, also for new partial output); the record then.
   * Without `slotHeld` the wait takes a stream slot of its own (a long-poll).
   */
  next(userId: string, id: string, seconds: number, output = false, slotHeld = false): Promise<GenerationRecord> {
    return this.live.waitForChange(userId, id, seconds, output, slotHeld);
  }

  /**
   * The generation once it completed, waited for with the slot the caller holds (`hold`). Past `deadline` a 408 (it
   * goes on: the same request with the same Idempotency-Key waits for it again); a failed one is the error its failure says.
   */
  async completed(userId: string, id: string, deadline: number): Promise<GenerationRecord> {
    let rec = await this.record(userId, id);
    while (!isTerminal(rec.status)) {
      const left = deadline - this.options.clock.now();
      if (left <= 0) throw this.stillRunning(id);
      rec = await this.next(userId, id, Math.ceil(left / 1000), false, true);
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
    const blob = rec.resultKey === undefined ? null : await this.files.get(rec.resultKey);
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
    return this.files.get(key);
  }
}
