import type { Readable } from 'node:stream';

import type { HttpRequest } from '../http/types.js';

/** `null` means the body is larger than the limit; `'timeout'` that it did not arrive in time. */
export type RawBody = Buffer | null | 'timeout';

/** What an adapter hands `service.handle` about the body: the bytes, or why there are none. */
export type RequestBody = Pick<HttpRequest, 'body' | 'bodyError'>;

/** The two limits every adapter applies while reading: `service.bodyLimit` and `service.bodyTimeoutMs`. */
export interface BodyLimits {
  /** Most bytes kept in memory. */
  bytes: number;
  /** Most ms the body may take to arrive, counted from the start of the read. 0: no deadline. */
  timeoutMs: number;
}

/** The body limits of a service (what `service.bodyLimit` / `service.bodyTimeoutMs` say), `bytes` overridable. */
export function bodyLimitsOf(service: { bodyLimit: number; bodyTimeoutMs?: number }, bytes?: number): BodyLimits {
  return { bytes: bytes ?? service.bodyLimit, timeoutMs: service.bodyTimeoutMs ?? 30_000 };
}

/**
 * Reads a request body for `service.handle`: `{ body }`, or `{ bodyError }` when it was larger than `limits.bytes`
 * (`payload_too_large`) or slower than `limits.timeoutMs` (`timeout`). What every adapter calls.
 */
export async function readRequestBody(stream: Readable, limits: BodyLimits, declaredLength?: string | string[]): Promise<RequestBody> {
  return toRequestBody(await readRawBody(stream, limits.bytes, declaredLength, limits.timeoutMs));
}

/** The `service.handle` body fields for what readRawBody read. */
export function toRequestBody(raw: RawBody): RequestBody {
  if (raw === null) return { bodyError: 'payload_too_large' };
  if (raw === 'timeout') return { bodyError: 'timeout' };
  return { body: raw };
}

/**
 * Reads a request body into memory, holding at most `limit` bytes.
 *
 * Core decides what a too-large body gets (after authentication), so this only reports it. It stops buffering at
 * once; a declared Content-Length above the limit is not read at all (Node discards the unread body once the
 * response is sent). A chunked body found too large mid-stream is drained without being kept, so the answer
 * still reaches a client that is busy sending.
 *
 * Shared by every adapter (all three frameworks hand over a Node IncomingMessage), so that body limits behave
 * the same on each.
 */
export function readRawBody(stream: Readable, limit: number, declaredLength?: string | string[], timeoutMs = 0): Promise<RawBody> {
  const known = rawBodyKnown(stream, limit, declaredLength);
  if (known !== undefined) return Promise.resolve(known);
  return new Promise<RawBody>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // A client trickling its body (one byte every few seconds) is cut off at the deadline: nothing more is read, and
    // core answers 408 with Connection: close, so the socket goes with the answer.
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            cleanup();
            chunks.length = 0;
            stream.on('error', ignore);
            resolve('timeout');
          }, timeoutMs)
        : undefined;
    const cleanup = (): void => {
      if (timer) clearTimeout(timer);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('aborted', onAborted);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer | string): void => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > limit) {
        cleanup();
        chunks.length = 0;
        // Keep the stream flowing with no listener: the rest is discarded and the connection stays usable.
        stream.on('error', ignore);
        stream.resume();
        resolve(null);
        return;
      }
      chunks.push(buf);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const onAborted = (): void => onError(new Error('The client aborted the request while sending its body'));
    // A stream destroyed before its end emits neither 'end' nor always 'error': without this the read would hang.
    const onClose = (): void => onError(new Error('The request stream closed before its body ended'));
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('aborted', onAborted);
    stream.on('close', onClose);
  });
}

/**
 * What `readRawBody` answers when the headers already tell (no body, or a declared length above the limit), without
 * reading anything; undefined when the body must be read.
 */
export function rawBodyKnown(stream: Readable, limit: number, declaredLength?: string | string[]): RawBody | undefined {
  const declared = typeof declaredLength === 'string' && /^\d+$/.test(declaredLength) ? Number(declaredLength) : NaN;
  if (declared > limit) return null;
  if (stream.readableEnded) return EMPTY;
  if (declared === 0 || (Number.isNaN(declared) && hasNoBodyByHeaders(stream))) {
    // No body by the headers (every GET): nothing to wait for, so no 'end' listeners to set up.
    stream.resume();
    return EMPTY;
  }
  return undefined;
}

function ignore(): void {}

const EMPTY = Buffer.alloc(0);

/** An IncomingMessage with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3). */
function hasNoBodyByHeaders(stream: Readable): boolean {
  const headers = (stream as Readable & { headers?: Record<string, unknown> }).headers;
  return headers !== undefined && headers['content-length'] === undefined && headers['transfer-encoding'] === undefined;
}

/** What `isApiPath` and `apiRoots` read of the service: which optional surfaces it serves. */
export interface ServedSurfaces {
  readonly servesOpenAi?: boolean;
  readonly servesConsole?: boolean;
}

/** One root the service answers below its mount point; `below`: the paths under it too (else the root alone, and with a trailing slash). */
export interface ApiRoot {
  path: string;
  below: boolean;
}

const ROOTS: readonly ApiRoot[] = [
  { path: '/v1', below: true },
  { path: '/playground', below: true },
  { path: '/healthz', below: false },
  { path: '/readyz', below: false },
];
const OPENAI_ROOT: ApiRoot = { path: '/openai/v1', below: true };
const CONSOLE_ROOT: ApiRoot = { path: '/console', below: true };

/**
 * The roots the service answers below its mount point, longest first (so a router or a match against a path picks
 * `/openai/v1` before `/v1`): `/v1`, the playground page, the health checks, and `/openai/v1` and `/console` when the
 * service serves them. An adapter whose framework routes by pattern registers these (Fastify); the others ask
 * `isApiPath`. The one list of what a mount answers.
 */
export function apiRoots(service?: ServedSurfaces): readonly ApiRoot[] {
  return ROOT_LISTS[(service?.servesOpenAi === true ? 1 : 0) + (service?.servesConsole === true ? 2 : 0)]!;
}

/** The four lists (neither, OpenAI, console, both), made once: a request's check allocates nothing. */
const ROOT_LISTS: ReadonlyArray<readonly ApiRoot[]> = [0, 1, 2, 3].map((i) =>
  [...(i & 1 ? [OPENAI_ROOT] : []), ...(i & 2 ? [CONSOLE_ROOT] : []), ...ROOTS].sort((a, b) => b.path.length - a.path.length),
);

/**
 * Which paths below the mount point the service answers (`apiRoots`): `/v1` and below, the playground page
 * (`/playground`), the health checks (`/healthz`, `/readyz`), `/openai/v1` and below when the service serves the
 * OpenAI-compatible surface, and `/console` and below when it serves the console (pass the service:
 * `isApiPath(path, service)`). Everything else is left to the host, so mounting at the root does not swallow its own
 * routes.
 */
export function isApiPath(pathname: string, service?: ServedSurfaces): boolean {
  for (const root of apiRoots(service)) {
    if (pathname === root.path || pathname === `${root.path}/` || (root.below && pathname.startsWith(`${root.path}/`))) return true;
  }
  return false;
}
