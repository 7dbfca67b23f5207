import { inject, injectable } from 'tsyringe';
import type { GenerationRecord } from '../domain/types.js';
import type { Principal } from '../ports/api-keys.js';
import { OpenAiJobs, type JobRequest } from './jobs.js';

/** Fields of a speech request that are the surface's own: the audio is answered whole, never streamed. */
const CONTROL = ['model', 'stream_format', 'user'] as const;

/** `POST /audio/speech`: the audio generation, once it completed (its bytes are the answer). */
@injectable()
export class OpenAiSpeech {
  constructor(@inject(OpenAiJobs) private readonly jobs: OpenAiJobs) {}

  async create(key: Principal, request: JobRequest): Promise<GenerationRecord> {
    const model = this.jobs.model(key, request.fields.model, 'audio');
    const deadline = this.jobs.deadline();
    const release = this.jobs.hold(key.userId);
    try {
      const [id] = await this.jobs.start(key, model, request, CONTROL);
      return await this.jobs.completed(key.userId, id!, deadline);
    } finally {
      release();
    }
  }
}
