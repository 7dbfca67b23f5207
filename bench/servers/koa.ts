/**
 * Koa 3: ours = `genserviceMiddleware(service)`; bare = one middleware doing the same work, routing by hand (Koa has no router of its
 * own) that reads and parses the JSON body itself (Koa has no body parser of its own either).
 */
import Koa from 'koa';
import { genserviceMiddleware } from '@genservice/koa';
import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { BARE_UNAUTHORIZED, bareData, bareHeaders, fail, ourService, serve, variantArg, type Drained } from './common.js';

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

const GET_ONE = /^\/v1\/generations\/([^/]+)$/;

async function main(): Promise<void> {
  const variant = variantArg();
  const app = new Koa();
  // A client that hangs up mid-body (autocannon does when a run ends) is not worth a stack trace.
  app.silent = true;
  let id: string;
  let close = async (): Promise<void> => {};
  let drain: () => Promise<Drained>;
  if (variant === 'ours') {
    const ours = await ourService();
    id = ours.id;
    drain = ours.drain;
    app.use(genserviceMiddleware(ours.service));
    close = () => ours.service.stop({ timeoutMs: 1000 });
  } else {
    const bare = bareData();
    id = bare.id;
    drain = bare.drain;
    app.use(async (ctx, next) => {
      if (ctx.method === 'GET') {
        if (ctx.path === '/v1/models') {
          if (!bare.auth(ctx.get('authorization') || undefined)) {
            ctx.status = 401;
            ctx.body = BARE_UNAUTHORIZED;
            return;
          }
          ctx.type = 'application/json';
          ctx.set(bareHeaders());
          ctx.body = bare.modelsJson;
          return;
        }
        const m = GET_ONE.exec(ctx.path);
        if (m) {
          const userId = bare.auth(ctx.get('authorization') || undefined);
          if (!userId) {
            ctx.status = 401;
            ctx.body = BARE_UNAUTHORIZED;
            return;
          }
          const a = bare.get(userId, m[1]!);
          ctx.status = a.status;
          ctx.set(bareHeaders());
          ctx.body = a.body;
          return;
        }
      } else if (ctx.method === 'POST' && ctx.path === '/v1/generations') {
        const userId = bare.auth(ctx.get('authorization') || undefined);
        if (!userId) {
          ctx.status = 401;
          ctx.body = BARE_UNAUTHORIZED;
          return;
        }
        const a = bare.create(userId, await readJson(ctx.req));
        ctx.status = a.status;
        ctx.set(bareHeaders());
        ctx.body = a.body;
        return;
      }
      await next();
    });
  }
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  serve(server, id, close, drain);
}

main().catch(fail);
