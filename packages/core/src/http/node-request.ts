import { IncomingMessage } from 'node:http';
import type { HttpRequest } from './types.js';

/**
 * The headers to hand `service.handle`: the request's own, unless it carries more than one Authorization header.
 * Node keeps only the first of those in `headers`; core must see them all to refuse the request, so then the copy
 * has every value in `authorization` (what `headersDistinct.authorization` holds).
 *
 * On a real IncomingMessage this scans `rawHeaders` for the (13-character) name instead of reading
 * `headersDistinct`, which builds an array for every header of every request just to look at one. Anything else
 * (an injected request of a test framework) keeps the `headersDistinct` reading.
 */
export function requestHeaders(req: IncomingMessage, headers: HttpRequest['headers'] = req.headers): HttpRequest['headers'] {
  if (!(req instanceof IncomingMessage)) {
    const auth = (req as { headersDistinct?: Record<string, string[] | undefined> }).headersDistinct?.authorization;
    return auth && auth.length > 1 ? { ...headers, authorization: auth } : headers;
  }
  const raw = req.rawHeaders;
  let found = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') found++;
  }
  if (found < 2) return headers;
  const all: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') all.push(raw[i + 1]!);
  }
  return { ...headers, authorization: all };
}
