import express from 'express';
import { genserviceRouter } from '@genservice/express';
import { announce, closeOnSignals, createHost, limitServer } from '@genservice-examples/host-kit';

const host = await createHost();
const app = express();
// Nothing tells a client which framework answers.
app.disable('x-powered-by');

// The host's own routes, as any app has; genservice is one more mount beside them.
app.get('/', (_req, res) => {
  res.json({ app: 'express-host', genservice: `${host.config.publicUrl}${host.config.mountPath}/v1/models` });
});
// Health is genservice's own: <mount>/healthz (alive) and <mount>/readyz (store, ledger, queue answer).
// Prometheus metrics with METRICS=1, outside the API mount.
const metrics = host.metricsHandler;
if (metrics) app.get('/metrics', (req, res) => metrics(req, res));
// genservice first: it reads its own raw bodies with its own size and time limits, and answers unknown paths under
// its mount with its JSON 404 (nothing else of this host lives there). Then the host's JSON parser, for its own
// routes (a parser in front would read every hostile body to its end first; see docs/adapters.md).
// The MCP endpoint for AI agents (docs/mcp.md) first: the API's router answers every other path under its mount.
app.use(`${host.config.mountPath}/mcp`, host.mcpHandler);
app.use(host.config.mountPath, genserviceRouter(host.service, { notFound: true }));
app.use(express.json());

await host.service.start();
const server = app.listen(host.config.port, host.config.host, () => announce(host));
limitServer(server);
closeOnSignals(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await host.close();
}, host.logger);
