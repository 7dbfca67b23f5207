/** Fastify 5: ours = `app.register(genservicePlugin, { service })`; bare = three hand-written routes doing the same work. */
import Fastify from 'fastify';
import { genservicePlugin } from '@genservice/fastify';
import { BARE_UNAUTHORIZED, bareData, bareHeaders, fail, ourService, serve, variantArg, type Drained } from './common.js';

async function main(): Promise<void> {
  const variant = variantArg();
  const app = Fastify({ logger: false });
  let id: string;
  let close = async (): Promise<void> => {};
  let drain: () => Promise<Drained>;
  if (variant === 'ours') {
    const ours = await ourService();
    id = ours.id;
    drain = ours.drain;
    await app.register(genservicePlugin, { service: ours.service });
    close = () => ours.service.stop({ timeoutMs: 1000 });
  } else {
    const bare = bareData();
    id = bare.id;
    drain = bare.drain;
    app.get<{ Params: { id: string } }>('/v1/generations/:id', async (req, reply) => {
      const userId = bare.auth(req.headers.authorization);
      if (!userId) return reply.code(401).send(BARE_UNAUTHORIZED);
      const a = bare.get(userId, req.params.id);
      reply.code(a.status).headers(bareHeaders());
      return a.body;
    });
    app.post('/v1/generations', async (req, reply) => {
      const userId = bare.auth(req.headers.authorization);
      if (!userId) return reply.code(401).send(BARE_UNAUTHORIZED);
      const a = bare.create(userId, req.body);
      reply.code(a.status).headers(bareHeaders());
      return a.body;
    });
    app.get('/v1/models', async (req, reply) => {
      if (!bare.auth(req.headers.authorization)) return reply.code(401).send(BARE_UNAUTHORIZED);
      reply.type('application/json; charset=utf-8').headers(bareHeaders());
      return bare.modelsJson;
    });
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  serve(app.server, id, close, drain);
}

main().catch(fail);
