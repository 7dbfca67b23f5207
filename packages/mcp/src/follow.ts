/**
 * Following one generation to its end through the API: its event stream (each message a details view), reopened
 * after the last event it saw when it ends early, or polled when the API refuses a stream (429, 503).
 */
import type { GenerationItem } from '@genservice/core';
import { Api, type ApiError, discard, isStream } from './api.js';
import { sseMessages } from './sse.js';

/** A generation could not be followed: the API's error (404 for a generation that is gone or not the user's). */
export class FollowError extends Error {
  constructor(readonly error: ApiError) {
    super(error.message);
    this.name = 'FollowError';
  }
}

export function isFinished(d: Pick<GenerationItem, 'status'>): boolean {
  return d.status === 'completed' || d.status === 'failed';
}

export function generationPath(id: string, rest = ''): string {
  return `/v1/generations/${encodeURIComponent(id)}${rest}`;
}

/** Reads one generation's details view. */
export async function readDetails(api: Api, id: string): Promise<GenerationItem> {
  const res = await api.json<GenerationItem>('GET', generationPath(id, '/details'));
  if (!res.ok) throw new FollowError(res.error);
  return res.value;
}

function isDetails(value: unknown, id: string): value is GenerationItem {
  return typeof value === 'object' && value !== null && (value as GenerationItem).generationId === id && typeof (value as GenerationItem).status === 'string';
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

export interface FollowOptions {
  signal: AbortSignal;
  /** Each state seen before the end (the first one included). */
  onUpdate?: (details: GenerationItem) => void | Promise<void>;
  /** Between two polls when the API refuses a stream. */
  pollIntervalMs: number;
}

/**
 * Resolves with the generation's terminal details view. Throws FollowError when the API refuses to read it, and the
 * signal's reason when the signal aborts (the MCP request was cancelled, or its client went away).
 */
export async function follow(api: Api, id: string, options: FollowOptions): Promise<GenerationItem> {
  const { signal } = options;
  let lastEventId: string | undefined;
  for (;;) {
    signal.throwIfAborted();
    const res = await api.send('GET', generationPath(id, '/events'), {
      headers: { accept: 'text/event-stream', ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}) },
    });
    if (res.status === 200 && isStream(res.body)) {
      for await (const message of sseMessages(res.body, signal)) {
        if (message.id !== undefined) lastEventId = message.id;
        let data: unknown;
        try {
          data = JSON.parse(message.data);
        } catch {
          continue;
        }
        if (!isDetails(data, id)) continue; // partial output (`output`, `preview`): not a state
        if (isFinished(data)) return data;
        await options.onUpdate?.(data);
      }
      signal.throwIfAborted();
      // The stream ended before the generation did (the instance is stopping): look, then reopen after the last event.
      const now = await readDetails(api, id);
      if (isFinished(now)) return now;
      continue;
    }
    if (res.status === 404 || res.status === 401 || res.status === 403) throw new FollowError(await Api.errorOf(res));
    // No stream for now (too many open, or the service is busy): poll instead.
    await discard(res.body);
    const now = await readDetails(api, id);
    if (isFinished(now)) return now;
    await options.onUpdate?.(now);
    await sleep(options.pollIntervalMs, signal);
  }
}
