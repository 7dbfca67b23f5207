import { fetchMedia, OutboundError, ProviderError, type FetchMediaOptions, type GenerationContext, type GenerationOutput } from '@genservice/core';

/** How a ready provider talks to its upstream API. */
export interface UpstreamOptions {
  /** The API's origin and base path, without a trailing slash. */
  baseUrl: string;
  /** Headers on every call (the credential). */
  headers: Record<string, string>;
  /** Time for one API call. Default 30 s. */
  timeoutMs: number;
  /** The fetch to use (default: the global one). */
  fetch: typeof fetch;
  /** The upstream's name in messages ("Replicate", "fal"). */
  name: string;
}

/**
 * Limits for downloading a result file from the URL the upstream gave (through core's outbound guard: every address
 * checked, redirects re-checked, size and time bounded). Provider URLs expire, so results are stored at once.
 */
export type ResultFetchOptions = Omit<FetchMediaOptions, 'signal'>;

/** Default result download limits: 100 MiB in 120 s. */
export const RESULT_FETCH_DEFAULTS = { maxBytes: 100 * 1024 * 1024, timeoutMs: 120_000 } as const;

/** The upstream settings every ready provider builds from its options the same way. */
export function upstreamOf(
  name: string,
  options: { baseUrl?: string; requestTimeoutMs?: number; fetch?: typeof fetch },
  defaultBaseUrl: string,
  authorization: string,
): UpstreamOptions {
  return {
    baseUrl: (options.baseUrl ?? defaultBaseUrl).replace(/\/+$/, ''),
    headers: { authorization },
    timeoutMs: options.requestTimeoutMs ?? 30_000,
    fetch: options.fetch ?? fetch,
    name,
  };
}

function truncate(text: string, max = 300): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/** The upstream's own explanation in an error body (`detail`, `error`, `message`), never the request's headers. */
function explain(body: unknown): string {
  if (typeof body === 'string') return truncate(body);
  if (body && typeof body === 'object') {
    const o = body as Record<string, unknown>;
    for (const key of ['detail', 'error', 'message', 'title']) {
      const v = o[key];
      if (typeof v === 'string') return truncate(v);
      if (v && typeof v === 'object') return truncate(JSON.stringify(v));
    }
  }
  return '';
}

/**
 * One JSON call to the upstream API. 429, 5xx, timeouts and network errors are retryable ProviderErrors; other
 * statuses are not. Messages name the status and the upstream's explanation, never the credential.
 */
export async function callUpstream(
  upstream: UpstreamOptions,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  signal: AbortSignal | undefined,
  body?: unknown,
): Promise<unknown> {
  const url = path.startsWith('http://') || path.startsWith('https://') ? path : `${upstream.baseUrl}${path}`;
  const timeout = AbortSignal.timeout(upstream.timeoutMs);
  let res: Response;
  try {
    res = await upstream.fetch(url, {
      method,
      headers: { ...upstream.headers, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'error',
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (error) {
    if (signal?.aborted) throw signal.reason ?? error;
    throw new ProviderError(`${upstream.name}: ${method} ${path} failed: ${(error as Error).message}`, {
      retryable: true,
      publicMessage: `${upstream.name} could not be reached.`,
      cause: error,
    });
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON: keep the text for the message.
  }
  if (res.ok) return parsed;
  const retryable = res.status === 429 || res.status >= 500;
  const detail = explain(parsed);
  throw new ProviderError(`${upstream.name}: ${method} ${path} answered ${res.status}${detail ? `: ${detail}` : ''}`, {
    retryable,
    publicMessage:
      res.status === 401 || res.status === 403
        ? `${upstream.name} refused the credentials of this service.`
        : `${upstream.name} answered ${res.status}${detail ? `: ${detail}` : ''}.`,
  });
}

/** Downloads a result file through the outbound guard and returns it as the generation's output. */
export async function downloadResult(
  url: string,
  ctx: GenerationContext,
  options: ResultFetchOptions,
  upstreamName: string,
  fallbackMimeType: string,
): Promise<GenerationOutput> {
  try {
    const media = await fetchMedia(url, { ...RESULT_FETCH_DEFAULTS, ...options, signal: ctx.signal });
    const mimeType = media.contentType?.split(';')[0]?.trim() || fallbackMimeType;
    return { bytes: media.bytes, mimeType };
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    if (error instanceof OutboundError) {
      throw new ProviderError(`${upstreamName}: the result ${url} could not be downloaded: ${error.message}`, {
        retryable: error.retryable,
        publicMessage: `The result file from ${upstreamName} could not be downloaded (${error.code}).`,
        cause: error,
      });
    }
    throw error;
  }
}

/** The MIME type to assume for a result file whose server sends none. */
export function defaultMimeType(resultType: string): string {
  switch (resultType) {
    case 'image':
      return 'image/png';
    case 'video':
      return 'video/mp4';
    case 'audio':
      return 'audio/mpeg';
    case '3d':
      return 'model/gltf-binary';
    default:
      return 'application/octet-stream';
  }
}

/** The last "NN%" in a log, as a fraction (Replicate and fal models print tqdm-style progress bars). */
export function progressFromLogs(logs: unknown): number | undefined {
  const text = typeof logs === 'string' ? logs : Array.isArray(logs) ? logs.map((l) => (typeof l === 'string' ? l : (l as { message?: string })?.message ?? '')).join('\n') : '';
  const matches = text.match(/(\d{1,3})%/g);
  if (!matches) return undefined;
  const last = Number(matches[matches.length - 1]!.slice(0, -1));
  return last >= 0 && last <= 100 ? last / 100 : undefined;
}

export function requireString(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`${what} must be a non-empty string`);
  return value;
}
