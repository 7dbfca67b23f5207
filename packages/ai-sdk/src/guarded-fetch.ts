import { guardedRequest, traceHeaders, type GuardedRequestOptions } from '@genservice/core/ports';

/** Options of {@link createGuardedFetch}: the outbound guard's address policy and limits, per request. */
export interface GuardedFetchOptions
  extends Pick<GuardedRequestOptions, 'allowPrivateNetworks' | 'trustedHosts' | 'httpsOnly' | 'lookup' | 'maxRedirects'> {
  /** Largest answer body, in bytes (an API answer or a downloaded result). Default 200 MiB. */
  maxBytes?: number;
  /** Time for one request, redirects included. Default 10 minutes (the generation's own timeout still applies). */
  timeoutMs?: number;
}

const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * A `fetch` that makes every request through core's outbound guard, for the provider packages that download results
 * themselves (`@ai-sdk/fal` and `@ai-sdk/replicate` image models fetch the image URL their API answers with):
 * `createFal({ fetch: createGuardedFetch() })`. Each request then resolves and checks the host (no loopback,
 * private or link-local address unless allowed), re-checks every redirect, and is bounded in size and time. Answers
 * are buffered (no streaming), which suits `doGenerate`. A refused request rejects with core's `OutboundError`, which
 * the bridge turns into a ProviderError (retryable only when the guard says so).
 *
 * @example
 * const fal = createFal({ apiKey: process.env.FAL_KEY, fetch: createGuardedFetch({ maxBytes: 50_000_000 }) });
 */
export function createGuardedFetch(options: GuardedFetchOptions = {}): typeof globalThis.fetch {
  const limits = { maxBytes: 200 * 1024 * 1024, timeoutMs: 600_000, ...options };
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    // The provider call's span (with an OpenTelemetry SDK): the model's API continues the generation's trace (the host's
    // propagator's fields: traceparent, tracestate, ...), unless the request set them itself.
    for (const [name, value] of Object.entries(traceHeaders())) headers[name] ??= value;
    const body = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer());
    const answer = await guardedRequest(request.url, {
      ...limits,
      method: request.method,
      headers,
      ...(body !== undefined ? { body } : {}),
      signal: request.signal,
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
    }
    const response = new Response(NULL_BODY.has(answer.status) ? null : (answer.bytes as Uint8Array<ArrayBuffer>), { status: answer.status, headers: responseHeaders });
    Object.defineProperty(response, 'url', { value: answer.url });
    return response;
  };
}
