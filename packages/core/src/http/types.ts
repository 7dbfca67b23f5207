/**
 * A framework-neutral request, as an adapter hands it to `service.handle()`.
 * The adapter translates only; every status, header and body is decided in core.
 */
import type { BaseUrl } from '../domain/types.js';

export type { BaseUrl };

export interface HttpRequest {
  method: string;
  /** Path below the mount point, starting with `/`, query string included (e.g. `/v1/files/k?exp=1&sig=x`). */
  path: string;
  /** Header names in lower case (as Node gives them). */
  headers: Record<string, string | string[] | undefined>;
  /** The raw body bytes, when the adapter could read them (no host body parser got there first). */
  body?: Uint8Array | string;
  /**
   * When a host body parser already consumed the stream (express.json(), @koa/bodyparser, ...): the value it
   * produced. Core still applies its own content-type and shape checks to it. Ignored when `body` is given.
   */
  parsedBody?: unknown;
  /**
   * Set by an adapter when the body could not be read: the host's own body parser rejected it (`invalid_json`,
   * `payload_too_large`), it was larger than the limit, or it did not arrive within `limits.bodyTimeoutMs`
   * (`timeout`: answered `408` and the connection closed).
   */
  bodyError?: 'invalid_json' | 'payload_too_large' | 'timeout';
  /**
   * With `bodyError: 'payload_too_large'` from a host body parser whose limit is lower than the service's: the limit
   * that parser applied, so the 413 names the limit that actually refused the body.
   */
  bodyLimitApplied?: number;
  /**
   * `protocol://host[:port]` plus the mount prefix, as seen by the framework (e.g. `http://127.0.0.1:3000/api`).
   * Used to build file URLs only when the service has no `publicUrl` and `trustRequestHost` is set.
   */
  baseUrl?: BaseUrl;
  /**
   * The client's address as the framework sees it (behind a proxy: what the host's trust-proxy setting makes of
   * X-Forwarded-For). Keys the rate limit of requests without a valid key; absent, they share one budget.
   */
  remoteAddress?: string;
}

export interface HttpResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /**
   * JSON text, or file bytes on the files route; empty string for no body. A live stream (`text/event-stream`) is an
   * async iterable of chunks: the adapter writes each as it comes, with backpressure, and calls the iterator's
   * `return()` when the client goes away, which releases everything the stream holds.
   */
  body: string | Uint8Array | AsyncIterable<string | Uint8Array>;
}
