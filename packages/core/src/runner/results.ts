import { inject, injectable } from 'tsyringe';
import { UnavailableError } from '../domain/errors.js';
import { type CompleteRequest, Lifecycle } from '../lifecycle/lifecycle.js';
import { asError } from '../logger.js';
import type { BlobStore } from '../ports/blob.js';
import type { GenerationContext, GenerationOutput } from '../ports/provider.js';
import { Telemetry } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import type { Candidate } from './fallbacks.js';
import type { OutputSink } from './output-stream.js';
import { MediaReader } from './media-reader.js';
import { ProviderCalls } from './provider-calls.js';
import { BadOutput, StorageUnavailable, type Run } from './run.js';

/**
 * What a run produces, kept: files a provider stores (`ctx.files`, previews), and its result, checked against the
 * provider contract, stored, and handed to the Lifecycle's `complete` (which decides the charge). A result the
 * Lifecycle refuses (the run lost its generation) is deleted again.
 */
@injectable()
export class Results {
  /** `ctx.files` of every run: one object for all of them. */
  readonly files: GenerationContext['files'] = {
    put: (bytes, mimeType) => this.upload(bytes, mimeType),
    fetch: (url, options) => this.media.fetch(url, options),
  };

  constructor(
    @inject(Lifecycle) private readonly lifecycle: Lifecycle,
    @inject(TOKENS.Blobs) private readonly blobs: BlobStore,
    @inject(ProviderCalls) private readonly calls: ProviderCalls,
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(MediaReader) private readonly media: MediaReader,
  ) {}

  /** `blobs.put`, with an outage turned into a retryable failure (the runner's backoff applies). */
  upload(bytes: Uint8Array, mimeType: string): Promise<string> {
    return this.telemetry.inSpan('genservice.blob.put', { 'genservice.blob.bytes': bytes.byteLength, 'genservice.blob.mime_type': mimeType }, async () => {
      try {
        return await this.blobs.put(bytes, mimeType);
      } catch (err) {
        throw err instanceof UnavailableError ? new StorageUnavailable(err) : err;
      }
    });
  }

  /** Where a run's `ctx.output` writes: the log, and a preview's bytes to the blob store first. */
  sink(id: string): OutputSink {
    return {
      text: (delta) => this.lifecycle.output(id, delta),
      preview: async (bytes, mimeType) => {
        const key = await this.upload(bytes, mimeType);
        // Refused (the run lost its lease, or was cancelled): nobody will ever see or delete this file otherwise.
        if (!(await this.lifecycle.preview(id, key, mimeType))) await this.blobs.delete(key);
      },
    };
  }

  /**
   * Checks, stores and completes a run's result (`fallback`: the model that served it, when not its own). A text or a
   * file link is completed at once, without an async frame (issue 36); bytes are stored first.
   */
  finish(run: Run, output: GenerationOutput, fallback?: Candidate): Promise<void> {
    let kind: 'text' | 'bytes' | 'file';
    try {
      kind = resultKind(output, run.model.info.resultType);
    } catch (err) {
      return this.broken(run, err);
    }
    if (kind === 'bytes') return this.stored(run, output as Extract<GenerationOutput, { bytes: Uint8Array }>, fallback);
    const text = kind === 'text' ? (output as { text: string }).text : undefined;
    const file = kind === 'file' ? (output as { file: string }).file : undefined;
    return this.completed(run, output, fallback, text, file, false);
  }

  /** A result of bytes: stored (with retries), then completed; our storage's outage fails it free. */
  private async stored(run: Run, output: Extract<GenerationOutput, { bytes: Uint8Array }>, fallback: Candidate | undefined): Promise<void> {
    const { bytes, mimeType } = output;
    let key: string;
    try {
      key = await this.calls.withRetries(() => this.upload(bytes, mimeType), run.model, run);
    } catch (err) {
      if (!(err instanceof StorageUnavailable)) return this.broken(run, err);
      // The model did its work and our storage failed it: the Lifecycle charges nothing for this cause.
      run.log.error({ err }, 'the result could not be stored');
      await this.lifecycle.failClaimed(run.rec, { cause: 'storage_unavailable', publicMessage: err.publicMessage, reason: err.message });
      return;
    }
    return this.completed(run, output, fallback, undefined, key, true);
  }

  /** Completes the run; a completion refused (the run lost its generation) deletes the result it stored. */
  private completed(run: Run, output: GenerationOutput, fallback: Candidate | undefined, text: string | undefined, key: string | undefined, stored: boolean): Promise<void> {
    return this.lifecycle.complete(run.rec, completion(output, fallback, text, key)).then((ok) => {
      if (ok) return;
      run.log.warn({}, REFUSED);
      if (stored && key) return this.blobs.delete(key);
    });
  }

  /** A result that broke the provider contract fails its generation, unless the run was aborted (its own handler decides). */
  private broken(run: Run, err: unknown): Promise<void> {
    // Aborted while the result was being checked or stored: cancelled, timed out or lease lost decide instead.
    if (run.abort.aborted) return Promise.reject(err);
    run.log.error({ err: asError(err) }, 'provider broke its contract');
    return this.lifecycle.failClaimed(run.rec, { cause: 'bad_output', reason: err instanceof Error ? err.message : String(err) }).then(() => undefined);
  }
}

/**
 * What a provider's result is, checked against the provider contract for a model of `resultType`: a valid price (or
 * none), and text from a text model only, bytes or a file link from any other. Throws `BadOutput` otherwise.
 */
function resultKind(output: GenerationOutput, resultType: string): 'text' | 'bytes' | 'file' {
  if (typeof output !== 'object' || output === null) throw new BadOutput('the provider returned no result');
  const price = output.price;
  if (price !== undefined && !(typeof price === 'number' && Number.isFinite(price) && price >= 0)) {
    throw new BadOutput(`the provider priced the result at ${String(price)}`);
  }
  if ('text' in output && typeof output.text === 'string') {
    if (resultType !== 'text') throw new BadOutput(`a ${resultType} model returned text`);
    return 'text';
  }
  const kind = 'bytes' in output && output.bytes instanceof Uint8Array ? 'bytes' : 'file' in output && typeof output.file === 'string' ? 'file' : undefined;
  if (kind === undefined) throw new BadOutput('the provider returned no result');
  if (resultType === 'text') throw new BadOutput('a text model must return { text }');
  return kind;
}

/** Another worker took over (our lease expired) or the generation was cancelled: our result is void. */
const REFUSED = 'completion refused by the store; result discarded';

/** The completion's request: one literal of a fixed shape (an absent member undefined, as the Lifecycle reads them), not spreads (issue 36). */
function completion(output: GenerationOutput, fallback: Candidate | undefined, resultText: string | undefined, resultKey: string | undefined): CompleteRequest {
  return { reportedPrice: output.price, servedBy: fallback ? { model: fallback.model, settings: fallback.settings } : undefined, resultText, resultKey };
}
