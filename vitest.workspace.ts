// The one list of test projects. vitest 4 ignores this file on its own; vitest.config.ts passes it as `test.projects`.
import { fileURLToPath } from 'node:url';
import { readdirSync, existsSync } from 'node:fs';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * Tests import workspace packages from source, never from a build. Exact matches (regexes), so `@genservice/core`
 * does not swallow its subpaths `@genservice/core/ports` and `@genservice/core/adapter`.
 */
const alias = [
  { find: /^@genservice\/core\/ports$/, replacement: `${root}packages/core/src/ports.ts` },
  { find: /^@genservice\/core\/adapter$/, replacement: `${root}packages/core/src/adapter.ts` },
  ...readdirSync(`${root}packages`)
    .filter((dir) => existsSync(`${root}packages/${dir}/src/index.ts`))
    .map((dir) => ({ find: new RegExp(`^@genservice/${dir}$`), replacement: `${root}packages/${dir}/src/index.ts` })),
];

function project(name: string, dir: string, extra: Record<string, unknown> = {}) {
  return {
    resolve: { alias },
    test: {
      name,
      root: `${root}${dir}`,
      include: ['test/**/*.test.ts'],
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...extra,
    },
  };
}

export default [
  project('core', 'packages/core'),
  project('testing', 'packages/testing'),
  project('express', 'packages/express'),
  project('fastify', 'packages/fastify'),
  project('koa', 'packages/koa'),
  project('demo-models', 'packages/demo-models'),
  project('client', 'packages/client'),
  project('ai-sdk', 'packages/ai-sdk'),
  project('providers', 'packages/providers'),
  project('playground', 'packages/playground', { fileParallelism: false }),
  project('store-sqlite', 'packages/store-sqlite'),
  project('store-postgres', 'packages/store-postgres', { fileParallelism: false }),
  project('blob-s3', 'packages/blob-s3'),
  project('metrics-prometheus', 'packages/metrics-prometheus'),
  project('mcp', 'packages/mcp', { fileParallelism: false }),
  project('queue-bullmq', 'packages/queue-bullmq', { fileParallelism: false }),
  project('queue-pgboss', 'packages/queue-pgboss', { fileParallelism: false }),
  project('examples', 'examples', { include: ['test/**/*.test.ts'], fileParallelism: false }),
  project('docs', 'examples/doc-blocks'),
];
