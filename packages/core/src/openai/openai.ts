import { inject, injectable } from 'tsyringe';
import type { Principal } from '../ports/api-keys.js';
import { DomainError } from '../domain/errors.js';
import { OpenAiImages } from './images.js';
import { OpenAiJobs } from './jobs.js';
import { modelObject } from './shapes.js';
import { OpenAiSpeech } from './speech.js';
import { OpenAiVideos } from './videos.js';

/**
 * The use cases of the OpenAI-compatible surface (docs/openai-compatible.md), as the route table's `/openai/v1/`
 * entries call them: the same generations, keys, budgets and idempotency as the native API, in OpenAI's shapes.
 */
@injectable()
export class OpenAi {
  constructor(
    @inject(OpenAiJobs) private readonly jobs: OpenAiJobs,
    @inject(OpenAiImages) readonly images: OpenAiImages,
    @inject(OpenAiVideos) readonly videos: OpenAiVideos,
    @inject(OpenAiSpeech) readonly speech: OpenAiSpeech,
  ) {}

  /** `GET /models`: the models the key may use, in OpenAI's list shape. */
  models(key: Principal): { object: 'list'; data: Array<ReturnType<typeof modelObject>> } {
    return { object: 'list', data: this.jobs.models(key).map(modelObject) };
  }

  /** `GET /models/{id}`: one of them; 404 for a model the key cannot use, as for a missing one. */
  model(key: Principal, modelId: string): ReturnType<typeof modelObject> {
    const model = this.jobs.models(key).find((m) => m.modelId === modelId);
    if (!model) throw new DomainError('model_not_found', `The model \`${modelId}\` does not exist or you do not have access to it.`, { details: [{ field: 'model', code: 'invalid_value', message: 'no such model' }] });
    return modelObject(model);
  }

  /** A file of a generation, as it is served (`GET /videos/{id}/content`, the audio of `POST /audio/speech`). */
  get files(): OpenAiJobs {
    return this.jobs;
  }
}
