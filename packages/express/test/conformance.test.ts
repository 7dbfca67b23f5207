import express from 'express';
import { listen, runConformanceSuite } from '@genservice/testing';
import { genserviceRouter } from '../src/index.js';

runConformanceSuite('express', async (service, { prefix, hostParsers }) => {
  const app = express();
  if (hostParsers) app.use(express.json(), express.urlencoded(), express.text());
  app.use(prefix || '/', genserviceRouter(service));
  return listen(app, prefix);
});
