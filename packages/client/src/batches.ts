import { GenServiceError } from './errors.js';
import { isRecord, type Transport } from './transport.js';
import type { AnyModels, Batch, BatchCancelResult, BatchCreated, CreateBatchInput, GenerationItem, GenerationPage, ModelMap } from './types.js';

/** `client.batches`: many generations created, reserved and followed as one. */
export interface BatchesApi<M extends ModelMap<M> = AnyModels> {
  /**
   * POST /v1/batches. All or nothing: a bad request throws a 400 InvalidRequestError naming each bad one by its index
   * (`requests[3].settings.prompt`), a total the balance or key budget cannot cover a 402; nothing is created then.
   * With `idempotencyKey`, a retry answers the same batch.
   */
  create(input: CreateBatchInput<M>, options?: { idempotencyKey?: string; signal?: AbortSignal }): Promise<BatchCreated>;
  /** GET /v1/batches/:id: running or completed, its generations by status, the tokens charged so far. */
  get(batchId: string, options?: { signal?: AbortSignal }): Promise<Batch>;
  /** GET /v1/batches/:id/generations: one page of its generations, newest first. */
  list(batchId: string, options?: { limit?: number; cursor?: string; signal?: AbortSignal }): Promise<GenerationPage>;
  /** Every page of `list`, one generation at a time. */
  listAll(batchId: string, options?: { limit?: number; signal?: AbortSignal }): AsyncIterable<GenerationItem>;
  /** POST /v1/batches/:id/cancel: cancels its unfinished generations (free while pending). */
  cancel(batchId: string, options?: { signal?: AbortSignal }): Promise<BatchCancelResult>;
}

function invalid(message: string): GenServiceError {
  return new GenServiceError(message, { status: 200, code: 'invalid_response' });
}

function toBatch(body: unknown, what: string): Batch {
  if (!isRecord(body) || (body.status !== 'running' && body.status !== 'completed') || !isRecord(body.counts) || typeof body.price !== 'number') {
    throw invalid(`${what}: not a batch`);
  }
  return body as unknown as Batch;
}

export function batchesApi(transport: Transport): BatchesApi {
  const path = (id: string, tail = '') => `/v1/batches/${encodeURIComponent(id)}${tail}`;
  const list: BatchesApi['list'] = async (batchId, options = {}) => {
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.cursor !== undefined) q.set('cursor', options.cursor);
    const query = q.toString();
    const body = await transport.request('GET', `${path(batchId, '/generations')}${query ? `?${query}` : ''}`, { signal: options.signal });
    if (!isRecord(body) || !Array.isArray(body.data)) throw invalid('GET /v1/batches/:id/generations: no data array');
    return { data: body.data as GenerationItem[], nextCursor: typeof body.nextCursor === 'string' ? body.nextCursor : null };
  };
  return {
    async create(input, options = {}) {
      const headers: Record<string, string> = {};
      if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
      const body = await transport.request('POST', '/v1/batches', { body: input, headers, signal: options.signal });
      if (!isRecord(body) || typeof body.batchId !== 'string' || !Array.isArray(body.generationIds)) throw invalid('POST /v1/batches: no batchId');
      return { batchId: body.batchId, generationIds: body.generationIds as string[] };
    },
    async get(batchId, options = {}) {
      return toBatch(await transport.request('GET', path(batchId), { signal: options.signal }), 'GET /v1/batches/:id');
    },
    list,
    async *listAll(batchId, options = {}) {
      let cursor: string | undefined;
      for (;;) {
        const page = await list(batchId, { ...options, ...(cursor !== undefined ? { cursor } : {}) });
        yield* page.data;
        if (page.nextCursor === null) return;
        cursor = page.nextCursor;
      }
    },
    async cancel(batchId, options = {}) {
      const body = await transport.request('POST', path(batchId, '/cancel'), { signal: options.signal });
      const batch = toBatch(body, 'POST /v1/batches/:id/cancel');
      return { ...batch, cancelled: isRecord(body) && typeof body.cancelled === 'number' ? body.cancelled : 0 };
    },
  };
}
