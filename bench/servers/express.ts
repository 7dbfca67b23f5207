/** Express 5: ours = `genserviceRouter(service)` mounted at the root; bare = three hand-written routes. */
import express from 'express';
import { genserviceRouter } from '@genservice/express';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { bareData, fail, ourService, serve, variantArg } from './common.js';

async function main(): Promise<void> {
  const variant = variantArg();
  const app = express();
  app.disable('x-powered-by');
  let id: string;
  let close = async (): Promise<void> => {};
  if (variant === 'ours') {
    const ours = await ourService();
    id = ours.id;
    app.use(genserviceRouter(ours.service));
    close = () => ours.service.stop({ timeoutMs: 1000 });
  } else {
    const bare = bareData();
    id = bare.id;
    app.get('/v1/generations/:id', (req, res) => {
      const g = bare.store.get(req.params.id);
      if (!g) {
        res.status(404).json({ error: { code: 'not_found', message: 'Generation not found.' } });
        return;
      }
      res.json(g);
    });
    app.post('/v1/generations', express.json(), (req, res) => {
      res.status(201).json({ generationId: bare.id, modelId: (req.body as { modelId?: unknown } | undefined)?.modelId });
    });
    app.get('/v1/models', (_req, res) => {
      res.type('application/json').send(bare.modelsJson);
    });
  }
  const server: Server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  serve(server, id, close);
}

main().catch(fail);
