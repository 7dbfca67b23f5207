import Koa from 'koa';
import Router from '@koa/router';
import { genserviceMiddleware } from '@genservice/koa';
import { announce, closeOnSignals, createHost, limitServer } from '@genservice-examples/host-kit';

const host = await createHost();
const app = new Koa();
const router = new Router();

// The host's own routes, as any app has; genservice is one more middleware beside them.
router.get('/', (ctx) => {
  ctx.body = { app: 'koa-host', genservice: `${host.config.publicUrl}${host.config.mountPath}/v1/models` };
});
// Health is genservice's own: <mount>/healthz (alive) and <mount>/readyz (store, ledger, queue answer).
// Prometheus metrics with METRICS=1, outside the API mount.
const metrics = host.metricsHandler;
if (metrics) {
  router.get('/metrics', (ctx) => {
    ctx.respond = false;
    metrics(ctx.req, ctx.res);
  });
}
// The MCP endpoint for AI agents (docs/mcp.md): Koa stands aside and the handler writes the answer.
const mcp = host.mcpHandler;
app.use(async (ctx, next) => {
  if (ctx.path !== `${host.config.mountPath}/mcp`) return next();
  ctx.respond = false;
  await mcp(ctx.req, ctx.res);
});
app.use(genserviceMiddleware(host.service, { prefix: host.config.mountPath }));
app.use(router.routes()).use(router.allowedMethods());

await host.service.start();
const server = app.listen(host.config.port, host.config.host, () => announce(host));
limitServer(server);
closeOnSignals(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await host.close();
}, host.logger);
