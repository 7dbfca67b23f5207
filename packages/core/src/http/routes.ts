import type { AdminRoute } from './accounts-routes.js';
import { fail } from './respond.js';
import type { HttpResponse } from './types.js';

export type Route =
  | { name: 'models' }
  | { name: 'create' }
  | { name: 'list' }
  | { name: 'quote' }
  | { name: 'get'; id: string; details?: true }
  | { name: 'events'; id: string }
  | { name: 'deliveries'; id: string }
  | { name: 'webhookSecret' }
  | { name: 'rotateWebhookSecret' }
  | { name: 'cancel'; id: string }
  | { name: 'delete'; id: string }
  | { name: 'balance' }
  | { name: 'usage' }
  | { name: 'createBatch' }
  | { name: 'getBatch'; id: string }
  | { name: 'batchGenerations'; id: string }
  | { name: 'cancelBatch'; id: string }
  | AdminRoute
  | { name: 'openapi' }
  | { name: 'healthz' }
  | { name: 'readyz' }
  | { name: 'playground'; asset: string }
  | { name: 'file'; key: string };

interface RouteEntry {
  template: string;
  pattern: RegExp;
  methods: Record<string, (m: RegExpExecArray) => Route>;
}

const ROUTES: RouteEntry[] = [
  { template: '/v1/models', pattern: /^\/v1\/models\/?$/, methods: { GET: () => ({ name: 'models' }) } },
  {
    template: '/v1/generations',
    pattern: /^\/v1\/generations\/?$/,
    methods: { GET: () => ({ name: 'list' }), POST: () => ({ name: 'create' }) },
  },
  { template: '/v1/quotes', pattern: /^\/v1\/quotes\/?$/, methods: { POST: () => ({ name: 'quote' }) } },
  { template: '/v1/generations/{id}', pattern: /^\/v1\/generations\/([^/]+)\/?$/, methods: { GET: (m) => ({ name: 'get', id: m[1]! }), DELETE: (m) => ({ name: 'delete', id: m[1]! }) } },
  // The details view has a path of its own (also `?include=details` on the poll): a generated client types the poll's
  // answer as exactly the contract's per-status shapes only when no other shape shares its operation.
  {
    template: '/v1/generations/{id}/details',
    pattern: /^\/v1\/generations\/([^/]+)\/details\/?$/,
    methods: { GET: (m) => ({ name: 'get', id: m[1]!, details: true }) },
  },
  {
    template: '/v1/generations/{id}/events',
    pattern: /^\/v1\/generations\/([^/]+)\/events\/?$/,
    methods: { GET: (m) => ({ name: 'events', id: m[1]! }) },
  },
  {
    template: '/v1/generations/{id}/webhook-deliveries',
    pattern: /^\/v1\/generations\/([^/]+)\/webhook-deliveries\/?$/,
    methods: { GET: (m) => ({ name: 'deliveries', id: m[1]! }) },
  },
  { template: '/v1/webhooks/secret', pattern: /^\/v1\/webhooks\/secret\/?$/, methods: { GET: () => ({ name: 'webhookSecret' }) } },
  {
    template: '/v1/webhooks/secret/rotate',
    pattern: /^\/v1\/webhooks\/secret\/rotate\/?$/,
    methods: { POST: () => ({ name: 'rotateWebhookSecret' }) },
  },
  {
    template: '/v1/generations/{id}/cancel',
    pattern: /^\/v1\/generations\/([^/]+)\/cancel\/?$/,
    methods: { POST: (m) => ({ name: 'cancel', id: m[1]! }) },
  },
  { template: '/v1/batches', pattern: /^\/v1\/batches\/?$/, methods: { POST: () => ({ name: 'createBatch' }) } },
  { template: '/v1/batches/{id}', pattern: /^\/v1\/batches\/([^/]+)\/?$/, methods: { GET: (m) => ({ name: 'getBatch', id: m[1]! }) } },
  {
    template: '/v1/batches/{id}/generations',
    pattern: /^\/v1\/batches\/([^/]+)\/generations\/?$/,
    methods: { GET: (m) => ({ name: 'batchGenerations', id: m[1]! }) },
  },
  {
    template: '/v1/batches/{id}/cancel',
    pattern: /^\/v1\/batches\/([^/]+)\/cancel\/?$/,
    methods: { POST: (m) => ({ name: 'cancelBatch', id: m[1]! }) },
  },
  { template: '/v1/balance', pattern: /^\/v1\/balance\/?$/, methods: { GET: () => ({ name: 'balance' }) } },
  { template: '/v1/usage', pattern: /^\/v1\/usage\/?$/, methods: { GET: () => ({ name: 'usage' }) } },
  { template: '/v1/admin/users', pattern: /^\/v1\/admin\/users\/?$/, methods: { POST: () => ({ name: 'admin', op: 'createUser' }) } },
  {
    template: '/v1/admin/users/{userId}/credits',
    pattern: /^\/v1\/admin\/users\/([^/]+)\/credits\/?$/,
    methods: { POST: (m) => ({ name: 'admin', op: 'credit', userId: m[1]! }) },
  },
  {
    template: '/v1/admin/users/{userId}/keys',
    pattern: /^\/v1\/admin\/users\/([^/]+)\/keys\/?$/,
    methods: { POST: (m) => ({ name: 'admin', op: 'createKey', userId: m[1]! }), GET: (m) => ({ name: 'admin', op: 'listKeys', userId: m[1]! }) },
  },
  {
    template: '/v1/admin/keys/{keyId}',
    pattern: /^\/v1\/admin\/keys\/([^/]+)\/?$/,
    methods: { DELETE: (m) => ({ name: 'admin', op: 'revokeKey', keyId: m[1]! }) },
  },
  { template: '/v1/admin/audit', pattern: /^\/v1\/admin\/audit\/?$/, methods: { GET: () => ({ name: 'admin', op: 'audit' }) } },
  { template: '/healthz', pattern: /^\/healthz\/?$/, methods: { GET: () => ({ name: 'healthz' }) } },
  { template: '/readyz', pattern: /^\/readyz\/?$/, methods: { GET: () => ({ name: 'readyz' }) } },
  { template: '/v1/openapi.json', pattern: /^\/v1\/openapi\.json$/, methods: { GET: () => ({ name: 'openapi' }) } },
  {
    template: '/playground/{asset}',
    pattern: /^\/playground(\/[^?]*)?$/,
    // `/playground` without the slash is '' (answered with a redirect, so the page's relative URLs resolve).
    methods: { GET: (m) => ({ name: 'playground', asset: m[1] ?? '' }) },
  },
  { template: '/v1/files/{key}', pattern: /^\/v1\/files\/([^/]+)$/, methods: { GET: (m) => ({ name: 'file', key: m[1]! }) } },
];

/** Every `METHOD /path/{param}` the handler serves; the OpenAPI test checks the document lists exactly these. */
export const SERVED_ROUTES: readonly string[] = ROUTES.filter((r) => r.template.startsWith('/v1/')).flatMap((r) =>
  Object.keys(r.methods).map((m) => `${m} ${r.template}`),
);

/** The methods a path answers (GET brings HEAD); undefined for a path that is no endpoint. */
export function allowedMethods(path: string): string[] | undefined {
  const route = ROUTES.find((r) => r.pattern.test(path));
  return route && methodsOf(route);
}

function methodsOf(route: RouteEntry): string[] {
  return Object.keys(route.methods).flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]));
}

/** The route of a method and path (query string removed); the 404 or 405 answer when there is none. */
export function matchRoute(method: string, path: string): (Route & { template: string }) | HttpResponse {
  for (const r of ROUTES) {
    const m = r.pattern.exec(path);
    if (!m) continue;
    const make = r.methods[method];
    if (!make) return fail('method_not_allowed', `Method ${method} is not allowed here.`, undefined, { allow: methodsOf(r).join(', ') });
    const route = make(m) as Route & { template: string };
    route.template = r.template;
    return route;
  }
  return fail('not_found', 'No such endpoint.');
}
