import { inject, injectable } from 'tsyringe';
import { DomainError } from '../domain/errors.js';
import { expiresAt } from '../domain/rules.js';
import { isTerminal, type GenerationRecord } from '../domain/types.js';
import { ExpiringReads } from '../lifecycle/expiring-reads.js';
import type { Principal } from '../ports/api-keys.js';
import type { ListCursor } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Generations } from '../use-cases/generations.js';
import { OpenAiJobs, type JobRequest } from './jobs.js';
import { badField } from './mapping.js';
import { generationIdOf, videoObject, type VideoObject } from './shapes.js';

const CONTROL = ['model', 'user'] as const;
const NOT_FOUND = 'Video not found.';

/** A page of `GET /videos`. */
export interface VideoPage {
  object: 'list';
  data: VideoObject[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/**
 * `/videos`: a video generation started at once and read, listed, downloaded and deleted as OpenAI's video object.
 * Every video generation of the user is a video here (`video_<generationId>`), whichever API created it.
 */
@injectable()
export class OpenAiVideos {
  constructor(
    @inject(OpenAiJobs) private readonly jobs: OpenAiJobs,
    @inject(Generations) private readonly generations: Generations,
    @inject(ExpiringReads) private readonly store: ExpiringReads,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
  ) {}

  /** Starts the video; its object as it is now (queued). */
  async create(key: Principal, request: JobRequest): Promise<VideoObject> {
    const model = this.jobs.model(key, request.fields.model, 'video');
    const [id] = await this.jobs.start(key, model, request, CONTROL);
    return this.objectOf(await this.jobs.record(key.userId, id!));
  }

  /** The caller's video; with `waitSeconds`, once its status or progress changes (a long-poll), or after them. */
  async get(userId: string, videoId: string, waitSeconds = 0): Promise<VideoObject> {
    let rec = await this.video(userId, videoId);
    if (waitSeconds > 0 && !isTerminal(rec.status)) rec = await this.jobs.next(userId, rec.id, waitSeconds);
    return this.objectOf(rec);
  }

  /** The user's videos, newest first; `after` is the last id of the previous page. */
  async list(userId: string, query: { after?: string; limit?: number; order?: string }): Promise<VideoPage> {
    const limit = query.limit ?? 20;
    if (query.order !== undefined && query.order !== 'desc') throw badField('order', 'only "desc" (newest first) is served', 'invalid_option');
    let before: ListCursor | undefined;
    if (query.after !== undefined) {
      const after = await this.video(userId, query.after).catch(() => {
        throw badField('after', 'must be the id of one of your videos');
      });
      before = { createdAt: after.createdAt, id: after.id };
    }
    // Each video model's newest, merged: one read per video model, never a scan of other generations.
    const pages = await Promise.all(
      [...(this.options.openai?.videoModels ?? [])].map((modelId) => this.store.list(userId, { limit: limit + 1, modelId, ...(before ? { before } : {}) })),
    );
    const rows = pages.flat().sort((a, b) => b.createdAt - a.createdAt || (b.id < a.id ? -1 : b.id > a.id ? 1 : 0));
    const data = rows.slice(0, limit).map((r) => this.objectOf(r));
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: rows.length > limit };
  }

  /** Deletes the video (a running one is cancelled first, as `DELETE /v1/generations/{id}` does). */
  async delete(userId: string, videoId: string): Promise<{ id: string; object: 'video.deleted'; deleted: true }> {
    const rec = await this.video(userId, videoId);
    await this.generations.delete(userId, rec.id);
    return { id: videoId, object: 'video.deleted', deleted: true };
  }

  /** The blob key of a video's `video` (its result) or `thumbnail` (its latest preview); 404 while there is none. */
  async content(userId: string, videoId: string, variant: string): Promise<{ rec: GenerationRecord; key: string }> {
    const rec = await this.video(userId, videoId);
    if (variant === 'video') {
      if (rec.status !== 'completed' || rec.resultKey === undefined) throw new DomainError('not_found', `The video is ${rec.status === 'failed' ? 'failed' : 'not ready yet'}; its content is not available.`);
      return { rec, key: rec.resultKey };
    }
    if (variant === 'thumbnail') {
      const last = (await this.jobs.previews(rec)).pop();
      if (!last) throw new DomainError('not_found', 'This video has no thumbnail: its model emitted no preview.');
      return { rec, key: last.key };
    }
    throw badField('variant', 'must be "video" or "thumbnail"', 'invalid_option');
  }

  /** The caller's video generation; 404 for another user's, a missing one, or a generation that is no video. */
  private async video(userId: string, videoId: string): Promise<GenerationRecord> {
    const id = generationIdOf(videoId);
    if (id === undefined) throw new DomainError('not_found', NOT_FOUND);
    const rec = await this.jobs.record(userId, id, NOT_FOUND);
    if (!this.options.openai?.videoModels.has(rec.modelId)) throw new DomainError('not_found', NOT_FOUND);
    return rec;
  }

  private objectOf(rec: GenerationRecord): VideoObject {
    return videoObject(rec, this.generations.getModel(rec.modelId), expiresAt(rec, this.options.retention.finishedTtlMs));
  }
}
