/**
 * @module @genservice/core/adapter
 *
 * For authors of framework adapters: one function from a Node request to core's request, and one writer of core's
 * answer, so an adapter only mounts (every status, header and body is decided by `service.handle`).
 *
 * @example
 * // A complete adapter for plain node:http
 * import { createServer } from 'node:http';
 * import { bodyLimitsOf, handleNodeRequest, isApiPath, writeNodeResponse } from '@genservice/core/adapter';
 *
 * createServer(async (req, res) => {
 *   if (!isApiPath((req.url ?? '/').split('?')[0]!)) return void res.writeHead(404).end();
 *   const answer = await handleNodeRequest(service, req, { limits: bodyLimitsOf(service), remoteAddress: req.socket.remoteAddress });
 *   await writeNodeResponse(res, answer);
 * }).listen(3000);
 */
export { apiRoots, type ApiRoot, bodyLimitsOf, isApiPath, readRawBody, readRequestBody, type BodyLimits, type RawBody, type RequestBody, type ServedSurfaces } from './node/node-body.js';
export { ApiMounts, isCoreAnsweredError } from './node/node-mounts.js';
export { needsNodeWrite, nodeBody, writeNodeResponse } from './node/node-response.js';
export { handleNodeRequest, RawHostBody, toHttpRequest, type HostBody, type NodeRequestOptions } from './node/node-request.js';
export type { BaseUrl, HttpRequest, HttpResponse } from './http/types.js';
