import type { GenerationRecord } from '../domain/types.js';
import type { ModelDefinition } from '../ports/provider.js';
import { settingValue } from './mapping.js';

/** OpenAI's shapes of the service's records: models, videos, images' `usage` and formats. */

/** Seconds since the epoch, as OpenAI's timestamps are. */
export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** `GET /models`' item. */
export function modelObject(model: ModelDefinition): { id: string; object: 'model'; created: number; owned_by: string } {
  return { id: model.modelId, object: 'model', created: 0, owned_by: 'genservice' };
}

/** A generation's id as a video's (`video_<generationId>`), and back (undefined: not a video id). */
export function videoId(generationId: string): string {
  return `video_${generationId}`;
}
export function generationIdOf(videoId: string): string | undefined {
  return videoId.startsWith('video_') ? videoId.slice('video_'.length) : undefined;
}

const VIDEO_STATUS = { pending: 'queued', processing: 'in_progress', completed: 'completed', failed: 'failed' } as const;

export interface VideoObject {
  id: string;
  object: 'video';
  status: (typeof VIDEO_STATUS)[keyof typeof VIDEO_STATUS];
  progress: number;
  created_at: number;
  completed_at: number | null;
  expires_at: number | null;
  model: string;
  prompt: string | null;
  seconds: string | null;
  size: string | null;
  remixed_from_video_id: null;
  error: { code: string; message: string } | null;
}

/** A video generation as OpenAI's video object; `expiresAt` is when it (and its files) is deleted, if ever. */
export function videoObject(rec: GenerationRecord, model: ModelDefinition | undefined, expiresAt: number | undefined): VideoObject {
  const prompt = model === undefined ? undefined : rec.settings[model.openai?.params?.prompt ?? 'prompt'];
  return {
    id: videoId(rec.id),
    object: 'video',
    status: VIDEO_STATUS[rec.status],
    progress: rec.status === 'completed' ? 100 : rec.status === 'processing' ? Math.round((rec.progress?.fraction ?? 0) * 100) : 0,
    created_at: unixSeconds(rec.createdAt),
    completed_at: rec.status === 'completed' && rec.finishedAt !== undefined ? unixSeconds(rec.finishedAt) : null,
    expires_at: expiresAt === undefined ? null : unixSeconds(expiresAt),
    model: rec.modelId,
    prompt: typeof prompt === 'string' ? prompt : null,
    seconds: settingValue(model, rec.settings, 'seconds'),
    size: settingValue(model, rec.settings, 'size'),
    remixed_from_video_id: null,
    error: rec.status === 'failed' ? { code: rec.error?.code ?? 'provider_error', message: rec.error?.message ?? 'The generation failed.' } : null,
  };
}

/** OpenAI's `usage` of images: the tokens charged, as output tokens (the service charges per generation, not per input). */
export function usageOf(price: number): {
  input_tokens: number;
  input_tokens_details: { image_tokens: number; text_tokens: number };
  output_tokens: number;
  total_tokens: number;
} {
  return { input_tokens: 0, input_tokens_details: { image_tokens: 0, text_tokens: 0 }, output_tokens: price, total_tokens: price };
}

/** `output_format` of an image type (`png`, `jpeg`, `webp`), or the subtype itself. */
export function formatOf(mimeType: string): string {
  const sub = mimeType.split(';')[0]!.trim().toLowerCase().replace(/^image\//, '');
  return sub === 'jpg' ? 'jpeg' : sub;
}
