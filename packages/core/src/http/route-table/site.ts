import { json as jsonContent, ref } from '../../openapi/common.js';
import { querySchema, text } from '../query.js';
import { type RouteEntry, route } from '../route.js';

/** What anyone may read: this document, result files behind signed links, health, the playground page and the console. */

const FILE = { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } };

export const siteRoutes: RouteEntry[] = [
  route({
    name: 'openapi',
    method: 'GET',
    path: '/v1/openapi.json',
    exact: true,
    auth: 'none',
    answers: { 200: { description: 'This document', content: jsonContent({ type: 'object' }) } },
    errors: [405],
    doc: {
      operationId: 'getOpenApi',
      tag: 'Meta',
      summary: 'This document',
      description: 'The OpenAPI 3.1 description of this service, with each model\u2019s settings schema.',
    },
    handle: (_call, s) => s.openapi.answer(),
  }),
  route({
    name: 'file',
    method: 'GET',
    path: '/v1/files/{key}',
    exact: true,
    auth: 'none',
    // A key that does not decode is a link that does not verify: the files route answers it (403), not a 404.
    params: { key: { doc: { name: 'key', in: 'path', required: true, description: 'The file key', schema: { type: 'string' } }, notFound: 'File not found.' } },
    query: querySchema(
      { exp: text('exp', 'Expiry (seconds since the epoch)', { type: 'string' }, true), sig: text('sig', 'Signature', { type: 'string' }, true) },
      'first',
    ),
    headers: [{ name: 'Range', in: 'header', required: false, description: 'One byte range', schema: { type: 'string' } }],
    answers: {
      200: { description: 'The file', content: FILE },
      206: { description: 'Part of the file', headers: { 'Content-Range': { description: 'The bytes sent', schema: { type: 'string' } } }, content: FILE },
      403: { description: 'Invalid or expired link', schema: ref('Error') },
      404: { description: 'No such file', schema: ref('Error') },
      416: { description: 'The range starts past the end', headers: { 'Content-Range': { description: '`bytes */size`', schema: { type: 'string' } } } },
    },
    errors: [405],
    doc: {
      operationId: 'getFile',
      tag: 'Files',
      summary: 'Download a result file',
      description: 'A signed, expiring URL (no key needed). Supports a single byte Range.',
    },
    handle(call, s) {
      const { exp, sig } = call.query();
      return s.files.serve(call.req, call.rawParam('key'), exp, sig);
    },
  }),
  route({ name: 'healthz', method: 'GET', path: '/healthz', auth: 'none', handle: (_call, s) => s.health.live() }),
  route({ name: 'readyz', method: 'GET', path: '/readyz', auth: 'none', handle: (_call, s) => s.health.ready() }),
  route({
    name: 'playground',
    method: 'GET',
    path: '/playground/{asset}',
    // `/playground` without the slash is '' (answered with a redirect, so the page's relative URLs resolve).
    pattern: /^\/playground(\/[^?]*)?$/,
    auth: 'none',
    handle: (call, s) => s.playground.serve(call.rawParam('asset'), call.rawQuery),
  }),
  route({
    name: 'console',
    method: 'GET',
    path: '/console/{asset}',
    // As the playground: `/console` without the slash is '' (a redirect to `console/`).
    pattern: /^\/console(\/[^?]*)?$/,
    auth: 'none',
    handle: (call, s) => s.playground.serveConsole(call.rawParam('asset'), call.rawQuery),
  }),
];
