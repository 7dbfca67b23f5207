import Koa from 'koa';
import { bodyParser } from '@koa/bodyparser';
import { listen, runConformanceSuite } from '@genservice/testing';
import { genserviceMiddleware } from '../src/index.js';

// The documented setup: genservice before the host's body parser.
runConformanceSuite('koa', async (service, { prefix, hostParsers }) => {
  const app = new Koa();
  app.use(genserviceMiddleware(service, { prefix }));
  if (hostParsers) app.use(bodyParser({ enableTypes: ['json', 'form', 'text'] }));
  return listen(app.callback(), prefix);
});
