import { z } from 'zod';
import { jsonBody } from '../bodies.js';
import { pageCursor, querySchema } from '../query.js';
import { fail, json, Refusal } from '../respond.js';
import { type PathParam, type QueryParam, type RouteEntry, route } from '../route.js';
import {
  adminAuditSchema,
  adminCreatedKeySchema,
  adminCreditSchema,
  adminKeySchema,
  adminNewKeySchema,
  adminNewUserSchema,
  adminUserSchema,
  balanceResponseSchema,
} from '../schemas.js';
import type { HttpResponse } from '../types.js';
import { noContent } from './shared.js';

/** The admin API (served with the `admin` option, to admin keys only): users, credits, keys, the audit log. */

const USER_ID: PathParam = {
  doc: { name: 'userId', in: 'path', required: true, description: 'The host\u2019s user id', schema: { type: 'string' } },
  notFound: 'No such user or key.',
};
const KEY_ID: PathParam = {
  doc: { name: 'keyId', in: 'path', required: true, description: 'The keyId', schema: { type: 'string' } },
  notFound: 'No such user or key.',
};

/** `limit` of the audit log: digits here; its range (1 to 200) is `Accounts.auditLog`'s rule. */
const auditLimit: QueryParam<number> = {
  doc: { name: 'limit', in: 'query', required: false, description: 'Entries per page', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
  parse(value) {
    if (!/^[0-9]{1,4}$/.test(value)) {
      const message = 'limit must be an integer from 1 to 200';
      throw new Refusal(fail('invalid_request', `${message}.`, [{ field: 'limit', code: 'invalid_value', message }]));
    }
    return Number(value);
  },
};

/** An admin answer: never cached. */
function adminJson(status: number, value: unknown): HttpResponse {
  return json(status, JSON.stringify(value), { 'cache-control': 'no-store' });
}

export const adminRoutes: RouteEntry[] = [
  route({
    name: 'createUser',
    method: 'POST',
    path: '/v1/admin/users',
    auth: 'admin',
    body: jsonBody(adminNewUserSchema),
    answers: { 201: { description: 'Created', schema: adminUserSchema } },
    errors: [400, 404, 409, 413, 415],
    doc: { operationId: 'adminCreateUser', tag: 'Admin', summary: 'Create a user', description: 'Opens the user\u2019s account with a starting balance (default 0). Audited.' },
    handle: (call, s) => s.accounts.createUser(call.body() as never, { actor: call.actor }).then((user) => adminJson(201, user)),
  }),
  route({
    name: 'credit',
    method: 'POST',
    path: '/v1/admin/users/{userId}/credits',
    auth: 'admin',
    params: { userId: USER_ID },
    body: jsonBody(adminCreditSchema),
    answers: { 200: { description: 'The new balance', schema: balanceResponseSchema } },
    errors: [400, 404, 413, 415],
    doc: { operationId: 'adminCredit', tag: 'Admin', summary: 'Add credits to a user', description: 'Adds tokens to the balance, with a reason for the audit log.' },
    handle(call, s) {
      const userId = call.param('userId');
      return s.accounts.credit(userId, call.body() as never, { actor: call.actor }).then((balance) => adminJson(200, balance));
    },
  }),
  route({
    name: 'createKey',
    method: 'POST',
    path: '/v1/admin/users/{userId}/keys',
    auth: 'admin',
    params: { userId: USER_ID },
    body: jsonBody(adminNewKeySchema),
    answers: { 201: { description: 'The key and its secret', schema: adminCreatedKeySchema } },
    errors: [400, 404, 413, 415],
    doc: {
      operationId: 'adminCreateKey',
      tag: 'Admin',
      summary: 'Issue an API key',
      description: 'A key with a name, scopes, an optional model allow-list, budget and expiry. Its secret is in this answer only.',
    },
    handle(call, s) {
      const userId = call.param('userId');
      return s.accounts.createKey(userId, call.body() as never, { actor: call.actor }).then((key) => adminJson(201, key));
    },
  }),
  route({
    name: 'listKeys',
    method: 'GET',
    path: '/v1/admin/users/{userId}/keys',
    auth: 'admin',
    params: { userId: USER_ID },
    answers: { 200: { description: 'The keys', schema: z.object({ data: z.array(adminKeySchema) }) } },
    errors: [400, 404],
    doc: { operationId: 'adminListKeys', tag: 'Admin', summary: 'List a user\u2019s keys', description: 'Oldest first; never a secret.' },
    handle: (call, s) => s.accounts.listKeys(call.param('userId')).then((data) => adminJson(200, { data })),
  }),
  route({
    name: 'revokeKey',
    method: 'DELETE',
    path: '/v1/admin/keys/{keyId}',
    auth: 'admin',
    params: { keyId: KEY_ID },
    answers: { 204: { description: 'Revoked' } },
    errors: [404],
    doc: {
      operationId: 'adminRevokeKey',
      tag: 'Admin',
      summary: 'Revoke a key',
      description: 'Its next request is 401 on every instance (with `apiKeyCache` on, other instances within its `ttlMs`).',
    },
    handle: (call, s) => s.accounts.revokeKey(call.param('keyId'), { actor: call.actor }).then(noContent),
  }),
  route({
    name: 'audit',
    method: 'GET',
    path: '/v1/admin/audit',
    auth: 'admin',
    query: querySchema({ limit: auditLimit, cursor: pageCursor }, 'first'),
    answers: { 200: { description: 'A page', schema: adminAuditSchema } },
    errors: [400, 404],
    doc: { operationId: 'adminAudit', tag: 'Admin', summary: 'The audit log', description: 'Every admin action: who, what, when; newest first, a page at a time.' },
    handle: (call, s) => s.accounts.auditLog(call.query()).then((page) => adminJson(200, page)),
  }),
];
