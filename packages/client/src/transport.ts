import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { linkSignals, throwIfAborted, timeoutSignal } from './abort.js';
import { ConnectionError, GenServiceError, errorFromResponse } from './errors.js';
import { retryDelay, retryPolicy, type RetryOptions, type RetryPolicy } from './retry.js';
import type { ErrorDetail } from './types.js';

/** Kept by hand: importing package.json would pull it into the browser bundle for one string. */
export const CLIENT_VERSION = '0.1.0';

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface TransportOptions {
  baseUrl: string;
  /** Default: the `GENSERVICE_API_KEY` environment variable (where there is a `process`: Node, Bun, Deno). */
  apiKey?: string;
  fetch?: FetchLike;
  userAgent?: string;
  requestTimeoutMs?: number;
  retry?: RetryOptions | false;
}

export interface RequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as it is, with its Content-Type (an upload), instead of `body`. */
  raw?: { data: Blob | Uint8Array | ArrayBuffer; contentType: string };
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * False: one try, whatever the retry policy (for a caller with a retry loop of its own). Otherwise a GET, or a POST
   * with an Idempotency-Key, is tried again by the client's retry policy.
   */
  retry?: boolean;
}

/** The environment's `GENSERVICE_API_KEY`, read only where a `process` exists (never in a browser bundle). */
function apiKeyFromEnvironment(): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const key = env?.GENSERVICE_API_KEY;
  return typeof key === 'string' && key !== '' ? key : undefined;
}

/** Marks an abort caused by the per-request timer, so it can be told apart from the caller's own abort. */
class RequestTimeout extends Error {
  override readonly name = 'RequestTimeout' as const;
}

function isNodeLike(): boolean {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof proc?.versions?.node === 'string';
}

/** Sends one request, returns the parsed JSON of a 2xx, throws a typed error otherwise. Never retries. */
export class Transport {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: FetchLike;
  private readonly requestTimeoutMs: number;
  private readonly retry: RetryPolicy;

  constructor(options: TransportOptions) {
    if (!options.baseUrl) throw new TypeError('createClient: baseUrl is required');
    const apiKey = options.apiKey === undefined ? apiKeyFromEnvironment() : options.apiKey;
    if (!apiKey) throw new TypeError('createClient: apiKey is required (pass it, or set GENSERVICE_API_KEY in the environment)');
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.retry = retryPolicy(options.retry);
    // Looked up on each call, not captured: tests and polyfills may install fetch later, and an unbound
    // window.fetch throws "Illegal invocation" in browsers.
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.headers = { authorization: `Bearer ${apiKey}`, accept: 'application/json' };
    // Browsers: a custom User-Agent is a non-safelisted header and would fail CORS preflight on hosts that do
    // not list it, so it is only sent there when the caller asks for it.
    const userAgent = options.userAgent ?? (isNodeLike() ? `genservice-client/${CLIENT_VERSION}` : undefined);
    if (userAgent) this.headers['user-agent'] = userAgent;
  }

