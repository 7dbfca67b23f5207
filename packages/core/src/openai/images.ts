import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import { isTerminal, type GenerationRecord } from '../domain/types.js';
import type { Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { openAiError } from './errors.js';
import { OpenAiJobs, type JobRequest } from './jobs.js';
import { badField } from './mapping.js';
import { formatOf, unixSeconds, usageOf } from './shapes.js';

/** Fields of an image request that are the surface's own, never a model's setting. */
const CONTROL = ['model', 'n', 'response_format', 'user', 'stream', 'partial_images'] as const;

/** `POST /images/generations` makes `image_generation.*` stream events, `POST /images/edits` `image_edit.*`. */
export type ImageKind = 'image_generation' | 'image_edit';

/** OpenAI's images answer. */
export interface ImagesAnswer {
  created: number;
  data: Array<{ url: string } | { b64_json: string }>;
  output_format?: string;
  usage: ReturnType<typeof usageOf>;
}

/** The checked control fields of an image request. */
interface ImageControls {
  n: number;
  format: 'url' | 'b64_json';
  stream: boolean;
  partials: number;
}

function controls(fields: Record<string, unknown>): ImageControls {
  const { n = 1, response_format: format = 'b64_json', stream = false, partial_images: partials = 0 } = fields;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) throw badField('n', 'must be a whole number from 1 to 10');
  if (format !== 'url' && format !== 'b64_json') throw badField('response_format', 'must be "url" or "b64_json"', 'invalid_option');
  if (typeof stream !== 'boolean') throw badField('stream', 'must be true or false', 'invalid_type');
  if (typeof partials !== 'number' || !Number.isInteger(partials) || partials < 0 || partials > 3) throw badField('partial_images', 'must be a whole number from 0 to 3');
  if (stream && n !== 1) throw badField('n', 'must be 1 when streaming');
  return { n, format, stream, partials };
}

/** One Server-Sent Events message of an image stream. */
function sse(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

/**
 * A stream's messages, holding a slot until they end, fail, or the client leaves: `return()` releases it at once,
 * also before the first `next()` (a generator's own `finally` would not run then).
 */
function holding(messages: AsyncGenerator<string>, release: () => void): AsyncIterableIterator<string> {
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      try {
        const r = await messages.next();
        if (r.done) release();
        return r;
      } catch (err) {
        release();
        throw err;
      }
    },
    async return() {
      release();
      return messages.return(undefined);
    },
  };
}

/**
 * `POST /images/generations` and `POST /images/edits`: the generations started as the request says, answered when they
 * finished (within `openai.maxWaitSeconds`), or as a stream of the previews the model emits and then the image.
 */
@injectable()
export class OpenAiImages {
  constructor(
    @inject(OpenAiJobs) private readonly jobs: OpenAiJobs,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
  ) {}

  /** Whether the request asks for a stream (checked with the rest of its control fields). */
  streams(fields: Record<string, unknown>): boolean {
    return controls(fields).stream;
  }

  /** The images, once every generation of the request completed. */
  async create(key: Principal, request: JobRequest): Promise<ImagesAnswer> {
    const { n, format } = controls(request.fields);
    const model = this.jobs.model(key, request.fields.model, 'image');
    const deadline = this.jobs.deadline();
    const release = this.jobs.hold(key.userId);
    const recs: GenerationRecord[] = [];
    try {
      const ids = await this.jobs.start(key, model, { ...request, n }, CONTROL);
      for (const id of ids) recs.push(await this.jobs.completed(key.userId, id, deadline));
    } finally {
      release();
    }
    const data: ImagesAnswer['data'] = [];
    let outputFormat: string | undefined;
    for (const rec of recs) {
      if (format === 'url') {
        data.push({ url: this.jobs.fileUrl(rec, rec.resultKey!, request.baseUrl) });
      } else {
        const blob = await this.jobs.result(rec);
        outputFormat ??= formatOf(blob.mimeType);
        data.push({ b64_json: Buffer.from(blob.bytes).toString('base64') });
      }
    }
    const price = recs.reduce((sum, r) => sum + (r.price ?? 0), 0);
    return { created: unixSeconds(recs[0]!.createdAt), data, ...(outputFormat !== undefined ? { output_format: outputFormat } : {}), usage: usageOf(price) };
  }

  /**
   * The stream of one image: `<kind>.partial_image` for each preview the model emits (at most `partial_images`), then
   * `<kind>.completed`; a failure is an `error` event. The generation is started (and a bad request refused) before
   * the stream is answered.
   */
  async stream(key: Principal, request: JobRequest, kind: ImageKind): Promise<AsyncIterable<string>> {
    const { partials } = controls(request.fields);
    const model = this.jobs.model(key, request.fields.model, 'image');
    const deadline = this.jobs.deadline();
    // Held until the stream ends (as the native event stream holds its slot).
    const release = this.jobs.hold(key.userId);
    let id: string | undefined;
    try {
      [id] = await this.jobs.start(key, model, request, CONTROL);
    } catch (err) {
      release();
      throw err;
    }
    return holding(this.events(key.userId, id!, kind, partials, deadline), release);
  }

  private async *events(userId: string, id: string, kind: ImageKind, partials: number, deadline: number): AsyncGenerator<string> {
    const sent = new Set<number>();
    let rec = await this.jobs.record(userId, id);
    const keepAlive = Math.max(1, Math.floor(this.options.push.keepAliveMs / 1000));
    for (;;) {
      if (sent.size < partials) {
        for (const p of await this.jobs.previews(rec)) {
          if (sent.has(p.seq) || sent.size >= partials) continue;
          const blob = await this.jobs.file(p.key);
          sent.add(p.seq);
          if (!blob) continue;
          yield sse(`${kind}.partial_image`, { ...this.common(rec, blob.mimeType), b64_json: Buffer.from(blob.bytes).toString('base64'), partial_image_index: sent.size - 1 });
        }
      }
      if (isTerminal(rec.status)) {
        yield await this.last(rec, kind);
        return;
      }
      const left = deadline - this.options.clock.now();
      if (left <= 0) {
        const err = this.jobs.stillRunning(id);
        yield sse('error', { error: openAiError(err.code, err.message) });
        return;
      }
      const before = rec.updatedAt;
      rec = await this.jobs.next(userId, id, Math.min(keepAlive, Math.ceil(left / 1000)), true, true);
      // Nothing happened while waiting: a comment line keeps proxies from closing the stream.
      if (rec.updatedAt === before && !isTerminal(rec.status)) yield ': keepalive\n\n';
    }
  }

  /** The last event of a stream: the image, or the error of a failed generation. */
  private async last(rec: GenerationRecord, kind: ImageKind): Promise<string> {
    try {
      const done = this.jobs.succeeded(rec);
      const blob = await this.jobs.result(done);
      return sse(`${kind}.completed`, { ...this.common(done, blob.mimeType), b64_json: Buffer.from(blob.bytes).toString('base64'), usage: usageOf(done.price ?? 0) });
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      return sse('error', { error: openAiError(err.code, err.message) });
    }
  }

  private common(rec: GenerationRecord, mimeType: string): Record<string, unknown> {
    const size = rec.settings.size;
    return {
      created_at: unixSeconds(rec.createdAt),
      size: typeof size === 'string' ? size : 'auto',
      quality: typeof rec.settings.quality === 'string' ? rec.settings.quality : 'auto',
      background: 'auto',
      output_format: formatOf(mimeType),
    };
  }

}
