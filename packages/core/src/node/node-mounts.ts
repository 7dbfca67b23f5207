import type { IncomingHttpHeaders } from 'node:http';
import { isApiPath, type ServedSurfaces } from './node-body.js';

/**
 * The mount points of the API on one server, for a framework hook that runs before (or outside) every mount, such as
 * Fastify's `frameworkErrors`: which mount a URL belongs to, and the path below it.
 */
type Mount = { prefix: string; service?: ServedSurfaces };

export class ApiMounts<M extends Mount> {
  private static readonly byServer = new WeakMap<object, ApiMounts<Mount>>();
  private mounts: M[] = [];

  /** The mounts of one server (any object standing for it, e.g. Node's `http.Server`): one list per server. */
  static of<M extends Mount>(server: object): ApiMounts<M> {
    let mounts = ApiMounts.byServer.get(server);
    if (mounts === undefined) ApiMounts.byServer.set(server, (mounts = new ApiMounts()));
    return mounts as unknown as ApiMounts<M>;
  }

  add(mount: M): void {
    // Longest prefix first, so a nested mount wins over one at a shorter prefix.
    this.mounts = [...this.mounts, mount].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The mount whose prefix an API path of `url` (still percent-encoded, query included) is under, with the rest of `url`. */
  find(url: string): { mount: M; path: string } | undefined {
    const q = url.indexOf('?');
    const pathname = q === -1 ? url : url.slice(0, q);
    const mount = this.mounts.find((m) => pathname.startsWith(m.prefix) && isApiPath(pathname.slice(m.prefix.length), m.service));
    return mount && { mount, path: url.slice(mount.prefix.length) };
  }
}

/** Error `type`s of body-parser (behind `express.json()` & co.) and co-body for a body core answers itself. */
const BODY_PARSER_ERRORS = new Set(['entity.parse.failed', 'entity.too.large', 'charset.unsupported', 'encoding.unsupported']);
/** Fastify's router errors for a URL it cannot decode (broken percent-encoding, an over-long parameter). */
const ROUTER_ERRORS = new Set(['FST_ERR_BAD_URL', 'FST_ERR_MAX_PARAM_LENGTH']);

/**
 * Whether core answers an error a framework or a host body parser raised before the adapter saw an API request, with
 * its own JSON (`400 invalid_json`, `413 payload_too_large`, `415`, the `404` of a broken URL), instead of the
 * framework's: a body the parser could not parse or found too large, a compressed body it failed to inflate, a URL the
 * router could not decode. Anything else is the host's. Hand the request to `toHttpRequest` with `hostBody: { error }`
 * for a body error; a router error needs nothing more.
 */
export function isCoreAnsweredError(err: unknown, headers: IncomingHttpHeaders): boolean {
  const { type, code } = (err ?? {}) as { type?: unknown; code?: unknown };
  // Fastify's own errors: only its router's are core's.
  if (typeof code === 'string' && code.startsWith('FST_')) return ROUTER_ERRORS.has(code);
  if (typeof type === 'string' && BODY_PARSER_ERRORS.has(type)) return true;
  // A compressed body the host parser failed to inflate: core answers it (415, whatever the parser made of it).
  return (headers['content-encoding'] ?? 'identity').trim().toLowerCase() !== 'identity';
}