  /**
   * GET a stream: the response when it is one (2xx text/event-stream), null when the service has none.
   * `lastEventId` resumes after that event (the server replays what came after it).
   */
  async open(path: string, signal: AbortSignal, lastEventId?: string): Promise<Response | null> {
    try {
      const headers: Record<string, string> = { ...this.headers, accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await this.fetchImpl(`${this.baseUrl}${path}`, { method: 'GET', headers, signal });
      if (response.ok && (response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return response;
      await response.body?.cancel().catch(() => undefined);
      return null;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      return null;
    }
  }

  /**
   * Sends the request, and again while the retry policy says so (a GET, or a POST with an Idempotency-Key: safe to
   * repeat). Returns the parsed JSON of a 2xx; throws the last error otherwise, or the caller's abort reason.
   */
  async request(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, options: RequestOptions = {}): Promise<unknown> {
    const safe = options.retry !== false && (method === 'GET' || (method === 'POST' && options.headers?.['idempotency-key'] !== undefined));
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.requestOnce(method, path, options);
      } catch (error) {
        const delay = safe && !options.signal?.aborted ? retryDelay(this.retry, attempt, error) : undefined;
        if (delay === undefined) throw this.withHint(error);
        await this.retry.sleep(delay, options.signal);
      }
    }
  }

  /**
   * A route this service does not have, asked through a `baseUrl` that ends in `/v1`: the client adds `/v1` itself,
   * so the request went to `.../v1/v1/...`. Said in the error, with the baseUrl to use.
   */
  private withHint(error: unknown): unknown {
    if (!(error instanceof GenServiceError) || error.status !== 404 || !/\/v1$/i.test(this.baseUrl)) return error;
    if (!(error.code === 'unknown' || (error.code === 'not_found' && error.message === 'No such endpoint.'))) return error;
    const hint = `${error.message} The client's baseUrl "${this.baseUrl}" ends in /v1, and the client adds /v1 to every path: give the mount point without /v1 ("${this.baseUrl.slice(0, -3)}").`;
    return errorFromResponse(hint, { status: error.status, code: error.code, details: error.details, retryAfterMs: error.retryAfterMs, requestId: error.requestId, cause: error });
  }

  private async requestOnce(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, options: RequestOptions): Promise<unknown> {
    throwIfAborted(options.signal);
    const timeout = this.requestTimeoutMs > 0 ? timeoutSignal(this.requestTimeoutMs, new RequestTimeout()) : undefined;
    const linked = linkSignals([options.signal, timeout?.signal]);
    const headers: Record<string, string> = { ...this.headers, ...options.headers };
    let body: BodyInit | undefined;
    if (options.raw !== undefined) {
      body = options.raw.data as BodyInit;
      headers['content-type'] = options.raw.contentType;
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    try {
      let response: Response;
      let text: string;
      try {
        response = await this.fetchImpl(`${this.baseUrl}${path}`, { method, headers, body, signal: linked.signal });
        // Reading the body stays under the same signal: a server can stall after the headers.
        text = await response.text();
      } catch (error) {
        // The caller's abort wins over everything, and surfaces with the caller's own reason (as fetch does).
        if (options.signal?.aborted) throw options.signal.reason;
        if (timeout?.signal.aborted) {
          throw new ConnectionError(`${method} ${path}: no response within ${this.requestTimeoutMs} ms`, {
            cause: error,
          });
        }
        throw new ConnectionError(`${method} ${path}: ${describe(error)}`, { cause: error });
      }
      if (response.ok) return parseSuccess(text, response, method, path);
      throw parseError(text, response);
    } finally {
      linked.dispose();
      timeout?.clear();
    }
  }
}

/** One message of a live event stream, its data parsed as JSON. */
export interface StreamMessage {
  /** The last event id the stream has set (SSE keeps it across messages): what `Last-Event-ID` resumes after. */
  id: string | undefined;
  event: string;
  data: unknown;
}

/**
 * Yields the messages of an opened event stream (`text/event-stream`, parsed by eventsource-parser: `id:`, multi-line
 * `data:`, CR, LF and CRLF line ends, comments). Ends when the server ends it; a broken connection rejects, as a
 * message whose data is not JSON does.
 */
export async function* readEventStream(response: Response, lastEventId?: string): AsyncGenerator<StreamMessage, void, undefined> {
  if (!response.body) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parsed: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => parsed.push(message) });
  let id = lastEventId;
  let endsWithCR = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      parser.feed(text);
      if (text !== '') endsWithCR = text.endsWith('\r');
      // The parser holds a line ended by a lone CR back in case an LF follows; at the end none will, so end it.
      if (done && endsWithCR) parser.feed('\n');
      while (parsed.length > 0) {
        const message = parsed.shift()!;
        if (message.id !== undefined) id = message.id;
        yield { id, event: message.event ?? 'message', data: JSON.parse(message.data) as unknown };
      }
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    // undici reports every network failure as "fetch failed" and hides the useful part in cause.
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}

function parseSuccess(text: string, response: Response, method: string, path: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new GenServiceError(`${method} ${path}: the response body is not JSON`, {
      status: response.status,
      code: 'invalid_response',
      requestId: requestIdOf(response),
      cause: error,
    });
  }
}

function parseError(text: string, response: Response): GenServiceError {
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
  const code = typeof error?.code === 'string' ? error.code : 'unknown';
  const message =
    typeof error?.message === 'string'
      ? error.message
      : `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
  return errorFromResponse(message, {
    status: response.status,
    code,
    details: Array.isArray(error?.details) ? error.details.flatMap(toErrorDetail) : undefined,
    retryAfterMs: parseRetryAfter(response.headers.get('retry-after')),
    requestId: requestIdOf(response),
  });
}

function requestIdOf(response: Response): string | undefined {
  return response.headers.get('x-request-id') ?? undefined;
}

/** `Retry-After` is either delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// Lenient on purpose: a detail with a missing part is still worth showing to the caller.
function toErrorDetail(value: unknown): ErrorDetail[] {
  if (!isRecord(value)) return [];
  return [
    {
      field: typeof value.field === 'string' ? value.field : '',
      code: typeof value.code === 'string' ? value.code : 'invalid',
      message: typeof value.message === 'string' ? value.message : '',
    },
  ];
}
