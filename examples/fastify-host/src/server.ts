import Fastify from 'fastify';
import { genservicePlugin } from '@genservice/fastify';
import { announce, closeOnSignals, createHost, limitServer, SERVER_LIMITS } from '@genservice-examples/host-kit';

const host = await createHost();
// Fastify sets no request timeout by default: a body sent a byte every few seconds would be held for ever.
const app = Fastify({ logger: false, requestTimeout: SERVER_LIMITS.requestTimeoutMs });

// The host's own routes, as any app has; genservice is one more plugin beside them.
app.get('/', async () => ({ app: 'fastify-host', genservice: `${host.config.publicUrl}${host.config.mountPath}/v1/models` }));
// Health is genservice's own: <mount>/healthz (alive) and <mount>/readyz (store, ledger, queue answer).
// Prometheus metrics with METRICS=1, outside the API mount.
const metrics = host.metricsHandler;
if (metrics) {
  app.get('/metrics', (request, reply) => {
    reply.hijack();
    metrics(request.raw, reply.raw);
  });
}
// The MCP endpoint for AI agents (docs/mcp.md): handed the raw request before Fastify parses its body.
const mcp = host.mcpHandler;
app.route({
  method: ['GET', 'POST', 'DELETE'],
  url: `${host.config.mountPath}/mcp`,
  onRequest: async (request, reply) => {
    reply.hijack();
    await mcp(request.raw, reply.raw);
  },
  handler: async () => undefined,
});
await app.register(genservicePlugin, { service: host.service, prefix: host.config.mountPath });

await host.service.start();
await app.listen({ port: host.config.port, host: host.config.host });
limitServer(app.server);
announce(host);
closeOnSignals(async () => {
  await app.close();
  await host.close();
}, host.logger);
