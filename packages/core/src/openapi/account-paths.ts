import { z } from 'zod';
import { ADMIN, COMMON, errors, json, op, ref, schema, USER_PARAM, type Json } from './common.js';
import {
  adminAuditSchema,
  adminCreatedKeySchema,
  adminCreditSchema,
  adminKeySchema,
  adminNewKeySchema,
  adminNewUserSchema,
  adminUserSchema,
  balanceResponseSchema,
  usageResponseSchema,
} from '../http/schemas.js';

/** The paths of the account (balance, usage), the admin API, this document and result files. */
export function accountPaths(): Json {
  return {

  '/v1/balance': {
    get: op({
      operationId: 'getBalance',
      summary: 'Your balance',
      description: 'Spendable tokens (reserved ones are not included).',
      tag: 'Account',
      responses: { '200': { description: 'Spendable tokens', content: json(schema(balanceResponseSchema)) }, ...errors(...COMMON) },
    }),
  },
  '/v1/usage': {
    get: op({
      operationId: 'getUsage',
      summary: 'Your usage',
      description: `Settled spend and counts per UTC day, model or key, read from the ledger. \`from\` and \`to\` are days (both counted), at most 366 apart; by default the last 30 days.`,
      tag: 'Account',
      parameters: [
        { name: 'from', in: 'query', required: false, description: 'First day, YYYY-MM-DD', schema: { type: 'string', format: 'date' } },
        { name: 'to', in: 'query', required: false, description: 'Last day, YYYY-MM-DD (default today, UTC)', schema: { type: 'string', format: 'date' } },
        { name: 'groupBy', in: 'query', required: false, description: 'How to group', schema: { type: 'string', enum: ['day', 'model', 'key'], default: 'day' } },
      ],
      responses: { '200': { description: 'Usage', content: json(schema(usageResponseSchema)) }, ...errors(400, 403, ...COMMON) },
    }),
  },
  '/v1/admin/users': {
    post: op({
      operationId: 'adminCreateUser',
      summary: 'Create a user',
      description: 'Opens the user\u2019s account with a starting balance (default 0). Audited.',
      tag: 'Admin',
      security: ADMIN,
      requestBody: { required: true, content: json(schema(adminNewUserSchema, 'input')) },
      responses: { '201': { description: 'Created', content: json(schema(adminUserSchema)) }, ...errors(400, 404, 409, 413, 415, ...COMMON) },
    }),
  },
  '/v1/admin/users/{userId}/credits': {
    post: op({
      operationId: 'adminCredit',
      summary: 'Add credits to a user',
      description: 'Adds tokens to the balance, with a reason for the audit log.',
      tag: 'Admin',
      security: ADMIN,
      parameters: [USER_PARAM],
      requestBody: { required: true, content: json(schema(adminCreditSchema, 'input')) },
      responses: { '200': { description: 'The new balance', content: json(schema(balanceResponseSchema)) }, ...errors(400, 404, 413, 415, ...COMMON) },
    }),
  },
  '/v1/admin/users/{userId}/keys': {
    post: op({
      operationId: 'adminCreateKey',
      summary: 'Issue an API key',
      description: 'A key with a name, scopes, an optional model allow-list, budget and expiry. Its secret is in this answer only.',
      tag: 'Admin',
      security: ADMIN,
      parameters: [USER_PARAM],
      requestBody: { required: true, content: json(schema(adminNewKeySchema, 'input')) },
      responses: { '201': { description: 'The key and its secret', content: json(schema(adminCreatedKeySchema)) }, ...errors(400, 404, 413, 415, ...COMMON) },
    }),
    get: op({
      operationId: 'adminListKeys',
      summary: 'List a user\u2019s keys',
      description: 'Oldest first; never a secret.',
      tag: 'Admin',
      security: ADMIN,
      parameters: [USER_PARAM],
      responses: { '200': { description: 'The keys', content: json(schema(z.object({ data: z.array(adminKeySchema) }))) }, ...errors(400, 404, ...COMMON) },
    }),
  },
  '/v1/admin/keys/{keyId}': {
    delete: op({
      operationId: 'adminRevokeKey',
      summary: 'Revoke a key',
      description: 'Its next request is 401 on every instance (with `apiKeyCache` on, other instances within its `ttlMs`).',
      tag: 'Admin',
      security: ADMIN,
      parameters: [{ name: 'keyId', in: 'path', required: true, description: 'The keyId', schema: { type: 'string' } }],
      responses: { '204': { description: 'Revoked' }, ...errors(404, ...COMMON) },
    }),
  },
  '/v1/admin/audit': {
    get: op({
      operationId: 'adminAudit',
      summary: 'The audit log',
      description: 'Every admin action: who, what, when; newest first, a page at a time.',
      tag: 'Admin',
      security: ADMIN,
      parameters: [
        { name: 'limit', in: 'query', required: false, description: 'Entries per page', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
        { name: 'cursor', in: 'query', required: false, description: 'The nextCursor of the previous page', schema: { type: 'string' } },
      ],
      responses: { '200': { description: 'A page', content: json(schema(adminAuditSchema)) }, ...errors(400, 404, ...COMMON) },
    }),
  },
  '/v1/openapi.json': {
    get: op({
      operationId: 'getOpenApi',
      summary: 'This document',
      description: 'The OpenAPI 3.1 description of this service, with each model\u2019s settings schema.',
      tag: 'Meta',
      security: [],
      responses: { '200': { description: 'This document', content: json({ type: 'object' }) }, ...errors(405) },
    }),
  },
  '/v1/files/{key}': {
    get: op({
      operationId: 'getFile',
      summary: 'Download a result file',
      description: 'A signed, expiring URL (no key needed). Supports a single byte Range.',
      tag: 'Files',
      security: [],
      parameters: [
        { name: 'key', in: 'path', required: true, description: 'The file key', schema: { type: 'string' } },
        { name: 'exp', in: 'query', required: true, description: 'Expiry (seconds since the epoch)', schema: { type: 'string' } },
        { name: 'sig', in: 'query', required: true, description: 'Signature', schema: { type: 'string' } },
        { name: 'Range', in: 'header', required: false, description: 'One byte range', schema: { type: 'string' } },
      ],
      responses: {
        '200': { description: 'The file', content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } },
        '206': {
          description: 'Part of the file',
          headers: { 'Content-Range': { description: 'The bytes sent', schema: { type: 'string' } } },
          content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
        },
        '403': { description: 'Invalid or expired link', content: json(ref('Error')) },
        '404': { description: 'No such file', content: json(ref('Error')) },
        '416': { description: 'The range starts past the end', headers: { 'Content-Range': { description: '`bytes */size`', schema: { type: 'string' } } } },
        ...errors(405),
      },
    }),
  },
  };
}
