/** Express 5: ours = `genserviceRouter(service)` mounted at the root; bare = three hand-written routes doing the same work. */
import express from 'express';
import { genserviceRouter } from '@genservice/express';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { BARE_UNAUTHORIZED, bareData, bareHeaders, fail, ourService, serve, variantArg, type Drained } from './common.js';

async function main(): Promise<void> {
  const variant = variantArg();
  const app = express();
  app.disable('x-powered-by');
  // No ETag on either side (ours sends none on a per-user answer): both write the same headers.
  app.disable('etag');
  let id: string;
  let close = async (): Promise<void> => {};
  let drain: () => Promise<Drained>;
  if (variant === 'ours') {
    const ours = await ourService();
    id = ours.id;
    drain = ours.drain;
    app.use(genserviceRouter(ours.service));
    close = () => ours.service.stop({ timeoutMs: 1000 });
  } else {
    const bare = bareData();
    id = bare.id;
    drain = bare.drain;
    app.get('/v1/generations/:id', (req, res) => {
      const userId = bare.auth(req.headers.authorization);
      if (!userId) {
        res.status(401).json(BARE_UNAUTHORIZED);
        return;
      }
      const a = bare.get(userId, req.params.id);
      res.status(a.status).set(bareHeaders()).json(a.body);
    });
    app.post('/v1/generations', express.json(), (req, res) => {
      const userId = bare.auth(req.headers.authorization);
      if (!userId) {
        res.status(401).json(BARE_UNAUTHORIZED);
        return;
      }
      const a = bare.create(userId, req.body);
      res.status(a.status).set(bareHeaders()).json(a.body);
    });
    app.get('/v1/models', (req, res) => {
      if (!bare.auth(req.headers.authorization)) {
        res.status(401).json(BARE_UNAUTHORIZED);
        return;
      }
      res.type('application/json').set(bareHeaders()).send(bare.modelsJson);
    });
  }
  const server: Server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  serve(server, id, close, drain);
}

main().catch(fail);
