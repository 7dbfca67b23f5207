/**
 * @module @genservice/core/adapter
 *
 * For authors of framework adapters: the Node request/response plumbing every adapter shares, so an adapter only
 * translates (every status, header and body is decided by `service.handle`).
 *
 * @example
 * // A complete adapter for plain node:http
 * import { createServer } from 'node:http';
 * import { bodyLimitsOf, isApiPath, readRequestBody, writeNodeResponse } from '@genservice/core/adapter';
 *
 * createServer(async (req, res) => {
 *   const path = req.url ?? '/';
 *   if (!isApiPath(path.split('?')[0]!)) return void res.writeHead(404).end();
 *   const body = await readRequestBody(req, bodyLimitsOf(service), req.headers['content-length']);
 *   const out = await service.handle({
 *     method: req.method ?? 'GET',
 *     path,
 *     headers: req.headers,
 *     ...body,
 *     remoteAddress: req.socket.remoteAddress,
 *   });
 *   await writeNodeResponse(res, out);
 * }).listen(3000);
 */
export {
  bodyLimitsOf,
  bodylessRequestBody,
  isApiPath,
  readRawBody,
  readRequestBody,
  toRequestBody,
  type BodyLimits,
  type RawBody,
  type RequestBody,
} from './http/node-body.js';
export { needsNodeWrite, writeNodeResponse } from './http/node-response.js';
export { requestHeaders } from './http/node-request.js';
export type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
