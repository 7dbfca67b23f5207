/**
 * The MCP server's one way into genservice: requests to the service's own framework-neutral HTTP entry point,
 * `service.handle()`, carrying the user's key. Every rule of the API (scopes, allow-lists, budgets, 402 and 429,
 * ownership, idempotency, metrics, webhooks) therefore applies to MCP calls exactly as to API calls, decided once, in core.
 */
import type { BaseUrl, GenerationService, HttpRequest, HttpResponse } from '@genservice/core';

/** One entry of an API error's `details`. */
export interface ApiErrorDetail {
  field: string;
  code: string;
  message: string;
}

/** An error answer of the API: its status, `error.code`, `error.message`, `details`, and `Retry-After` when sent. */
export interface ApiError {
  status: number;
  code: string;
  message: string;
  details?: ApiErrorDetail[];
  /** Seconds, from the `Retry-After` header (429, 503). */
  retryAfterSeconds?: number;
}

export type ApiResult<T> = { ok: true; status: number; value: T } | { ok: false; error: ApiError };

/** What every request of one MCP exchange carries to the API. */
export interface ApiIdentity {
  /** The client's `Authorization` header, as it came. */
  authorization: string | undefined;
  /** Passed through for tracing: `traceparent`, `tracestate`. */
  trace: Record<string, string>;
  baseUrl?: BaseUrl;
  remoteAddress?: string;
}

/** Whether a response body is a live stream (an event stream, a streamed file). */
export function isStream(body: HttpResponse['body']): body is AsyncIterable<string | Uint8Array> {
  return typeof body === 'object' && body !== null && Symbol.asyncIterator in body;
}

/** Stops a streamed body that will not be read (releases what the service holds for it). */
export async function discard(body: HttpResponse['body']): Promise<void> {
  if (isStream(body)) await body[Symbol.asyncIterator]().return?.();
}

/** A whole body as bytes (a stream is read to its end). */
export async function bodyBytes(body: HttpResponse['body']): Promise<Uint8Array> {
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk);
  return Buffer.concat(chunks);
}

function parseError(status: number, headers: Record<string, string>, text: string): ApiError {
  let code = 'error';
  let message = `The API answered ${status}.`;
  let details: ApiErrorDetail[] | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
    if (typeof parsed.error?.code === 'string') code = parsed.error.code;
    if (typeof parsed.error?.message === 'string') message = parsed.error.message;
    if (Array.isArray(parsed.error?.details)) details = parsed.error.details as ApiErrorDetail[];
  } catch {
    // Not JSON: keep the generic sentence.
  }
  const retry = Number(headers['retry-after']);
  return { status, code, message, ...(details ? { details } : {}), ...(Number.isFinite(retry) && retry >= 0 ? { retryAfterSeconds: retry } : {}) };
}

/** A client of `service.handle()` for one user's key. */
export class Api {
  constructor(
    private readonly service: GenerationService,
    private readonly identity: ApiIdentity,
  ) {}

  /** The raw answer of one request (the caller reads or discards its body). */
  send(method: string, path: string, init: { json?: unknown; headers?: Record<string, string> } = {}): Promise<HttpResponse> {
    const headers: Record<string, string> = { ...this.identity.trace, ...init.headers };
    if (this.identity.authorization !== undefined) headers.authorization = this.identity.authorization;
    const request: HttpRequest = { method, path, headers };
    if (init.json !== undefined) {
      request.body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    }
    if (this.identity.baseUrl !== undefined) request.baseUrl = this.identity.baseUrl;
    if (this.identity.remoteAddress !== undefined) request.remoteAddress = this.identity.remoteAddress;
    return this.service.handle(request);
  }

  /** A JSON request: the parsed value of a 2xx answer, or the API's error. */
  async json<T>(method: string, path: string, init: { json?: unknown; headers?: Record<string, string> } = {}): Promise<ApiResult<T>> {
    const res = await this.send(method, path, init);
    const text = new TextDecoder().decode(await bodyBytes(res.body));
    if (res.status < 200 || res.status >= 300) return { ok: false, error: parseError(res.status, res.headers, text) };
    return { ok: true, status: res.status, value: (text === '' ? undefined : JSON.parse(text)) as T };
  }

  /** The error of a non-2xx raw answer (its body read). */
  static async errorOf(res: HttpResponse): Promise<ApiError> {
    return parseError(res.status, res.headers, new TextDecoder().decode(await bodyBytes(res.body)));
  }
}
