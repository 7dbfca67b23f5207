import { lookup as dnsLookup } from 'node:dns/promises';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { blockedAddressReason } from './ip.js';

export interface ResolvedAddress {
  address: string;
  /** 4 or 6. */
  family: number;
}

/** The checks every outbound request gets (media inputs, provider result URLs, webhook deliveries). */
export interface OutboundCheckOptions {
  /** Allow loopback, private, link-local and other non-public addresses. Default false: only for trusted setups. */
  allowPrivateNetworks?: boolean;
  /**
   * Host names (exact, case-insensitive) exempt from the address check, e.g. a media server of your own on a private
   * network. Everything else (scheme, size and time limits, redirect re-checks) still applies to them.
   */
  trustedHosts?: readonly string[];
  /** Refuse plain `http:` URLs (webhooks). Default false. */
  httpsOnly?: boolean;
  /** Resolves a host name to all of its addresses. Default: `dns.lookup` with `all: true`. Injectable for tests. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
  /** Aborts the check; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface FetchMediaOptions {
  /** Allow loopback, private, link-local and other non-public addresses. Default false: only for trusted setups. */
  allowPrivateNetworks?: boolean;
  /**
   * Host names (exact, case-insensitive) exempt from the address check, e.g. a media server of your own on a private
   * network. Everything else (scheme, size and time limits, redirect re-checks) still applies to them.
   */
  trustedHosts?: readonly string[];
  /** Largest body accepted, in bytes. Default 10 MiB. */
  maxBytes?: number;
  /** Time for the whole fetch, redirects included. Default 10 s. */
  timeoutMs?: number;
  /** Redirects followed (each one re-checked). Default 3. */
  maxRedirects?: number;
  /** Aborts the fetch; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Resolves a host name to all of its addresses. Default: `dns.lookup` with `all: true`. Injectable for tests. */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
  /** Sent as User-Agent. */
  userAgent?: string;
}

export interface FetchedMedia {
  bytes: Uint8Array;
  /** The Content-Type the server sent, if any; it is the server's claim, not a checked fact. */
  contentType?: string;
  /** The URL the bytes came from, after redirects. */
  url: string;
}

export type OutboundErrorCode =
  | 'invalid_url'
  | 'blocked_address'
  | 'dns_failure'
  | 'too_many_redirects'
  | 'http_status'
  | 'too_large'
  | 'timeout'
  | 'network';

/**
 * Why an outbound request could not be made or was refused. `retryable` is true only for failures a later attempt may
 * not see. The message names the URL without its credentials, query or fragment.
 */
export class OutboundError extends Error {
  override readonly name: string = 'OutboundError';
  readonly code: OutboundErrorCode;
  readonly retryable: boolean;

