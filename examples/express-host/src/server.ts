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
app.get('/healthz', (_req, res) => {
  res.json({ ok: true });
});
// The host parses JSON for its own routes; genservice still reads its raw bodies (see docs/adapters.md).
app.use(express.json());
app.use(host.config.mountPath, genserviceRouter(host.service));

await host.service.start();
const server = app.listen(host.config.port, host.config.host, () => announce(host));
limitServer(server);
closeOnSignals(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await host.close();
}, host.logger);
