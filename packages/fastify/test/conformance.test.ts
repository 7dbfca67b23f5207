import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { runConformanceSuite } from '@genservice/testing';
import { genservicePlugin } from '../src/index.js';

runConformanceSuite('fastify', async (service, { prefix, hostParsers }) => {
  // No frameworkErrors: the plugin itself hands URLs Fastify cannot route (broken percent-encoding) to core.
  const app = Fastify();
  if (hostParsers) {
    // Fastify's own JSON and text parsers are always there; add a host form parser and error handler too.
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => done(null, { form: body }));
    app.setErrorHandler((err: Error, _req, reply) => reply.code(599).send({ host: 'error handler', message: err.message }));
  }
  await app.register(genservicePlugin, { service, prefix });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}${prefix}`, close: () => app.close() };
});