  constructor(code: OutboundErrorCode, message: string, options: { retryable?: boolean; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** The name media fetching has always used for it. */
export const MediaFetchError = OutboundError;
export type MediaFetchError = OutboundError;
export type MediaFetchErrorCode = OutboundErrorCode;

export const FETCH_DEFAULTS = { maxBytes: 10 * 1024 * 1024, timeoutMs: 10_000, maxRedirects: 3 } as const;

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The URL without credentials, query or fragment, which may carry secrets and do not belong in logs. */
function describe(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** A URL as words for a message or a log line: without credentials, query or fragment (core's webhook logs use it too). */
export function safeLabel(raw: string): string {
  try {
    return describe(new URL(raw));
  } catch {
    return JSON.stringify(raw.slice(0, 200));
  }
}

function parseMediaUrl(raw: string, base?: URL, httpsOnly = false): URL {
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw new OutboundError('invalid_url', `not a valid URL: ${JSON.stringify(raw.slice(0, 200))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundError('invalid_url', `only http and https URLs are fetched, not ${url.protocol} (${JSON.stringify(raw.slice(0, 200))})`);
  }
  if (httpsOnly && url.protocol !== 'https:') {
    throw new OutboundError('invalid_url', `only https URLs are allowed here (${describe(url)})`);
  }
  if (url.username || url.password) {
    throw new OutboundError('invalid_url', `URLs with credentials are not fetched (${describe(url)})`);
  }
  return url;
}

/** The host without IPv6 brackets or a trailing dot, lower-cased (the URL parser already turned 0x7f000001 into 127.0.0.1). */
function hostOf(url: URL): string {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return host.replace(/\.$/, '').toLowerCase();
}

async function defaultLookup(hostname: string): Promise<ResolvedAddress[]> {
  return dnsLookup(hostname, { all: true, verbatim: true });
}

/** Rejects with the signal's reason when it fires, so a slow DNS lookup cannot outlive the fetch's time limit. */
function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * The one refusal for a host name, whether it resolves to a refused address or not at all: telling them apart would
 * let anyone probe what the service's resolver sees (internal names, metadata hosts) through a create or a quote.
 */
function hostNotAllowed(url: URL): string {
  return `refusing to fetch ${describe(url)}: the URL is not allowed (its host must resolve to public addresses only)`;
}

/**
 * Resolves the URL's host and checks every address it resolves to: one public address among private ones is not
 * enough, since the connection could go to any of them. Returns the address to connect to.
 */
async function checkedAddress(url: URL, options: OutboundCheckOptions, signal: AbortSignal): Promise<ResolvedAddress> {
  const host = hostOf(url);
  let addresses: ResolvedAddress[];
  const literal = isIP(host);
  if (literal !== 0) {
    addresses = [{ address: host, family: literal }];
  } else {
    try {
      addresses = await raceSignal((options.lookup ?? defaultLookup)(host), signal);
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw new OutboundError('dns_failure', hostNotAllowed(url), { cause: error });
    }
    if (addresses.length === 0) throw new OutboundError('dns_failure', hostNotAllowed(url), { cause: new Error(`${host} has no addresses`) });
  }
  const trusted = (options.trustedHosts ?? []).some((h) => h.toLowerCase().replace(/\.$/, '') === host);
  if (!options.allowPrivateNetworks && !trusted) {
    for (const { address } of addresses) {
      const reason = blockedAddressReason(address);
      if (reason !== null) {
        // A literal address says nothing the caller did not write; for a name, what it resolves to stays in the cause
        // (for logs), since the message reaches the caller.
        if (literal !== 0) throw new OutboundError('blocked_address', `refusing to fetch ${describe(url)}: it points to ${reason}`);
        throw new OutboundError('blocked_address', hostNotAllowed(url), { cause: new Error(`${host} resolves to ${address}: ${reason}`) });
      }
    }
  }
  return addresses[0];
}

/** A `lookup` for http.request that always answers with the address already checked, so DNS cannot change it. */
function pinnedLookup(target: ResolvedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  }) as unknown as LookupFunction;
}

interface RequestParts {
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

function request(url: URL, target: ResolvedAddress, parts: RequestParts, signal: AbortSignal): Promise<IncomingMessage> {
  const transport = url.protocol === 'https:' ? https : http;
  const host = hostOf(url);
  return new Promise<IncomingMessage>((resolve, reject) => {
    const req = transport.request(
      {
        protocol: url.protocol,
        hostname: host,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: parts.method,
        headers: { 'accept-encoding': 'identity', ...parts.headers },
        lookup: pinnedLookup(target),
        // Never reuse a pooled connection: it may lead to an address that was not checked for this request.
        agent: false,
        signal,
        ...(url.protocol === 'https:' && isIP(host) === 0 ? { servername: host } : {}),
      },
      resolve,
    );
    req.on('error', reject);
    req.end(parts.body);
  });
}

function readBody(response: IncomingMessage, url: URL, maxBytes: number, truncate: boolean): Promise<Uint8Array> {
  return new Promise<Uint8Array>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    const fail = (error: unknown): void => {
      if (done) return;
      done = true;
      response.destroy();
      reject(error);
    };
    response.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > maxBytes) {
        if (truncate) {
          chunks.push(chunk.subarray(0, chunk.length - (total - maxBytes)));
          done = true;
          response.destroy();
          resolve(new Uint8Array(Buffer.concat(chunks)));
          return;
        }
        fail(new OutboundError('too_large', `${describe(url)} is larger than the limit of ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    response.on('end', () => {
      if (done) return;
      done = true;
      resolve(new Uint8Array(Buffer.concat(chunks)));
    });
    response.on('error', fail);
    response.on('close', () => {
      if (!response.complete) fail(new OutboundError('network', `connection closed before all of ${describe(url)} arrived`, { retryable: true }));
    });
  });
}

export interface GuardedRequestOptions extends OutboundCheckOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Largest answer body kept, in bytes. A larger one fails (`too_large`), or is cut when `truncate` is set. Default 10 MiB. */
  maxBytes?: number;
  /** Keep the first `maxBytes` of a larger answer instead of failing (webhook answers are only glanced at). */
  truncate?: boolean;
  /** Time for the whole request, redirects included. Default 10 s. */
  timeoutMs?: number;
  /** Redirects followed (each one checked again). 0: a 3xx is the answer (webhooks). Default 3. */
  maxRedirects?: number;
}

export interface GuardedResponse {
  status: number;
  headers: IncomingMessage['headers'];
  bytes: Uint8Array;
  /** The URL that answered, after redirects. */
  url: string;
}

/**
 * Makes one outbound HTTP request with SSRF protections: http(s) only (https only when asked); every address the host
 * resolves to must be public (unless allowed); the connection goes to that checked address (no second DNS lookup to
 * rebind); redirects are followed by hand and each hop is checked again (or not followed at all); the answer is
 * bounded while it streams; the whole request has a time limit. Any HTTP status is an answer; failures to get one
 * reject with OutboundError, never an unhandled error.
 */
export async function guardedRequest(url: string, options: GuardedRequestOptions = {}): Promise<GuardedResponse> {
  const maxBytes = options.maxBytes ?? FETCH_DEFAULTS.maxBytes;
  const timeoutMs = options.timeoutMs ?? FETCH_DEFAULTS.timeoutMs;
  const maxRedirects = options.maxRedirects ?? FETCH_DEFAULTS.maxRedirects;
  const outer = options.signal;
  if (outer?.aborted) throw outer.reason;

  const label = safeLabel(url);
  const controller = new AbortController();
  const timeoutError = new OutboundError('timeout', `${label} took longer than ${timeoutMs} ms`, { retryable: true });
  const timer = setTimeout(() => controller.abort(timeoutError), timeoutMs);
  const onOuterAbort = (): void => controller.abort(outer?.reason);
  outer?.addEventListener('abort', onOuterAbort, { once: true });
  const signal = controller.signal;
  let parts: RequestParts = { method: options.method ?? 'GET', headers: options.headers ?? {}, ...(options.body !== undefined ? { body: options.body } : {}) };

  try {
    let current = parseMediaUrl(url, undefined, options.httpsOnly);
    for (let hop = 0; ; hop++) {
      const target = await checkedAddress(current, options, signal);
      const response = await request(current, target, parts, signal);
      const status = response.statusCode ?? 0;
      if (REDIRECTS.has(status) && maxRedirects > 0) {
        response.destroy();
        const location = response.headers.location;
        if (!location) throw new OutboundError('http_status', `${describe(current)} redirected (${status}) without a Location`);
        if (hop >= maxRedirects) throw new OutboundError('too_many_redirects', `more than ${maxRedirects} redirects starting at ${label}`);
        current = parseMediaUrl(location, current, options.httpsOnly);
        // 303 (and, as browsers do, 301/302 after a POST) continue as a GET without the body.
        if (status === 303 || ((status === 301 || status === 302) && parts.method === 'POST')) parts = { method: 'GET', headers: parts.headers };
        continue;
      }
      const declared = Number(response.headers['content-length']);
      if (!options.truncate && Number.isFinite(declared) && declared > maxBytes) {
        response.destroy();
        throw new OutboundError('too_large', `${describe(current)} is ${declared} bytes, over the limit of ${maxBytes}`);
      }
      const bytes = await readBody(response, current, maxBytes, options.truncate === true);
      return { status, headers: response.headers, bytes, url: current.toString() };
    }
  } catch (error) {
    if (outer?.aborted) throw outer.reason;
    if (signal.aborted) throw timeoutError;
    if (error instanceof OutboundError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new OutboundError('network', `could not reach ${label}: ${code ?? (error as Error).message}`, {
      retryable: code === 'ECONNRESET' || code === 'ETIMEDOUT' || code === 'EPIPE' || code === 'ECONNREFUSED',
      cause: error,
    });
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuterAbort);
  }
}

/**
 * Checks a URL as a request to it would be checked (scheme, credentials, every resolved address), without making the
 * request: what a webhook URL gets at create. Rejects with OutboundError.
 */
export async function checkOutboundUrl(url: string, options: OutboundCheckOptions = {}): Promise<void> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new OutboundError('dns_failure', `resolving ${safeLabel(url)} took too long`)), 5000);
  const onOuter = (): void => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onOuter, { once: true });
  try {
    await checkedAddress(parseMediaUrl(url, undefined, options.httpsOnly), options, controller.signal);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onOuter);
  }
}

/**
 * Fetches a user-supplied media URL through the guard (see guardedRequest): a non-2xx answer is an error
 * (`http_status`, retryable for 429 and 5xx).
 *
 * @example
 * const { bytes, contentType } = await fetchMedia('https://example.com/cat.png', { maxBytes: 5_000_000 });
 */
export async function fetchMedia(url: string, options: FetchMediaOptions = {}): Promise<FetchedMedia> {
  const res = await guardedRequest(url, {
    ...options,
    method: 'GET',
    headers: { 'user-agent': options.userAgent ?? 'genservice', accept: 'image/*, video/*, audio/*, */*;q=0.5' },
  });
  if (res.status < 200 || res.status > 299) {
    throw new OutboundError('http_status', `${safeLabel(res.url)} answered HTTP ${res.status}`, { retryable: res.status >= 500 || res.status === 429 });
  }
  const contentType = res.headers['content-type'];
  return { bytes: res.bytes, url: res.url, ...(contentType ? { contentType } : {}) };
}
