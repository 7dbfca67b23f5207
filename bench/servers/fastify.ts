/** Fastify 5: ours = `app.register(genservicePlugin, { service })`; bare = three hand-written routes. */
import Fastify from 'fastify';
import { genservicePlugin } from '@genservice/fastify';
import { bareData, fail, ourService, serve, variantArg } from './common.js';

async function main(): Promise<void> {
  const variant = variantArg();
  const app = Fastify({ logger: false });
  let id: string;
  let close = async (): Promise<void> => {};
  if (variant === 'ours') {
    const ours = await ourService();
    id = ours.id;
    await app.register(genservicePlugin, { service: ours.service });
    close = () => ours.service.stop({ timeoutMs: 1000 });
  } else {
    const bare = bareData();
    id = bare.id;
    app.get<{ Params: { id: string } }>('/v1/generations/:id', async (req, reply) => {
      const g = bare.store.get(req.params.id);
      if (!g) {
        reply.code(404);
        return { error: { code: 'not_found', message: 'Generation not found.' } };
      }
      return g;
    });
    app.post('/v1/generations', async (req, reply) => {
      reply.code(201);
      return { generationId: bare.id, modelId: (req.body as { modelId?: unknown } | undefined)?.modelId };
    });
    app.get('/v1/models', async (_req, reply) => {
      reply.type('application/json; charset=utf-8');
      return bare.modelsJson;
    });
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  serve(app.server, id, async () => {
    await close();
  });
}

main().catch(fail);
