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

  /** Checks, stores and completes a run's result (`fallback`: the model that served it, when not its own). */
  finish(run: Run, output: GenerationOutput, fallback?: Candidate): Promise<void> {
    // The common result, a text model's text (at a valid price, or none), is completed straight, without an async
    // frame of its own (issue 36); it passes every check below, and a refusal has nothing stored to delete.
    if (isText(output) && run.model.info.resultType === 'text') {
      return this.lifecycle.complete(run.rec, completion(output, fallback, output.text, undefined)).then((ok) => {
        if (!ok) run.log.warn({}, REFUSED);
      });
    }
    return this.check(run, output, fallback);
  }

  /** Any other result: checked against the provider contract, stored when it is bytes, then completed. */
  private async check(run: Run, output: GenerationOutput, fallback: Candidate | undefined): Promise<void> {
    const { rec, model, abort, log } = run;
    let resultText: string | undefined;
    let resultKey: string | undefined;
    let stored = false;
    try {
      if (output.price !== undefined && !(typeof output.price === 'number' && Number.isFinite(output.price) && output.price >= 0)) {
        throw new BadOutput(`the provider priced the result at ${String(output.price)}`);
      }
      if ('text' in output && typeof output.text === 'string') {
        if (model.info.resultType !== 'text') throw new BadOutput(`a ${model.info.resultType} model returned text`);
        resultText = output.text;
      } else if ('bytes' in output && output.bytes instanceof Uint8Array) {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        const bytes = output.bytes;
        const mimeType = output.mimeType;
        try {
          resultKey = await this.calls.withRetries(() => this.upload(bytes, mimeType), model, run);
        } catch (err) {
          if (!(err instanceof StorageUnavailable)) throw err;
          // The model did its work and our storage failed it: the Lifecycle charges nothing for this cause.
          log.error({ err }, 'the result could not be stored');
          await this.lifecycle.failClaimed(rec, { cause: 'storage_unavailable', publicMessage: err.publicMessage, reason: err.message });
          return;
        }
        stored = true;
      } else if ('file' in output && typeof output.file === 'string') {
        if (model.info.resultType === 'text') throw new BadOutput('a text model must return { text }');
        resultKey = output.file;
      } else {
        throw new BadOutput('the provider returned no result');
      }
    } catch (err) {
      // Aborted while the result was being stored: the run's own handler decides (cancelled, timed out, lease lost).
      if (abort.aborted) throw err;
      log.error({ err: asError(err) }, 'provider broke its contract');
      await this.lifecycle.failClaimed(rec, { cause: 'bad_output', reason: err instanceof Error ? err.message : String(err) });
      return;
    }
    const ok = await this.lifecycle.complete(rec, completion(output, fallback, resultText, resultKey));
    if (!ok) {
      log.warn({}, REFUSED);
      if (resultKey && stored) await this.blobs.delete(resultKey);
    }
  }
}

/** Another worker took over (our lease expired) or the generation was cancelled: our result is void. */
const REFUSED = 'completion refused by the store; result discarded';

/** A text result at a valid price (or none): what `check` would pass for a text model. */
function isText(output: GenerationOutput): output is { text: string; price?: number } {
  if (typeof output !== 'object' || output === null || !('text' in output) || typeof output.text !== 'string') return false;
  const price = output.price;
  return price === undefined || (typeof price === 'number' && Number.isFinite(price) && price >= 0);
}

/** The completion's request: one literal of a fixed shape (an absent member undefined, as the Lifecycle reads them), not spreads (issue 36). */
function completion(output: GenerationOutput, fallback: Candidate | undefined, resultText: string | undefined, resultKey: string | undefined): CompleteRequest {
  return { reportedPrice: output.price, servedBy: fallback ? { model: fallback.model, settings: fallback.settings } : undefined, resultText, resultKey };
}
