import { fetchMedia, OutboundError, ProviderError, type FetchMediaOptions, type GenerationContext, type GenerationOutput, traceHeaders } from '@genservice/core/ports';

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
  /** The credential, cut out of every message built from what the upstream or the network said. */
  secret: string;
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
  secret: string,
): UpstreamOptions {
  const baseUrl = (options.baseUrl ?? defaultBaseUrl).replace(/\/+$/, '');
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new TypeError(`${name}: baseUrl must be an absolute http(s) URL, got ${baseUrl}`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new TypeError(`${name}: baseUrl must be an http(s) URL, got ${baseUrl}`);
  if (options.requestTimeoutMs !== undefined && !(Number.isFinite(options.requestTimeoutMs) && options.requestTimeoutMs > 0)) {
    throw new TypeError(`${name}: requestTimeoutMs must be a positive number`);
  }
  return {
    baseUrl,
    headers: { authorization },
    timeoutMs: options.requestTimeoutMs ?? 30_000,
    fetch: options.fetch ?? fetch,
    name,
    secret,
  };
}

/** `text` without the credential (an upstream that echoes a header, a proxy's error page). */
export function redact(text: string, secret: string): string {
  return secret.length >= 4 ? text.split(secret).join('[redacted]') : text;
}

/** The upstream's `error` (a string, or an object with a message), as one line for a reason. */
export function describeError(error: unknown): string {
  if (error === undefined || error === null || error === '') return 'no reason given';
  if (typeof error === 'string') return error;
  if (typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message;
  try {
    return JSON.stringify(error);
  } catch {
    return String(error);
  }
}

/** The upstream job failed for good: its reason (truncated, without the credential) is what the owner reads. */
export function upstreamFailure(upstream: UpstreamOptions, logMessage: string, reason: unknown): ProviderError {
  const text = redact(describeError(reason), upstream.secret);
  return new ProviderError(redact(`${upstream.name}: ${logMessage}: ${truncate(text, 1000)}`, upstream.secret), {
    publicMessage: `The model failed: ${truncate(text, 300)}`,
  });
}

/**
 * A status read that failed for a passing reason (429, 5xx, a timeout, the network) does not fail the generation:
 * the upstream job goes on, so the generation stays parked and is checked again later, until its time limit (which
 * cancels it upstream). Without this the runner's few quick retries would give up on a job still running (and
 * billed) upstream during a short outage.
 */
export async function readStatus<T>(read: () => Promise<T>, ctx: GenerationContext, name: string): Promise<{ value: T } | { waiting: string }> {
  try {
    return { value: await read() };
  } catch (error) {
    if (ctx.signal.aborted || !(error instanceof ProviderError) || !error.retryable) throw error;
    ctx.logger.warn({ err: error }, `${name}: status read failed; checking again later`);
    return { waiting: `${name} did not answer; checking again` };
  }
}

/** A `Retry-After` header in ms: delta-seconds, or an HTTP date (from now); undefined when absent or unreadable. */
export function retryAfterOf(header: string | null): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text), 86_400) * 1000;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, Math.min(at - Date.now(), 86_400_000)) : undefined;
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
      // FastAPI-style validation errors (fal): [{ loc: ['body', 'prompt'], msg: '...' }].
      if (Array.isArray(v) && v.length > 0 && v.every((e) => e && typeof e === 'object' && typeof e.msg === 'string')) {
        return truncate(
          v
            .map((e: { loc?: unknown; msg: string }) => {
              const loc = Array.isArray(e.loc) ? e.loc.filter((l) => l !== 'body').join('.') : '';
              return loc ? `${loc}: ${e.msg}` : e.msg;
            })
            .join('; '),
        );
      }
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
  options: { inputErrors?: boolean } = {},
): Promise<unknown> {
  const url = path.startsWith('http://') || path.startsWith('https://') ? path : `${upstream.baseUrl}${path}`;
  const timeout = AbortSignal.timeout(upstream.timeoutMs);
  let res: Response;
  // The provider call's span (with an OpenTelemetry SDK): the upstream continues the generation's trace (the host's
  // propagator's fields: traceparent, tracestate, ...).
  const trace = traceHeaders();
  try {
    res = await upstream.fetch(url, {
      method,
      headers: {
        ...upstream.headers,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...trace,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'error',
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (error) {
    if (signal?.aborted) throw signal.reason ?? error;
    throw new ProviderError(redact(`${upstream.name}: ${method} ${path} failed: ${(error as Error).message}`, upstream.secret), {
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
  // A 429's Retry-After pauses the provider's lane and the generation waits for it, spending no attempt.
  const retryAfterMs = res.status === 429 ? retryAfterOf(res.headers.get('retry-after')) : undefined;
  const detail = redact(explain(parsed), upstream.secret);
  // On a submit, 400 and 422 mean the upstream refused this input (a validation error): the settings were unusable.
  const refusedInput = options.inputErrors === true && (res.status === 400 || res.status === 422);
  throw new ProviderError(`${upstream.name}: ${method} ${path} answered ${res.status}${detail ? `: ${detail}` : ''}`, {
    retryable,
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    ...(refusedInput ? { code: 'invalid_input' as const } : {}),
    publicMessage:
      res.status === 401 || res.status === 403
        ? `${upstream.name} refused the credentials of this service.`
        : refusedInput
          ? `${upstream.name} refused the input${detail ? `: ${detail}` : '.'}`
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
