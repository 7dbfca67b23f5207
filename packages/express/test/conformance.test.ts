import express from 'express';
import { listen, runConformanceSuite } from '@genservice/testing';
import { genserviceRouter } from '../src/index.js';

runConformanceSuite('express', async (service, { prefix, hostParsers }) => {
  const app = express();
  if (hostParsers) app.use(express.json(), express.urlencoded(), express.text());
  // notFound: nothing of this app's lives under the prefix, so unknown paths there get genservice's JSON 404.
  app.use(prefix || '/', genserviceRouter(service, { notFound: prefix !== '' }));
  return listen(app, prefix);
});
